"""luminamoon.optim.LuminaV with CUDA tensors: the cuda backend on torch's current
stream, against torch.optim.AdamW on the same GPU and against LuminaV on the CPU.

Skips unless torch sees a CUDA device and the installed luminamoon's cuda backend
is available (src/optim/cuda/gpu_check.sh builds and runs it on a GPU machine).
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)
_native = pytest.importorskip("luminamoon._native")
if not dict((n, a) for n, a, _ in _native.backends()).get("cuda"):
    pytest.skip("the cuda backend is unavailable: " + dict((n, w) for n, _, w in _native.backends()).get("cuda", "not built"),
                allow_module_level=True)

from luminamoon import optim as lm_optim  # noqa: E402
from luminamoon.optim.torch_optimizer import LuminaV  # noqa: E402


def model_params(device, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(512, 384), (384,), (1000, 7), (3,), (65537,)]
    return [torch.nn.Parameter((torch.randn(s, generator=gen) * 0.3).to(device=device, dtype=dtype)) for s in shapes]


def set_grads(params, step, seed=1):
    gen = torch.Generator().manual_seed(seed * 1000 + step)
    for p in params:
        p.grad = (torch.randn(p.shape, generator=gen) * 0.01).to(device=p.device, dtype=p.dtype)


def test_adamw_defaults_on_cuda_match_torch_adamw():
    ours, ref = model_params("cuda"), model_params("cuda")
    opt = LuminaV(ours, lr=1e-3, weight_decay=0.01)
    ref_opt = torch.optim.AdamW(ref, lr=1e-3, weight_decay=0.01, foreach=False)
    for step in range(1, 6):
        set_grads(ours, step)
        set_grads(ref, step)
        opt.step()
        ref_opt.step()
    assert lm_optim.last_backend().startswith("cuda"), lm_optim.last_backend()
    for a, b in zip(ours, ref):
        err = float((a.detach() - b.detach()).abs().max() / b.detach().abs().max())
        assert err <= 1e-5, err


@pytest.mark.parametrize("mode,options", [("clm", dict(lam=0.1, tau=1.0, cautious=True, bound="tensor", bound_ratio=1e-3)),
                                          ("tdclm", dict(td_factor="tensor", cautious=True, bound="element",
                                                         bound_ratio=1e-2)),
                                          ("tdclm", dict(td_factor="factored", bound="rms", bound_ratio=0.3))])
def test_every_option_on_cuda_matches_the_cpu_backends(mode, options):
    gpu, cpu = model_params("cuda", seed=3), model_params("cpu", seed=3)
    opt_gpu = LuminaV(gpu, mode=mode, **options)
    opt_cpu = LuminaV(cpu, mode=mode, **options)
    for step in range(1, 21):
        set_grads(gpu, step, seed=4)
        set_grads(cpu, step, seed=4)
        opt_gpu.step()
        opt_cpu.step()
    for a, b in zip(gpu, cpu):
        err = float((a.detach().cpu() - b.detach()).abs().max() / b.detach().abs().max())
        assert err <= 1e-5, err


def test_bf16_parameters_with_master_weights_round_like_the_cpu():
    gpu, cpu = model_params("cuda", torch.bfloat16, seed=5), model_params("cpu", torch.bfloat16, seed=5)
    opt_gpu, opt_cpu = LuminaV(gpu, seed=7), LuminaV(cpu, seed=7)
    for step in range(1, 4):
        set_grads(gpu, step, seed=6)
        set_grads(cpu, step, seed=6)
        opt_gpu.step()
        opt_cpu.step()
    for a, b, pa, pb in zip(gpu, cpu, opt_gpu.param_groups[0]["params"], opt_cpu.param_groups[0]["params"]):
        ma, mb = opt_gpu.state[pa]["master"].cpu(), opt_cpu.state[pb]["master"]
        same = ma == mb
        assert same.float().mean() > 0.999
        # Stochastic rounding is keyed on (seed, step, index): the same bits where fp32 agrees.
        assert torch.equal(a.detach().cpu()[same], b.detach()[same])


def test_steps_on_the_current_stream_without_device_synchronisation():
    params = model_params("cuda", seed=8)
    opt = LuminaV(params, mode="clm", check_finite=False)  # no pass-1 read-back at all
    side = torch.cuda.Stream()
    set_grads(params, 1)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda.set_sync_debug_mode("error")  # a torch-side synchronisation would raise
        try:
            opt.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    side.synchronize()
    assert lm_optim.last_backend().startswith("cuda")


def test_non_contiguous_and_unsupported_dtype_inputs_are_refused():
    p = torch.nn.Parameter(torch.randn(64, 32, device="cuda").t())  # a transposed view
    p.grad = torch.randn(64, 32, device="cuda").t()
    with pytest.raises(ValueError, match="contiguous"):
        LuminaV([p]).step()
    q = torch.nn.Parameter(torch.randn(100, device="cuda", dtype=torch.float64))
    q.grad = torch.randn(100, device="cuda", dtype=torch.float64)
    with pytest.raises(ValueError, match="dtype"):
        LuminaV([q]).step()
