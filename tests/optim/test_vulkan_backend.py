"""The vulkan backend (on lavapipe in CI, pinned by tests/conftest.py; on the NVIDIA driver
with VK_DRIVER_FILES set to its ICD): every mode, option and dtype against the float64
spec reference, stochastic rounding bit for bit where fp32 agrees, tensors over the
storage-buffer range, unaligned host arrays, staging instead of import, a non-finite
gradient, the validation layer, routing, and a machine without a Vulkan device."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from luminamoon import _native, optim
from luminav_reference import (accuracy_factor, bf16_rne_bits, bf16_stochastic_bits, f16_stochastic_bits,
                               rounding_bits_array, assert_within_forward_error, reference_step)
from test_simd_backend import hundred_steps_within_normwise_error
from test_optim_scalar_reference import (COMBOS, IDS, SEED, check_step, hyper, make_param, param_bits,
                                         param_values, random_state, rows_for, run_on as run, start_of_step)

N = 1029  # 21 x 49 for TD-CLM's rows; a partial reduction tile and workgroup


def vulkan_state() -> tuple[bool, str]:
    for name, ok, why in optim.backends():
        if name == "vulkan":
            return bool(ok), why
    return False, "vulkan backend not compiled in"


AVAILABLE, WHY_NOT = vulkan_state()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"vulkan unavailable: {WHY_NOT}")


@pytest.mark.parametrize("mode,td,tau,lam,cautious,bound,dtype,use_master", COMBOS, ids=IDS)
def test_one_step_within_forward_error_of_the_spec(mode, td, tau, lam, cautious, bound, dtype, use_master, rng):
    hp = hyper(mode, td, tau, lam, cautious, bound)
    rows = rows_for(hp, N)
    x32, m, v, g = random_state(rng, mode, N, hp, rows)
    param, master, x_old = start_of_step(x32, dtype, use_master)
    ref = reference_step(hp, x_old, m, v, g, 7, rows)
    run("vulkan", param, g, m, v, master, hp, 7, rows)
    # check_step's parameter check also holds SR to the spec's bits: with a master,
    # the 16-bit parameter must be exactly the hash's rounding of the fp32 master.
    check_step(hp, dtype, param, master, m, v, ref, 7)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_stochastic_rounding_bit_identical_to_scalar_where_fp32_agrees(dtype, rng):
    hp = hyper(2, "tensor", 0.5, 0.3, True, 2)
    x32, m, v, g = random_state(rng, 2, 5000, hp)
    out = {}
    for backend in ("scalar", "vulkan"):
        p, mm, vv, w = make_param(x32, dtype), m.copy(), v.copy(), x32.copy()
        run(backend, p, g, mm, vv, w, hp, 4)
        out[backend] = (p, w)
    same = out["scalar"][1].view(np.uint32) == out["vulkan"][1].view(np.uint32)
    assert same.mean() > 0.5  # the comparison covers most elements
    np.testing.assert_array_equal(param_bits(out["vulkan"][0], dtype)[same], param_bits(out["scalar"][0], dtype)[same])


# lr = 0 and no weight decay make the step the identity on x (x*1 - 0*u): what reaches the
# parameter is exactly the shaders' 16-bit load and store (lv_common.glsl), tested here
# over every 16-bit pattern and against the reference's own rounding.
IDENTITY = dict(lr=0.0, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0)


def _flushes_fp32_subnormals() -> bool:
    # The identity step (below) on fp32 subnormals: a device whose shaders flush them
    # (NVIDIA's Vulkan driver offers no shaderDenormPreserveFloat32, so no execution
    # mode can keep them) writes signed zeros.
    if not AVAILABLE:
        return False
    x = np.array([1e-40, -1e-40, 1.0], np.float32)
    before = x.copy()
    optim.step(x, np.zeros(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32), **IDENTITY, step=1,
               backend="vulkan")
    return not np.array_equal(x.view(np.uint32), before.view(np.uint32))


SUBNORMALS_FLUSHED = _flushes_fp32_subnormals()


def flushed(values: np.ndarray) -> np.ndarray:
    """fp32 values as a device that flushes subnormals to signed zero computes x*1 - 0."""
    v = values.astype(np.float32)
    tiny = (v != 0) & (np.abs(v) < np.finfo(np.float32).tiny)
    return np.where(tiny, np.copysign(np.float32(0.0), v), v).astype(np.float32)


def device_dependent_subnormals(what: str) -> None:
    """Called after the flushed-model checks passed: the test is marked device-dependent."""
    if SUBNORMALS_FLUSHED:
        pytest.xfail(f"device-dependent: this Vulkan device flushes fp32 subnormals in shaders (no "
                     f"shaderDenormPreserveFloat32); {what} matched the spec except that subnormals became signed "
                     f"zeros, as the flushing model predicts")


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_every_sixteen_bit_pattern_loads_and_stores_exactly(dtype):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    as_param = (lambda b: b) if dtype == "bf16" else (lambda b: b.view(np.float16))
    finite = np.isfinite(param_values(as_param(bits), dtype))
    param = as_param(bits[finite].copy())
    n = param.size
    optim.step(param, np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32), **IDENTITY, step=1,
               backend="vulkan", stochastic_rounding=False)
    want = bits[finite]
    if SUBNORMALS_FLUSHED and dtype == "bf16":  # bf16 subnormals are fp32 subnormals
        want = bf16_rne_bits(flushed(param_values(as_param(want), dtype)))
    np.testing.assert_array_equal(param_bits(param, dtype), want)
    if dtype == "bf16":
        device_dependent_subnormals("every bf16 pattern")


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("stochastic", [False, True])
def test_fp32_to_sixteen_bit_rounding_of_ties_subnormals_and_extremes(dtype, stochastic, rng):
    # Every tie between neighbouring 16-bit values, values around the smallest subnormal
    # and the largest finite value, NaN and +-Inf, and random values of every binade.
    all_bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    grid = param_values(all_bits if dtype == "bf16" else all_bits.view(np.float16), dtype)
    grid = np.unique(grid[np.isfinite(grid)])
    ties = ((grid[:-1] + grid[1:]) / 2).astype(np.float32)
    spread = (rng.standard_normal(20000) * np.exp2(rng.uniform(-30, 17, 20000))).astype(np.float32)
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 65504.0, 65519.0, 65520.0, 3.4e38, 5.96e-8, 2.98e-8, 1e-45,
                        -0.0], np.float32)
    master = np.concatenate([ties, spread, special])
    n = master.size
    param = np.zeros(n, np.uint16) if dtype == "bf16" else np.zeros(n, np.float16)
    w = master.copy()
    optim.step(param, np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32), w, **IDENTITY,
               step=3, seed=SEED, backend="vulkan", stochastic_rounding=stochastic)
    # x unchanged: x*1 - 0, subnormals included. A NaN stays NaN, but its payload and sign
    # are the device's: IEEE 754 does not fix them, and NVIDIA writes its canonical NaN.
    nan = np.isnan(master)
    if SUBNORMALS_FLUSHED:  # x*1 - 0 of a subnormal master is a signed zero there
        master = flushed(master)
    np.testing.assert_array_equal(w.view(np.uint32)[~nan], master.view(np.uint32)[~nan])
    assert np.isnan(w[nan]).all()
    if stochastic:
        r = rounding_bits_array(SEED, 3, np.arange(n))
        want = bf16_stochastic_bits(master, r) if dtype == "bf16" else f16_stochastic_bits(master, r)
    else:
        with np.errstate(over="ignore"):
            want = bf16_rne_bits(master) if dtype == "bf16" else master.astype(np.float16).view(np.uint16)
    got = param_bits(param, dtype)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan(param_values(param[nan], dtype)).all()  # NaN stays NaN
    device_dependent_subnormals("every tie, extreme and random binade")


@pytest.mark.parametrize("mode,td,cautious,bound,dtype,use_master", [
    (2, "tensor", True, 1, "bf16", True), (1, "tensor", True, 1, "f32", False),
    (1, "factored", True, 2, "f16", True), (1, "row", True, 1, "bf16", True)])
def test_hundred_steps_within_normwise_error(mode, td, cautious, bound, dtype, use_master, rng):
    hundred_steps_within_normwise_error("vulkan", mode, td, cautious, bound, dtype, use_master, rng)


@pytest.mark.parametrize("grad_dtype", ["bf16", "f16"])
@pytest.mark.parametrize("mode,td", [(2, "tensor"), (1, "factored")])
def test_sixteen_bit_gradients_and_grad_scale(grad_dtype, mode, td, rng):
    hp = hyper(mode, td, 0.0, 0.3, True, 0).with_(grad_scale=1024.0)
    rows = rows_for(hp, N)
    x32, m, v, g32 = random_state(rng, mode, N, hp, rows)
    grad = make_param(g32 * np.float32(1024.0), grad_dtype)
    ref = reference_step(hp, x32, m, v, param_values(grad, grad_dtype).astype(np.float32), 5, rows)
    run("vulkan", x32, grad, m, v, None, hp, 5, rows)
    assert_within_forward_error("exp_avg", m, ref.m, ref.scale_m, accuracy_factor(hp))
    assert_within_forward_error("param", x32, ref.x, ref.scale_x, accuracy_factor(hp))


def test_runs_are_bit_identical(rng):
    # Fixed combination order: the reductions (K, the norms, the factor sums) repeat exactly.
    hp = hyper(1, "factored", 0.5, 0.3, True, 1)
    rows = rows_for(hp, 40000)
    x32, m, v, g = random_state(rng, 1, 40000, hp, rows)
    outs = []
    for _ in range(2):
        p, mm, vv = x32.copy(), m.copy(), v.copy()
        run("vulkan", p, g, mm, vv, None, hp, 3, rows)
        outs.append((p, mm, vv))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("offset", [1, 3, 513])
def test_unaligned_host_arrays(offset, rng):
    # Arrays starting 4*offset bytes past a page: imported from the page below.
    hp = hyper(2, "tensor", 0.5, 0.0, True, 2)
    x32, m, v, g = random_state(rng, 2, N, hp)
    ref = reference_step(hp, x32, m, v, g, 2)

    def shifted(a):
        big = np.zeros(a.size + 2048, a.dtype)
        view = big[offset:offset + a.size]
        view[:] = a
        return big, view
    (bx, px), (bm, pm), (bv, pv), (bg, pg) = (shifted(a) for a in (x32, m, v, g))
    run("vulkan", px, pg, pm, pv, None, hp, 2)
    assert_within_forward_error("param", px, ref.x, ref.scale_x)
    assert_within_forward_error("exp_avg", pm, ref.m, ref.scale_m)
    for big in (bx, bm, bv):  # nothing outside the arrays was touched
        assert not big[:offset].any() and not big[offset + N:].any()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_gradient_writes_nothing(bad, rng):
    hp = hyper(1, "factored", 0.0, 0.0, True, 1)
    rows = rows_for(hp, N)
    x32, m, v, g = random_state(rng, 1, N, hp, rows)
    g[N // 2] = bad
    before = [a.copy() for a in (x32, m, v)]
    with pytest.raises(optim.NonFiniteGradientError):
        run("vulkan", x32, g, m, v, None, hp, 3, rows)
    for a, b in zip(before, (x32, m, v)):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_tensor_over_the_storage_buffer_range(rng):
    # fp32 arrays larger than lavapipe's maxStorageBufferRange (128 MiB): two chunks
    # there (a device with a larger range runs one; the small-range child test chunks
    # everywhere). CLM without reductions beyond the finite check is per element, so
    # the reference is checked at both ends and around every chunk boundary.
    n = (1 << 25) + 4099
    hp = hyper(2, "tensor", 0.0, 0.0, False, 0)
    x = np.full(n, 0.5, np.float32)
    g = rng.standard_normal(n).astype(np.float32) * np.float32(0.01)
    m = np.zeros(n, np.float32)
    v = np.zeros(n, np.float32)
    run("vulkan", x, g, m, v, None, hp, 1)
    for lo in list(range(0, n, 1 << 21)) + [n - 4096]:
        s = slice(max(lo - 2048, 0), min(lo + 2048, n))
        ref = reference_step(hp, np.full(s.stop - s.start, 0.5), np.zeros(s.stop - s.start),
                             np.zeros(s.stop - s.start), g[s], 1)
        assert_within_forward_error("param", x[s], ref.x, ref.scale_x)
        assert_within_forward_error("exp_avg_sq", v[s], ref.v, ref.scale_v)


def _vulkan_index() -> int:
    return [name for name, _, _ in optim.backends()].index("vulkan")


def test_devices_are_listed_with_why_each_is_used():
    *lines, asynchronous = _native.backend_devices(_vulkan_index()).splitlines()
    # The last line: what the asynchronous step covers and what falls back to the synchronous one.
    assert asynchronous.startswith("asynchronous step") and "TD-CLM" in asynchronous and "any number of tensors in a call" in asynchronous and "maxMemoryAllocationCount" in asynchronous
    assert lines and any("[selected]" in line for line in lines)
    for line in lines:  # name (type, Vulkan version) [selected]: reason
        assert re.fullmatch(r".+ \((.+), Vulkan [0-9.]+\)( \[selected\])?: .+", line), line
    label = None
    x = np.ones(20000, np.float32)
    optim.step(x, np.full_like(x, 0.1), np.zeros_like(x), np.zeros_like(x), lr=1e-3, beta1=0.9, beta2=0.999,
               eps=1e-8, weight_decay=0.0, step=1)
    label = optim.last_backend()
    selected = next(line for line in lines if "[selected]" in line)
    if "CPU" in selected or "discrete GPU" in selected:
        assert not label.startswith("vulkan"), label  # auto never picks lavapipe or a discrete GPU
        assert "forced only" in selected


CHILD = Path(__file__).with_name("vulkan_child.py")


def _child(env: dict, *args) -> subprocess.CompletedProcess:
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join([str(CHILD.parents[1]), full.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, env=full, timeout=300)


def test_small_chunks_staging_and_validation_layer():
    # A 64 KiB descriptor range forces many chunks (rows split between them, column sums
    # added across them); LUMINAV_VULKAN_IMPORT=0 forces staging; the validation layer
    # watches every call and must report no error.
    for env in ({"LUMINAV_VULKAN_MAX_RANGE": "65536"},
                {"LUMINAV_VULKAN_MAX_RANGE": "65536", "LUMINAV_VULKAN_IMPORT": "0"}):
        out = _child(dict(env, LUMINAV_VULKAN_VALIDATION="1"))
        assert out.returncode == 0, out.stdout + out.stderr
        assert "luminav-vulkan-validation: on" in out.stderr, out.stderr
        errors = [line for line in out.stderr.splitlines() if line.startswith("luminav-vulkan-validation: error")]
        assert not errors, errors[:5]
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert report["cases"] >= 8 and report["chunks_seen"]


HASH_CHILD = Path(__file__).with_name("vulkan_hash_child.py")
SPECIALIZE_CHILD = Path(__file__).with_name("vulkan_specialize_child.py")


def _child_saving(child: Path, env: dict, path: Path) -> tuple[str, dict]:
    """Runs `child` (which prints the vulkan device lines and saves arrays to `path`) in a fresh
    process with `env` added: the selected device's line and the saved arrays."""
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join([str(child.parents[1]), full.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, str(child), str(path)], capture_output=True, text=True, env=full,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return next(line for line in out.stdout.splitlines() if "[selected]" in line), np.load(path)


def test_hash_in_32_bit_pairs_is_bit_identical_to_int64(tmp_path):
    # LUMINAV_VULKAN_INT64=0 takes the shaders of devices without shaderInt64 (the hash
    # in pairs of 32-bit words); both sets must write the spec's bits, and so each other's.
    import vulkan_hash_child as h  # its constants (tests/optim is on sys.path)
    runs = {}
    for int64 in ("1", "0"):
        selected, runs[int64] = _child_saving(HASH_CHILD, {"LUMINAV_VULKAN_INT64": int64},
                                              tmp_path / f"bits{int64}.npz")
        assert ("hash in 32-bit pairs" in selected) == (int64 == "0"), selected
    master = runs["1"]["master"]
    r = rounding_bits_array(h.SEED, h.STEP, h.OFFSET + np.arange(h.N, dtype=np.uint64))
    for dtype, want in (("bf16", bf16_stochastic_bits(master, r)), ("f16", f16_stochastic_bits(master, r))):
        np.testing.assert_array_equal(runs["0"][dtype], runs["1"][dtype])
        np.testing.assert_array_equal(runs["1"][dtype], want)


def test_cpu_specialized_shaders_are_bit_identical_to_the_general_ones(tmp_path):
    # On a CPU device reduce and apply are specialized to each job's options (Note [CPU
    # specialization]); LUMINAV_VULKAN_SPECIALIZE=0 runs the general shaders that GPUs run.
    # Every optional path, in synchronous and asynchronous steps, must give the same bits.
    runs, lines = {}, {}
    for flag in ("1", "0"):
        lines[flag], runs[flag] = _child_saving(SPECIALIZE_CHILD, {"LUMINAV_VULKAN_SPECIALIZE": flag},
                                                tmp_path / f"state{flag}.npz")
    cpu = "CPU" in lines["1"]
    assert ("specialized to each job" in lines["1"]) == cpu, lines["1"]
    assert "specialized to each job" not in lines["0"], lines["0"]
    assert sorted(runs["1"].files) == sorted(runs["0"].files)
    for key in runs["1"].files:
        np.testing.assert_array_equal(runs["1"][key], runs["0"][key], err_msg=key)


def test_no_vulkan_device_gives_the_reason_and_auto_falls_back():
    code = ("import json, numpy as np\nfrom luminamoon import optim\n"
            "b = {n: (ok, why) for n, ok, why in optim.backends()}\n"
            "x = np.ones(20000, np.float32)\n"
            "optim.step(x, np.full_like(x, 0.1), np.zeros_like(x), np.zeros_like(x), lr=1e-3, beta1=0.9,"
            " beta2=0.999, eps=1e-8, weight_decay=0.0, step=1)\n"
            "forced = ''\n"
            "try:\n"
            "    optim.step(x, np.full_like(x, 0.1), np.zeros_like(x), np.zeros_like(x), lr=1e-3, beta1=0.9,"
            " beta2=0.999, eps=1e-8, weight_decay=0.0, step=1, backend='vulkan')\n"
            "except optim.LuminaVError as e:\n"
            "    forced = type(e).__name__ + ': ' + str(e)\n"
            "print(json.dumps({'vulkan': b['vulkan'], 'auto': optim.last_backend(), 'forced': forced}))\n")
    env = dict(os.environ, VK_DRIVER_FILES="/nonexistent/icd.json", VK_ICD_FILENAMES="/nonexistent/icd.json")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["vulkan"][0] is False and "no Vulkan" in r["vulkan"][1], r
    assert r["auto"].split(":")[0] in ("simd", "scalar")
    assert r["forced"].startswith("BackendUnavailableError") and "no Vulkan" in r["forced"], r


def test_force_backend_environment_selects_vulkan():
    code = ("import numpy as np\nfrom luminamoon import optim\nx = np.ones(40, np.float32)\n"
            "optim.step(x, np.full_like(x, 0.1), np.zeros_like(x), np.zeros_like(x), lr=1e-3, beta1=0.9,"
            " beta2=0.999, eps=1e-8, weight_decay=0.0, step=1)\nprint(optim.last_backend())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, LUMINAV_FORCE_BACKEND="vulkan"), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("vulkan:")
