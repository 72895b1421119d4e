"""backend="triton" on the CPU: the Triton kernels under TRITON_INTERPRET=1 against the float64 reference.

Every mode (CLM, TD-CLM factored/row/tensor, per-element TD-CLM), every option
(soft clip, look-ahead, cautious mask, both bounds, loss scale), fp32/bf16/fp16
parameters and gradients with fp32 masters, the stochastic rounding bits, the
tanh contract, the device-side verdict (non-finite gradients, found_inf) and
LuminaV(backend="triton") against torch.optim.AdamW. Sizes are small: the
interpreter runs one program instance in 1-3 ms.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton_kernels is imported

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from luminav_reference import (BF16, Hyper, bf16_rne_bits, bf16_stochastic_bits, exp_avg_sq_length,  # noqa: E402
                               f16_stochastic_bits, reference_step, rounding_bits_array)
from luminav_triton_cases import DTYPES, MODES, OPTIONS, check_against_reference, one_step, options_of  # noqa: E402

from luminamoon.optim import NonFiniteGradientError  # noqa: E402
from luminamoon.optim import triton_kernels as tk  # noqa: E402
from luminamoon.optim.triton_step import GroupStep, TensorStep, TritonStepPlan  # noqa: E402

from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

if not isinstance(tk.apply_kernel, InterpretedFunction):
    pytest.skip("the Triton kernels were imported without TRITON_INTERPRET=1 in this process",
                allow_module_level=True)

@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("mode", MODES)
def test_fp32_every_mode_and_option_against_reference(mode, option):
    hp = MODES[mode].with_(**OPTIONS[option])
    p, state, ref, status, counter = one_step(hp, (48, 40))
    assert status.tolist() == [0, 0, 0, 0]
    assert counter.item() == 3.0
    check_against_reference(hp, p, state, ref, master=False)
    if hp.bound_mode:
        assert ref.bound_binds, "the bound must bind for the test to exercise it"


@pytest.mark.parametrize("shape", [(300,), (), (7, 1)])
def test_per_element_tdclm_is_clm_and_odd_shapes(shape):
    """A 1-D (or R x 1) TD-CLM tensor keeps one second moment per element; 0-D tensors work."""
    hp = Hyper(buffer_mode=1, td_factor="factored", cautious=True)
    p, state, ref, status, _ = one_step(hp, shape)
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=False)


@triton.jit
def _row_and_column_kernel(r_out, c_out, first, cols, BLOCK: tl.constexpr):
    start = first + tl.program_id(0).to(tl.int64) * BLOCK
    r, c = tk.row_and_column(start + tl.arange(0, BLOCK), start, cols)
    out = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(r_out + out, r)
    tl.store(c_out + out, c)


@pytest.mark.parametrize("cols", [3, 300, 1000003, (1 << 29) - 1, (1 << 29) + 1, (1 << 40) + 3])
def test_row_and_column_without_division_equal_divmod(cols):
    """Note [row index without division]: pass 2's row and column of element i are i // C and i % C, in
    the 32-bit form (C < 2^29) and the 64-bit one, in windows of programs across row boundaries."""
    block = 1024
    for first_program in {0, cols // block - 1, 3 * cols // block - 1, 1 << 23}:
        first = max(first_program, 0) * block
        r = torch.zeros(3 * block, dtype=torch.int64)
        c = torch.zeros(3 * block, dtype=torch.int64)
        _row_and_column_kernel[(3,)](r, c, first, cols, BLOCK=block)
        i = first + np.arange(3 * block, dtype=np.int64)
        np.testing.assert_array_equal(r.numpy(), i // cols)
        np.testing.assert_array_equal(c.numpy(), i % cols)


@triton.jit
def _second_kernel(out, row_ptr, col_ptr, n, cols, KIND: tl.constexpr, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tk.second_of(out, out, row_ptr, col_ptr, offs, start, mask, cols, KIND), mask=mask)


@pytest.mark.parametrize("kind", [2, 3])
@pytest.mark.parametrize("rows,cols", [(3, 2048), (4, 1500), (5, 700)])
def test_second_moment_of_programs_inside_and_across_rows(kind, rows, cols):
    """Note [programs inside one row]: pass 2's second moment of element i is row[i // C] (row) or
    row[i // C] * col_over_rho[i % C] (factored), bit for bit, whether a 1024-element program lies in
    one row (every one at C = 2048; some at C = 1500) or crosses rows (C = 700)."""
    block = 1024
    n = rows * cols
    gen = torch.Generator().manual_seed(rows * cols)
    row = torch.rand(rows, generator=gen) + 0.5
    col = torch.rand(cols, generator=gen) + 0.5
    out = torch.full((n,), float("nan"))
    _second_kernel[(-(-n // block),)](out, row, col, n, cols, KIND=kind, BLOCK=block)
    i = np.arange(n)
    want = row.numpy()[i // cols]
    if kind == 3:
        want = want * col.numpy()[i % cols]  # float32 products, as the kernel rounds them
    np.testing.assert_array_equal(out.numpy().view(np.uint32), want.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("td_factor", ["factored", "row"])
@pytest.mark.parametrize("pdtype", ["f32", "bf16"])
def test_wide_rows_step_as_the_reference(td_factor, pdtype):
    """A TD-CLM step whose pass-2 programs lie inside one row (3 x 1536: three of its five) against the
    float64 reference, with bf16 parameters' stochastically rounded bits from their masters."""
    hp = Hyper(buffer_mode=1, td_factor=td_factor, tau=0.1)
    master = pdtype != "f32"
    p, state, ref, status, _ = one_step(hp, (3, 1536), DTYPES[pdtype], master=master, seed=5)
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=master)
    if master:
        x32 = state["master"].numpy().reshape(-1)
        want = bf16_stochastic_bits(x32, rounding_bits_array(5, 3, np.arange(x32.size)))
        np.testing.assert_array_equal(p.view(torch.int16).numpy().view(np.uint16).reshape(-1), want)


