"""The torch front end on CUDA tensors (skipped without a GPU and the cuda backend): the same
step as on the CPU, on the current stream. Run on a GPU by src/optim/cuda/gpu_check.sh (phases
`build torch`); on an H200, 2026-11-30: all 6 pass."""
from __future__ import annotations

import pytest
import torch

from luminamoon import optim
from luminamoon.optim import LuminaV

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not any(n == "cuda" and ok for n, ok, _ in optim.backends()),
    reason="needs a CUDA GPU and the cuda backend")


@pytest.mark.parametrize("mode,extra", [("clm", {}), ("tdclm", dict(td_factor="tensor", cautious=True, bound="tensor",
                                                                     bound_ratio=0.01))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_parameters_step_like_cpu_parameters_on_the_current_stream(mode, extra, dtype):
    torch.manual_seed(0)
    shapes = [(64, 33), (33,), (5,)]
    cpu = [torch.nn.Parameter((torch.randn(s) * 0.5).to(dtype)) for s in shapes]
    gpu = [torch.nn.Parameter(p.detach().cuda()) for p in cpu]
    opt_cpu = LuminaV(cpu, lr=1e-2, mode=mode, backend="scalar", **extra)
    opt_gpu = LuminaV(gpu, lr=1e-2, mode=mode, **extra)
    stream = torch.cuda.Stream()
    for step in range(3):
        grads = [(torch.randn(s) * 0.01).to(dtype) for s in shapes]
        for p, q, g in zip(cpu, gpu, grads):
            p.grad, q.grad = g.clone(), g.cuda()
        opt_cpu.step()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            opt_gpu.step()
        assert optim.last_backend().startswith("cuda")
        stream.synchronize()
    for p, q in zip(cpu, gpu):
        master_p, master_q = opt_cpu.state[p].get("master", p.detach()), opt_gpu.state[q].get("master", q.detach())
        torch.testing.assert_close(master_q.cpu().float(), master_p.float(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt_gpu.state[q]["exp_avg"].cpu(), opt_cpu.state[p]["exp_avg"], rtol=1e-5, atol=1e-7)


def test_cuda_non_finite_gradient_changes_nothing():
    p = torch.nn.Parameter(torch.randn(100, device="cuda"))
    opt = LuminaV([p])
    p.grad = torch.randn(100, device="cuda")
    opt.step()
    before = [p.detach().clone()] + [v.clone() for v in opt.state[p].values()]
    p.grad[7] = float("nan")
    with pytest.raises(optim.NonFiniteGradientError):
        opt.step(sync=True)  # without sync the error comes at the next step (Note [asynchronous errors])
    after = [p.detach()] + list(opt.state[p].values())
    assert all(torch.equal(a, b) for a, b in zip(before, after))


def test_functional_step_on_cuda_tensors():
    x = torch.randn(257, device="cuda")
    g, m, v = torch.randn_like(x) * 0.01, torch.zeros_like(x), torch.zeros_like(x)
    xc, gc, mc, vc = (t.cpu().clone() for t in (x, g, m, v))
    kw = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1)
    optim.step(x, g, m, v, **kw)
    optim.step(xc, gc, mc, vc, **kw, backend="scalar")
    torch.testing.assert_close(x.cpu(), xc, rtol=1e-6, atol=1e-7)