@pytest.mark.parametrize("td_factor", ["factored", "row"])
@pytest.mark.parametrize("shape", [(300, 260), (130, 129)])
def test_factor_tiles_over_chunks_strips_and_row_blocks(td_factor, shape):
    """Note [Triton factor tiles]: several 128-row chunks, 128-column strips (the last one partial) and
    256-row factor blocks, against the float64 reference; a second plan on the same state writes the
    same bits (every sum's order is fixed by the shape)."""
    hp = Hyper(buffer_mode=1, td_factor=td_factor)
    p, state, ref, status, _ = one_step(hp, shape)
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=False)
    p2, state2, _, _, _ = one_step(hp, shape)
    assert torch.equal(p.view(torch.int32), p2.view(torch.int32))
    assert all(torch.equal(state[k].view(torch.int32), state2[k].view(torch.int32)) for k in state)


@pytest.mark.parametrize("td_factor", ["factored", "row"])
def test_16bit_gradients_take_the_256_column_tile(td_factor, monkeypatch):
    """Note [Triton factor tiles]: a bf16 gradient's wide tile is 256 columns at 4 warps (an fp32 one's
    128 at 4, and at 2 where the gradient's address, R and C are multiples of 16); two chunks of rows by
    two strips of columns (the last partial), with masters, against the float64 reference."""
    tiles = []
    launch = TritonStepPlan._run

    def spy(self, kernel, grid, *args, **kwargs):
        if "BLOCK_C" in kwargs:  # the factor sums' launch
            tiles.append((kwargs["CHUNK_ROWS"], kwargs["BLOCK_C"], kwargs["num_warps"]))
        launch(self, kernel, grid, *args, **kwargs)

    monkeypatch.setattr(TritonStepPlan, "_run", spy)
    hp = MODES["tdclm_factored"].with_(td_factor=td_factor, tau=0.1)
    p, state, ref, status, _ = one_step(hp, (130, 300), DTYPES["bf16"], DTYPES["bf16"], master=True, seed=7)
    assert tiles == [(128, 256, 4)]
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=True)
    tiles.clear()
    one_step(hp, (130, 300), master=False, seed=7)  # fp32
    assert tiles == [(128, 128, 4)]
    tiles.clear()
    p, state, ref, status, _ = one_step(hp, (144, 160), master=False, seed=7)  # fp32, aligned
    assert tiles == [(128, 128, 2)]
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=False)


@pytest.mark.parametrize("pdtype,gdtype", [("bf16", "bf16"), ("f16", "f16"), ("bf16", "f32"), ("f32", "bf16"),
                                            ("f16", "f32")])
@pytest.mark.parametrize("mode", ["clm", "tdclm_factored"])
def test_16bit_parameters_and_gradients_with_masters(pdtype, gdtype, mode):
    hp = MODES[mode].with_(tau=0.1)
    master = pdtype != "f32"
    p, state, ref, status, _ = one_step(hp, (40, 33), DTYPES[pdtype], DTYPES[gdtype], master=master, seed=99)
    assert status.tolist() == [0, 0, 0, 0]
    check_against_reference(hp, p, state, ref, master=master)
    if master:
        # spec "Stochastic rounding": the parameter's bits from the master's fp32 value, keyed on (seed, t, i)
        x32 = state["master"].numpy().reshape(-1)
        r = rounding_bits_array(99, 3, np.arange(x32.size))
        want = bf16_stochastic_bits(x32, r) if pdtype == "bf16" else f16_stochastic_bits(x32, r)
        got = p.view(torch.int16).numpy().view(np.uint16).reshape(-1)
        np.testing.assert_array_equal(got, want)


def test_round_to_nearest_without_stochastic_rounding():
    hp = Hyper()
    p, state, _, _, _ = one_step(hp, (1000,), torch.bfloat16, master=True, sr=False)
    got = p.view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(got, bf16_rne_bits(state["master"].numpy()))


@triton.jit
def _convert_kernel(x_ptr, out_ptr, r_ptr, n, KIND: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    r = tl.load(r_ptr + offs, mask=mask, other=0).to(tl.uint32, bitcast=True)
    if KIND == 0:
        bits = tk.f32_to_bf16_stochastic(x, r)
    elif KIND == 1:
        bits = tk.f32_to_f16_stochastic(x, r)
    else:
        bits = tk.f32_to_bf16_rne(x)
    tl.store(out_ptr + offs, bits.to(tl.int32), mask=mask)


def _edge_values() -> np.ndarray:
    rng = np.random.default_rng(5)
    mags = np.concatenate([
        2.0 ** rng.uniform(-30, 17, 3000),           # f16 subnormals to beyond its range
        [65504.0, 65519.0, 65520.0, 65536.0, 3.3895e38, 3.4e38, 6.0e-8, 5.96e-8, 1e-45, 0.0],
        1.0 + np.arange(1, 200) * 2.0 ** -9,          # bf16 ties and near-ties
    ])
    x = np.concatenate([mags, -mags, [np.inf, -np.inf, np.nan]]).astype(np.float32)
    return x


@pytest.mark.parametrize("kind", [0, 1, 2])
def test_rounding_conversions_against_the_reference_grids(kind):
    x = _edge_values()
    r = np.random.default_rng(kind).integers(0, 2 ** 32, x.size, dtype=np.uint64).astype(np.uint32)
    out = torch.zeros(x.size, dtype=torch.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        _convert_kernel[(1,)](torch.from_numpy(x), out, torch.from_numpy(r.view(np.int32)), x.size, KIND=kind,
                              BLOCK=8192)
    got = out.numpy().astype(np.uint16)
    if kind == 0:
        want = bf16_stochastic_bits(x, r)
    elif kind == 1:
        want = f16_stochastic_bits(x, r)
    else:
        want = bf16_rne_bits(x)
    finite = np.isfinite(x)
    if kind == 0:
        # spec: values at or beyond the largest bf16 + half an ulp "saturate to +-Inf exactly as RNE
        # would"; the reference's recipe reads the truncated sum there, so those take RNE's answer.
        beyond = finite & (np.abs(x.astype(np.float64)) >= BF16.overflow)
        assert beyond.any()
        want = np.where(beyond, bf16_rne_bits(x), want)
    np.testing.assert_array_equal(got[finite], want[finite])
    nan = np.isnan(x)
    assert np.all((got[nan] & 0x7FFF) > (0x7F80 if kind != 1 else 0x7C00))  # NaN stays NaN


@triton.jit
def _tanh_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tk.tanh_f32(tl.load(x_ptr + offs, mask=mask, other=0.0)), mask=mask)


def test_tanh_within_two_ulp_saturating_and_never_nan():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.sign(rng.standard_normal(20000)) * 2.0 ** rng.uniform(-40, 6, 20000),
                        [0.0, -0.0, 1e-30, 9.7e-4, 9.8e-4, 0.5, 9.0, 10.0, 20.0, 88.0, 1e30, -1e30, np.inf, -np.inf,
                         3.4e38]]).astype(np.float32)
    out = torch.zeros(x.size)
    _tanh_kernel[(1,)](torch.from_numpy(x), out, x.size, BLOCK=32768)
    got = out.numpy()
    want = np.tanh(x.astype(np.float64))
    assert not np.isnan(got).any()
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - want) / ulp
    assert err.max() <= 2.0, (x[np.argmax(err)], err.max())
    assert got[np.isinf(x) & (x > 0)].tolist() == [1.0] and got[np.isinf(x) & (x < 0)].tolist() == [-1.0]


def test_nonfinite_gradient_writes_nothing_and_sets_the_status_word():
    hp = Hyper(buffer_mode=1, td_factor="factored")
    gen = torch.Generator().manual_seed(1)
    params = [torch.randn(16, 8, generator=gen), torch.randn(50, generator=gen)]
    states = []
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen)
        n, rows = p.numel(), p.shape[0]
        states.append({"exp_avg": torch.zeros(p.shape), "exp_avg_sq": torch.rand(exp_avg_sq_length(n, rows, hp))})
    params[1].grad[17] = float("inf")
    before = [(p.clone(), {k: v.clone() for k, v in s.items()}) for p, s in zip(params, states)]
    counter = torch.tensor(0.0)
    status = torch.zeros(4, dtype=torch.int32)
    tensors = [TensorStep(p, s, f"p{i}", i) for i, (p, s) in enumerate(zip(params, states))]
    plan = TritonStepPlan(torch.device("cpu"), [GroupStep(options_of(hp), counter, tensors)], status)
    assert plan.step(None, None, False)
    assert status.tolist() == [2, 2, 0, 0]  # verdict and sticky failure: 1 + position 1
    assert counter.item() == 0.0
    for (p0, s0), p, s in zip(before, params, states):
        assert torch.equal(p0, p)
        for key in s0:
            assert torch.equal(s0[key], s[key]), key
    # While the failure stands, a clean step is refused too; skip_nonfinite counts instead.
    params[1].grad[17] = 0.0
    assert plan.step(None, None, False)
    assert status.tolist() == [2, 2, 0, 1] and torch.equal(before[0][0], params[0])
    status.zero_()
    params[0].grad[0, 0] = float("nan")
    assert plan.step(None, None, True)
    assert status.tolist() == [1, 0, 1, 0] and counter.item() == 0.0
    # GradScaler's found_inf: skipped on the device, counted.
    params[0].grad[0, 0] = 1.0
    status.zero_()
    assert plan.step(torch.tensor(2.0), torch.tensor(1.0), False)
    assert status.tolist() == [-1, 0, 1, 0] and counter.item() == 0.0
    assert plan.step(torch.tensor(2.0), torch.tensor(0.0), False)
    assert status.tolist() == [0, 0, 1, 0] and counter.item() == 1.0


@pytest.mark.parametrize("td_factor", ["factored", "row"])
def test_nonfinite_gradient_in_the_last_tile_of_many(td_factor):
    """The sums kernel's verdict (a column's fp64 sum of squares over a chunk) finds a NaN in the last
    chunk and strip of a tensor of several, and nothing of either tensor is written."""
    hp = Hyper(buffer_mode=1, td_factor=td_factor)
    gen = torch.Generator().manual_seed(2)
    params = [torch.randn(64, 32, generator=gen), torch.randn(300, 260, generator=gen)]
    states = []
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen)
        states.append({"exp_avg": torch.zeros(p.shape),
                       "exp_avg_sq": torch.rand(exp_avg_sq_length(p.numel(), p.shape[0], hp))})
    params[1].grad[299, 259] = float("nan")
    before = [(p.clone(), {k: v.clone() for k, v in s.items()}) for p, s in zip(params, states)]
    status = torch.zeros(4, dtype=torch.int32)
    tensors = [TensorStep(p, s, f"p{i}", i) for i, (p, s) in enumerate(zip(params, states))]
    plan = TritonStepPlan(torch.device("cpu"), [GroupStep(options_of(hp), torch.tensor(0.0), tensors)], status)
    assert plan.step(None, None, False)
    assert status.tolist() == [2, 2, 0, 0]  # 1 + position 1
    for (p0, s0), p, s in zip(before, params, states):
        assert torch.equal(p0, p) and all(torch.equal(s0[k], s[k]) for k in s0)
    # Without the finite check the same gradient is stepped (and the NaN spreads): no verdict.
    status.zero_()
    plan2 = TritonStepPlan(torch.device("cpu"), [GroupStep(options_of(hp, check_finite=False), torch.tensor(0.0),
                                                           [TensorStep(params[1], states[1], "p1", 0)])], status)
    assert plan2.step(None, None, False)
    assert status.tolist() == [0, 0, 0, 0]


def test_luminav_triton_backend_is_adamw_and_counts_steps_on_the_device():
    torch.manual_seed(0)
    shapes = [(24, 16), (16,), ()]
    ours = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    from luminamoon.optim import LuminaV
    opt = LuminaV(ours, lr=1e-2, weight_decay=0.1, backend="triton")
    ref = torch.optim.AdamW(theirs, lr=1e-2, weight_decay=0.1)
    for step in range(4):
        for a, b in zip(ours, theirs):
            g = torch.randn(a.shape)
            a.grad, b.grad = g.clone(), g.clone()
        if step == 1:  # an LR scheduler's float lr: read on every step
            for o in (opt, ref):
                o.param_groups[0]["lr"] = 4e-3
            plan = opt._plans[0].native
        if step == 2:  # a parameter's storage replaced: the plan (its tensor tables) is made anew
            assert opt._plans[0].native is plan
            ours[0].data = ours[0].data.clone()
        if step == 3:  # an option the launches take as an argument: the plan is made anew
            assert opt._plans[0].native is not plan
            plan = opt._plans[0].native
            for o in (opt, ref):
                o.param_groups[0]["weight_decay"] = 0.3
        opt.step()
        ref.step()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert opt._plans[0].native is not plan
    for a in ours:
        assert opt.state[a]["step"].item() == 4.0
    # a non-finite gradient raises, naming the parameter, and leaves everything as it was
    ours[1].grad = torch.full((16,), float("nan"))
    before = [p.detach().clone() for p in ours]
    with pytest.raises(NonFiniteGradientError, match="parameter 1 of its group"):
        opt.step()
    for p, b in zip(ours, before):
        assert torch.equal(p.detach(), b)
    assert opt.state[ours[0]]["step"].item() == 4.0


def test_luminav_triton_backend_skip_nonfinite_and_tensor_lr():
    p = torch.nn.Parameter(torch.randn(64, 4))
    lr = torch.tensor(0.01)
    opt = LuminaV_of([p], lr=lr, mode="tdclm", skip_nonfinite=True, backend="triton")
    p.grad = torch.full_like(p, float("inf"))
    opt.step()
    assert opt.skipped_steps == 1
    p.grad = torch.randn_like(p)
    before = p.detach().clone()
    opt.step()
    assert not torch.equal(before, p.detach())
    assert opt.state[p]["step"].item() == 1.0


def LuminaV_of(params, **kw):
    from luminamoon.optim import LuminaV
    return LuminaV(params, **kw)


def test_info_lists_the_triton_backends_and_says_no_amd_gpu_was_reachable():
    from luminamoon.info import collect
    names = {b["name"]: b for b in collect()["backends"]}
    assert names["triton"]["available"]
    assert "triton-aot" in names and "triton-aot-rocm" in names
    rocm = names["triton-aot-rocm"]
    if "no AMD GPU" not in rocm["why_not"]:
        assert "built without Triton AOT kernels" in rocm["why_not"], rocm


def test_many_clm_tensors_step_through_the_multi_tensor_kernels():
    """Note [tensor tables]: a group's CLM tensors of one dtype pair share one finite-check and one
    apply launch; each tensor still meets the reference (options that need no per-tensor globals:
    soft clip, look-ahead, element bound, loss scale) and its stochastic rounding bits; a gradient
    in a new tensor (a new address) is read from its new address on the next step."""
    hp = Hyper(tau=0.05, lam=0.3, bound_mode=2, bound_ratio=2e-5, grad_scale=1024.0)
    gen = torch.Generator().manual_seed(21)
    # fp32: every N a multiple of 16 (the ALIGNED kernels); bf16: none
    shapes = {torch.float32: [(40, 32), (16,), (1104,)], torch.bfloat16: [(40, 33), (5,), (1100,)]}
    cases = []  # (param, state, x_old, m, v, grad, master, seed)
    for pdtype in (torch.float32, torch.bfloat16):
        for shape in shapes[pdtype]:
            x = torch.randn(shape, generator=gen)
            g = torch.randn(shape, generator=gen) * 0.1 * hp.grad_scale
            m = torch.randn(shape, generator=gen) * 0.01
            v = torch.rand(shape, generator=gen) * 0.01
            p = x.to(pdtype)
            master = pdtype != torch.float32
            state = {"exp_avg": m.clone(), "exp_avg_sq": v.clone()}
            if master:
                state["master"] = x.clone()
            p.grad = g.to(pdtype)
            cases.append((p, state, x.clone() if master else p.float().clone(), m, v, p.grad.float().clone(),
                          master, 500 + len(cases)))
    counter = torch.tensor(2.0)
    status = torch.zeros(4, dtype=torch.int32)
    tensors = [TensorStep(c[0], c[1], f"p{i}", i, seed=c[7]) for i, c in enumerate(cases)]
    group = GroupStep(options_of(hp), counter, tensors)
    plan = TritonStepPlan(torch.device("cpu"), [group], status)
    assert [len(b.tensors) for b in group.batches] == [3, 3]
    assert plan.step(torch.tensor(hp.grad_scale), None, False)
    assert status.tolist() == [0, 0, 0, 0]
    assert [b.aligned() for b in group.batches] == [True, False]
    for p, state, x_old, m, v, g, master, seed in cases:
        ref = reference_step(hp, x_old.numpy().reshape(-1), m.numpy().reshape(-1), v.numpy().reshape(-1),
                             g.numpy().reshape(-1), 3, p.shape[0] if p.dim() else 1)
        check_against_reference(hp, p, state, ref, master=master)
        if master:
            x32 = state["master"].numpy().reshape(-1)
            want = bf16_stochastic_bits(x32, rounding_bits_array(seed, 3, np.arange(x32.size)))
            np.testing.assert_array_equal(p.view(torch.int16).numpy().view(np.uint16).reshape(-1), want)
    # A new gradient tensor for tensor 4 holding a NaN: the table follows the new address.
    cases[4][0].grad = torch.full(shapes[torch.bfloat16][1], float("nan")).to(torch.bfloat16)
    before = cases[0][0].clone()
    assert plan.step(torch.tensor(hp.grad_scale), None, False)
    assert status.tolist() == [5, 5, 0, 0]  # 1 + position 4
    assert torch.equal(before, cases[0][0])


def _factored_cases(hp, gen):
    """(param, state, grad, master, seed) of factored TD-CLM tensors: fp32 of the wide tile (C >= 128) and of
    the narrow one, bf16 with fp32 masters; two or more of each kind, so that each kind makes a batch."""
    shapes = {torch.float32: [(130, 144), (20, 128), (40, 32), (12, 48)], torch.bfloat16: [(24, 130), (8, 200)]}
    cases = []
    for pdtype, pshapes in shapes.items():
        for shape in pshapes:
            x = torch.randn(shape, generator=gen)
            state = {"exp_avg": torch.randn(shape, generator=gen) * 0.01,
                     "exp_avg_sq": torch.rand(exp_avg_sq_length(x.numel(), shape[0], hp), generator=gen) * 0.01}
            master = pdtype != torch.float32
            if master:
                state["master"] = x.clone()
            p = x.to(pdtype)
            p.grad = (torch.randn(shape, generator=gen) * 0.1 * hp.grad_scale).to(pdtype)
            cases.append((p, state, master, 900 + len(cases)))
    return cases


def _factored_plan(cases, hp, counter, status):
    tensors = [TensorStep(p, s, f"p{i}", i, seed=seed) for i, (p, s, _, seed) in enumerate(cases)]
    group = GroupStep(options_of(hp), counter, tensors)
    return TritonStepPlan(torch.device("cpu"), [group], status), group


def test_many_factored_tensors_step_through_the_factored_tables(monkeypatch):
    """Note [factored tables]: a group's factored TD-CLM tensors of one dtype pair and sums tile share four
    launches, and each is written bit for bit as when it is stepped alone (the one-tensor kernels), over two
    steps with new gradients (a new address each) and a loss scale; stochastic rounding included. A NaN in
    one tensor of a batch writes nothing of any tensor."""
    from luminamoon.optim import triton_step
    hp = Hyper(buffer_mode=1, td_factor="factored", lam=0.3, bound_mode=2, bound_ratio=2e-5, grad_scale=1024.0)
    batched = _factored_cases(hp, torch.Generator().manual_seed(8))
    alone = [(p.detach().clone(), {k: v.clone() for k, v in s.items()}, m, seed) for p, s, m, seed in batched]
    for (p, _, _, _), (q, _, _, _) in zip(batched, alone):
        q.grad = p.grad.clone()
    counters, statuses = [torch.tensor(2.0), torch.tensor(2.0)], [torch.zeros(4, dtype=torch.int32) for _ in "ab"]
    plan_a, group_a = _factored_plan(batched, hp, counters[0], statuses[0])
    monkeypatch.setattr(triton_step, "MULTI_TENSOR", False)
    plan_b, group_b = _factored_plan(alone, hp, counters[1], statuses[1])
    assert sorted((b.kind, len(b.tensors), b.tile[1]) for b in group_a.batches) == [
        (tk.FACTORED, 2, tk.FACTOR_NARROW_COLS), (tk.FACTORED, 2, tk.FACTOR_WIDE_COLS),
        (tk.FACTORED, 2, tk.FACTOR_WIDE_COLS_2B)]  # the 16-bit pair reads 256-column tiles
    assert group_b.batches == []
    gen = torch.Generator().manual_seed(9)
    for step in range(2):
        for plan in (plan_a, plan_b):
            assert plan.step(torch.tensor(hp.grad_scale), None, False)
        for (p, s, _, _), (q, r, _, _) in zip(batched, alone):
            assert torch.equal(p.view(torch.int16) if p.dtype != torch.float32 else p,
                               q.view(torch.int16) if q.dtype != torch.float32 else q)
            assert all(torch.equal(s[k], r[k]) for k in s)
            p.grad = torch.randn(p.shape, generator=gen).to(p.dtype) * hp.grad_scale * 0.1
            q.grad = p.grad.clone()
    assert [st.tolist() for st in statuses] == [[0, 0, 0, 0]] * 2
    assert counters[0].item() == counters[1].item() == 4.0
    batched[1][0].grad[19, 127] = float("nan")
    before = [(p.clone(), {k: v.clone() for k, v in s.items()}) for p, s, _, _ in batched]
    assert plan_a.step(torch.tensor(hp.grad_scale), None, False)
    assert statuses[0].tolist() == [2, 2, 0, 0]  # 1 + position 1
    for (p0, s0), (p, s, _, _) in zip(before, batched):
        assert torch.equal(p0.float(), p.float()) and all(torch.equal(s0[k], s[k]) for k in s0)


def test_factored_tables_against_the_reference():
    """The batched factored step of fp32 tensors against the float64 reference (one step)."""
    hp = Hyper(buffer_mode=1, td_factor="factored", tau=0.05)
    cases = [c for c in _factored_cases(hp, torch.Generator().manual_seed(10)) if not c[2]]
    olds = [(p.clone(), s["exp_avg"].clone(), s["exp_avg_sq"].clone(), p.grad.clone()) for p, s, _, _ in cases]
    status = torch.zeros(4, dtype=torch.int32)
    plan, group = _factored_plan(cases, hp, torch.tensor(2.0), status)
    assert all(b.kind == tk.FACTORED for b in group.batches) and len(group.batches) == 2
    assert plan.step(None, None, False)
    assert status.tolist() == [0, 0, 0, 0]
    for (p, s, _, _), (x, m, v, g) in zip(cases, olds):
        ref = reference_step(hp, x.numpy().reshape(-1), m.numpy().reshape(-1), v.numpy(), g.numpy().reshape(-1),
                             3, p.shape[0])
        check_against_reference(hp, p, s, ref, master=False)


def test_the_cautious_mask_ends_on_the_triton_backend_as_on_the_reference_backend():
    """cautious_until (Note [mask schedule]): the Triton plan is made anew when the group's mask ends, and
    follows the scalar backend (itself checked against the float64 reference) before and after."""
    from luminamoon.optim import LuminaV
    torch.manual_seed(5)
    x0 = torch.randn(12, 20)
    opts = dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, mode="tdclm", td_factor="factored", tau=0.5,
                cautious=True, cautious_until=2)
    params = {b: torch.nn.Parameter(x0.clone()) for b in ("triton", "scalar")}
    opt = {b: LuminaV([p], backend=b, **opts) for b, p in params.items()}
    for step in range(4):
        g = torch.randn(12, 20) * 0.01 + 0.002
        for b, p in params.items():
            p.grad = g.clone()
            opt[b].step()
        torch.testing.assert_close(params["triton"], params["scalar"], rtol=1e-5, atol=1e-6)
        assert opt["triton"].param_groups[0]["cautious"] is (step < 1)  # off after the second call


@pytest.mark.parametrize("bad_at", [None, 0, 4 * tk.FINALIZE_BLOCK + 5, 9 * tk.FINALIZE_BLOCK + 36])
def test_finalize_adds_partials_of_many_chunks_and_finds_a_bad_one_anywhere(bad_at):
    """finalize_kernel over 9,253 partials (Note [finalize loads in flight]: three loop trips of four
    chunks; in the last, the second chunk partly and the third and fourth wholly past the end) against
    math.fsum of each field: TD-CLM tensor's s, the cautious scale and the tensor bound's scale, and the
    verdict of a non-finite count wherever it lies (the first, a middle and the last partial)."""
    import math
    programs, n, position = 9 * tk.FINALIZE_BLOCK + 37, 1 << 20, 7
    rng = np.random.default_rng(11)
    fields = np.zeros((tk.PARTIAL_FIELDS, programs))
    fields[1] = rng.integers(0, 60, programs)  # elements whose update agrees with the gradient
    fields[2:] = rng.random((3, programs)) * 1e-3  # sum g^2, sum (lr u phi)^2, sum x^2 per program
    if bad_at is not None:
        fields[0, bad_at] = 1.0
    partials = torch.from_numpy(fields.reshape(-1).copy())
    words = torch.tensor([0, tk.NO_BAD, 0, 0], dtype=torch.int32)
    gl = torch.zeros(4)
    s_old = torch.tensor([0.25])
    beta2, ratio = np.float32(0.95), np.float32(0.05)
    unused = torch.zeros(1)
    tk.finalize_kernel[(1,)](partials, programs, gl, words, torch.ones(4), s_old, unused, unused, unused, n, 1, n, 1,
                             position, float(beta2), float(np.float32(1) - beta2), float(ratio), ROUND_GRAD=True,
                             ROUND_UPDATE=True, CHECK_FINITE=True, KIND=tk.TENSOR, CAUTIOUS=True, BOUND_TENSOR=True,
                             BLOCK=tk.FINALIZE_BLOCK)
    assert words[1].item() == (tk.NO_BAD if bad_at is None else position)
    s = beta2 * np.float32(0.25) + (np.float32(1) - beta2) * np.float32(math.fsum(fields[2]) / n)
    agree = math.fsum(fields[1])
    c = n / max(agree, 0.001 * n)
    a, b = c * math.sqrt(math.fsum(fields[3])), math.sqrt(math.fsum(fields[4]))
    assert a > b * float(ratio), "the bound must bind for the test to exercise it"
    np.testing.assert_allclose(gl.numpy(), [s, c, b * float(ratio) / a, 0.0], rtol=1e-6, atol=0)
