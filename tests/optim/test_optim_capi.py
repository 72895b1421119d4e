"""libluminav's C API as C users see it: through ctypes, and from a program compiled as C
against luminamoon.include_dir() and linked to luminamoon.c_library_path()."""
from __future__ import annotations

import ctypes as C
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import luminamoon
from luminav_ctypes import (FactorSums, Globals, Options, Partials, Tensor, as_hyper, hyperparams,
                            load_library)
from luminav_reference import Hyper, assert_within_forward_error, reference_step


@pytest.fixture(scope="module")
def lib():
    return load_library()


def ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


def state(rng, n, mode=2):
    x = (rng.standard_normal(n) * 0.5).astype(np.float32)
    g = (rng.standard_normal(n) * 0.01).astype(np.float32)
    m = (rng.standard_normal(n) * 0.01).astype(np.float32)
    v = ((rng.random(n) + 0.05) * 1e-4).astype(np.float32) if mode == 2 else np.array([4e-5], np.float32)
    return x, g, m, v


TD_FACTORED, TD_ROW, TD_TENSOR = 0, 1, 2


def tensor(x, g, m, v, master=None, offset=0, seed=0, rows=0, td_factor=TD_TENSOR) -> Tensor:
    """A descriptor (TD-CLM: version 1's scalar s unless td_factor and rows say otherwise)."""
    return Tensor(ptr(x), ptr(g), ptr(m), ptr(v), ptr(master), x.size, offset, seed, 0, 0, rows, td_factor)


def scalar_options(**kw) -> Options:
    return Options(backend=b"scalar", **kw)


def test_library_and_headers_are_installed():
    path = Path(luminamoon.c_library_path())
    assert path.is_file() and path.name.startswith("libluminav")
    include = Path(luminamoon.include_dir())
    assert (include / "luminav" / "luminav.h").is_file()
    assert (include / "luminav_triton_standalone.h").is_file()


def test_version_defaults_and_introspection(lib):
    assert lib.luminav_version().decode() == "%d.%d.%d" % (0, 1, 0)
    hp = hyperparams(lib)
    assert (hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay) == (1e-3, 0.9, 0.999, 1e-8, 0.01)
    assert (hp.buffer_mode, hp.check_finite, hp.stochastic_rounding, hp.step) == (2, 1, 1, 1)
    names = [lib.luminav_backend_name(i).decode() for i in range(lib.luminav_backend_count())]
    assert "scalar" in names
    assert lib.luminav_backend_available(names.index("scalar")) == 1
    assert lib.luminav_status_name(2).decode().upper().find("NONFINITE") >= 0


@pytest.mark.parametrize("mode,cautious,bound", [(2, 0, 0), (2, 1, 1), (1, 1, 2), (1, 0, 1)])
def test_luminav_step_matches_the_reference(lib, rng, mode, cautious, bound):
    x, g, m, v = state(rng, 301, mode)
    hp = hyperparams(lib, lr=1e-2, buffer_mode=mode, cautious=cautious, bound_mode=bound,
                     bound_ratio=0.002 if bound else 0.0, step=5)
    ref = reference_step(as_hyper(hp), x, m, v, g, 5)
    t = tensor(x, g, m, v)
    assert lib.luminav_step(C.byref(hp), C.byref(t), C.byref(scalar_options())) == 0
    assert lib.luminav_last_backend().decode() == "scalar"
    assert_within_forward_error("m", m, ref.m, ref.scale_m)
    assert_within_forward_error("v", v, ref.v, ref.scale_v)
    assert_within_forward_error("x", x, ref.x, ref.scale_x)


def test_step_multi_is_each_tensor_stepped_and_all_or_nothing(lib, rng):
    a, b = state(rng, 100), state(rng, 37)
    hp = hyperparams(lib, step=2)
    refs = [reference_step(as_hyper(hp), *s[:1], s[2], s[3], s[1], 2) for s in (a, b)]
    arr = (Tensor * 2)(tensor(*a), tensor(*b))
    assert lib.luminav_step_multi(C.byref(hp), arr, 2, C.byref(scalar_options())) == 0
    for s, ref in zip((a, b), refs):
        assert_within_forward_error("x", s[0], ref.x, ref.scale_x)
    # A NaN in the second tensor: neither is written; the message names its position.
    b[1][5] = np.nan
    before = [bytes(t.tobytes()) for s in (a, b) for t in s]
    hp.step = 3
    assert lib.luminav_step_multi(C.byref(hp), arr, 2, C.byref(scalar_options())) == 2
    assert "tensors[1]" in lib.luminav_last_error_message().decode()
    assert [bytes(t.tobytes()) for s in (a, b) for t in s] == before


def test_error_rows_through_ctypes(lib, rng):
    x, g, m, v = state(rng, 50)
    before = [bytes(t.tobytes()) for t in (x, g, m, v)]
    opts = C.byref(scalar_options())
    # NULL buffer the mode needs
    t = tensor(x, g, m, v)
    t.exp_avg = None
    assert lib.luminav_step(C.byref(hyperparams(lib)), C.byref(t), opts) == 1
    assert "exp_avg" in lib.luminav_last_error_message().decode()
    # aliasing
    t = tensor(x, g, x, v)
    assert lib.luminav_step(C.byref(hyperparams(lib)), C.byref(t), opts) == 1
    assert "overlap" in lib.luminav_last_error_message().decode()
    # a parameter out of range, named with its value
    assert lib.luminav_step(C.byref(hyperparams(lib, eps=-1.0)), C.byref(tensor(x, g, m, v)), opts) == 1
    msg = lib.luminav_last_error_message().decode()
    assert "eps" in msg and "-1" in msg
    # scratch too small names the size needed
    needed = lib.luminav_scratch_bytes(x.size)
    scratch = np.zeros(needed // 8 + 1, np.float64)
    small = scalar_options(scratch=scratch.ctypes.data, scratch_bytes=needed - 1)
    assert lib.luminav_step(C.byref(hyperparams(lib)), C.byref(tensor(x, g, m, v)), C.byref(small)) == 1
    assert str(needed) in lib.luminav_last_error_message().decode()
    assert [bytes(t.tobytes()) for t in (x, g, m, v)] == before
    # a large enough caller scratch works
    enough = scalar_options(scratch=scratch.ctypes.data, scratch_bytes=needed)
    assert lib.luminav_step(C.byref(hyperparams(lib)), C.byref(tensor(x, g, m, v)), C.byref(enough)) == 0


@pytest.mark.parametrize("mode,cautious,bound", [(1, 1, 1), (2, 1, 1), (1, 0, 0), (2, 0, 2)])
def test_pass_split_over_two_shards_equals_the_whole_step(lib, rng, mode, cautious, bound):
    n = 203
    x, g, m, v = state(rng, n, mode)
    hp = hyperparams(lib, lr=1e-2, buffer_mode=mode, cautious=cautious, bound_mode=bound,
                     bound_ratio=0.002 if bound else 0.0, step=4)
    ref = reference_step(as_hyper(hp), x, m, v, g, 4)
    cut = 90
    shards = [(x[:cut], g[:cut], m[:cut], v[:cut] if mode == 2 else v.copy(), 0),
              (x[cut:], g[cut:], m[cut:], v[cut:] if mode == 2 else v.copy(), cut)]
    descs = [tensor(sx, sg, sm, sv, offset=off) for sx, sg, sm, sv, off in shards]
    opts = C.byref(scalar_options())
    rounds = lib.luminav_reduction_rounds(C.byref(hp))
    assert rounds == (2 if mode == 1 and (cautious or bound == 1) else 1)
    globals_ = [Globals(0, 1, 1, 0, 0), Globals(0, 1, 1, 0, 0)]
    for r in range(rounds):
        parts = [Partials(), Partials()]
        for d, gl, p in zip(descs, globals_, parts):
            assert lib.luminav_reduce(C.byref(hp), C.byref(d), r, C.byref(gl), C.byref(p), opts) == 0
        total = Partials(*(getattr(parts[0], f) + getattr(parts[1], f) for f, _ in Partials._fields_))
        s_old = C.c_float(float(v[0]) if mode == 1 else 0.0)
        for gl in globals_:
            assert lib.luminav_finalize(C.byref(hp), C.byref(total), n, r, s_old, C.byref(gl)) == 0
    for d, gl in zip(descs, globals_):
        assert lib.luminav_apply(C.byref(hp), C.byref(d), C.byref(gl), opts) == 0
    assert_within_forward_error("x", x, ref.x, ref.scale_x)
    assert_within_forward_error("m", m, ref.m, ref.scale_m)
    if mode == 2:
        assert_within_forward_error("v", v, ref.v, ref.scale_v)
    else:
        for shard in shards:
            assert_within_forward_error("s", shard[3], ref.v, ref.scale_v)


# ---- issue 14: TD-CLM factored/row sharded by rows through the pass split ----------------


def dyadic_gradient(rng, shape) -> np.ndarray:
    """k/1024 with |k| <= 64: every square and every sum of them is exact in double, so the
    row and column sums are the same in any order (sharded or not, any thread count)."""
    return (rng.integers(-64, 65, size=shape) / 1024.0).astype(np.float32)


def run_sharded(lib, hp, x, g, m, row, col, cuts, td_factor, backend):
    """One step of an R x C tensor over row shards [cuts[i], cuts[i+1]) via the pass split,
    all-reducing by hand; returns each shard's exp_avg_sq (its rows, then its copy of col)."""
    rows_total, cols = x.shape
    opts = C.byref(Options(backend=backend.encode()))
    factored = td_factor == TD_FACTORED and cols > 1
    shards = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        v = np.concatenate([row[lo:hi], col]).astype(np.float32) if factored else row[lo:hi].copy()
        row_sq, col_sq = np.zeros(hi - lo), np.zeros(cols)
        sums = FactorSums(row_sq.ctypes.data, col_sq.ctypes.data if factored else None)
        d = Tensor(x[lo:hi].ctypes.data, g[lo:hi].ctypes.data, m[lo:hi].ctypes.data, v.ctypes.data, None,
                   (hi - lo) * cols, lo * cols, 7, 0, 0, hi - lo, td_factor)
        shards.append(dict(v=v, row_sq=row_sq, col_sq=col_sq, sums=sums, d=d, gl=Globals(0, 1, 1, 0, 0)))
    for r in range(lib.luminav_reduction_rounds(C.byref(hp))):
        parts = []
        for sh in shards:
            p = Partials()
            status = lib.luminav_reduce_with_factors(C.byref(hp), C.byref(sh["d"]), r, C.byref(sh["gl"]),
                                                     C.byref(sh["sums"]), C.byref(p), opts)
            assert status == 0, lib.luminav_last_error_message()
            parts.append(p)
        total = Partials(*(sum(getattr(p, f) for p in parts) for f, _ in Partials._fields_))
        if r == 0 and factored:  # the all-reduce of the column sums (in shard order)
            col_total = sum(sh["col_sq"] for sh in shards)
            for sh in shards:
                sh["col_sq"][:] = col_total
        for sh in shards:
            assert lib.luminav_finalize(C.byref(hp), C.byref(total), x.size, r, C.c_float(0.0),
                                        C.byref(sh["gl"])) == 0
    for sh in shards:
        status = lib.luminav_apply_with_factors(C.byref(hp), C.byref(sh["d"]), C.byref(sh["gl"]),
                                                C.byref(sh["sums"]), opts)
        assert status == 0, lib.luminav_last_error_message()
    return [sh["v"] for sh in shards]


@pytest.mark.parametrize("backend", ["scalar", "simd"])
@pytest.mark.parametrize("td_factor", [TD_FACTORED, TD_ROW])
@pytest.mark.parametrize("cuts", [(0, 13, 37), (0, 5, 20, 37), (0, 36, 37)], ids=["2", "3", "2-uneven"])
@pytest.mark.parametrize("cautious,bound", [(0, 0), (1, 0), (1, 1)])
def test_sharded_by_rows_equals_unsharded(lib, rng, backend, td_factor, cuts, cautious, bound):
    rows, cols = 37, 24
    x0 = (rng.standard_normal((rows, cols)) * 0.5).astype(np.float32)
    g = dyadic_gradient(rng, (rows, cols))
    m0 = (rng.standard_normal((rows, cols)) * 0.01).astype(np.float32)
    row0 = ((rng.random(rows) + 0.5) * 1e-4).astype(np.float32)
    col0 = ((rng.random(cols) + 0.5) * 1e-4).astype(np.float32)
    hp = hyperparams(lib, lr=1e-2, buffer_mode=1, cautious=cautious, bound_mode=bound,
                     bound_ratio=0.002 if bound else 0.0, step=4)
    # Unsharded: one luminav_step.
    x, m = x0.copy(), m0.copy()
    v = np.concatenate([row0, col0]) if td_factor == TD_FACTORED else row0.copy()
    d = Tensor(x.ctypes.data, g.ctypes.data, m.ctypes.data, v.ctypes.data, None, x.size, 0, 7, 0, 0, rows,
               td_factor)
    assert lib.luminav_step(C.byref(hp), C.byref(d), C.byref(Options(backend=backend.encode()))) == 0
    xs, ms = x0.copy(), m0.copy()
    shard_v = run_sharded(lib, hp, xs, g, ms, row0, col0, list(cuts), td_factor, backend)
    got_row = np.concatenate([sv[:hi - lo] for sv, lo, hi in zip(shard_v, cuts[:-1], cuts[1:])])
    if bound == 1:  # the norm of the update is a sum of inexact squares: order shows in the last bits
        np.testing.assert_allclose(xs, x, rtol=1e-6, atol=0)
        np.testing.assert_array_equal(ms, m)
    else:
        np.testing.assert_array_equal(xs.view(np.uint32), x.view(np.uint32))
        np.testing.assert_array_equal(ms.view(np.uint32), m.view(np.uint32))
    np.testing.assert_array_equal(got_row.view(np.uint32), v[:rows].view(np.uint32))
    if td_factor == TD_FACTORED:  # every shard's copy of col: the same bits
        for sv, lo, hi in zip(shard_v, cuts[:-1], cuts[1:]):
            np.testing.assert_array_equal(sv[hi - lo:].view(np.uint32), v[rows:].view(np.uint32))


def test_shard_boundary_inside_a_row_is_refused(lib, rng):
    rows, cols = 6, 10
    x = np.ones((rows, cols), np.float32)
    g, m = np.full_like(x, 0.1), np.zeros_like(x)
    v = np.full(3 + cols, 1e-4, np.float32)
    hp = hyperparams(lib, buffer_mode=1)
    row_sq, col_sq = np.zeros(3), np.zeros(cols)
    sums = FactorSums(row_sq.ctypes.data, col_sq.ctypes.data)
    # 30 elements from element 25: rows 2.5 .. 5.5
    flat = x.reshape(-1)
    d = Tensor(flat[25:].ctypes.data, g.reshape(-1)[25:].ctypes.data, m.reshape(-1)[25:].ctypes.data,
               v.ctypes.data, None, 30, 25, 0, 0, 0, 3, TD_FACTORED)
    out = Partials()
    before = [a.tobytes() for a in (x, m, v)]
    assert lib.luminav_reduce_with_factors(C.byref(hp), C.byref(d), 0, None, C.byref(sums), C.byref(out),
                                           None) == 1
    message = lib.luminav_last_error_message().decode()
    assert "index_offset" in message and "multiple of C = 10" in message and "inside a row" in message
    assert lib.luminav_apply_with_factors(C.byref(hp), C.byref(d), C.byref(Globals(0, 1, 1, 1, 6)),
                                          C.byref(sums), None) == 1
    assert [a.tobytes() for a in (x, m, v)] == before


def test_exp_avg_sq_length(lib):
    assert lib.luminav_exp_avg_sq_length(91, 7, 2, 0) == 91
    assert lib.luminav_exp_avg_sq_length(91, 7, 1, TD_FACTORED) == 20
    assert lib.luminav_exp_avg_sq_length(91, 91, 1, TD_FACTORED) == 91
    assert lib.luminav_exp_avg_sq_length(91, 7, 1, TD_ROW) == 7
    assert lib.luminav_exp_avg_sq_length(91, 7, 1, TD_TENSOR) == 1
    assert lib.luminav_exp_avg_sq_length(91, 4, 1, TD_ROW) == 0


@pytest.mark.parametrize("use_master,mode", [(False, 2), (True, 2), (False, 1)])
def test_standalone_triton_api(lib, rng, use_master, mode):
    engine = lib.luminav_triton_engine_create()
    assert engine
    try:
        assert lib.luminav_triton_get_platform(engine).decode() == "cpu"
        arch = lib.luminav_triton_get_arch(engine).decode()
        assert arch.startswith(os.uname().machine), arch
        x, g, m, v = state(rng, 129, mode)
        master = x.copy() if use_master else None
        beta2 = 0.999
        # The standalone API takes float betas: the bias corrections use float(beta).
        hp = Hyper(lr=1e-2, beta1=float(np.float32(0.9)), beta2=float(np.float32(beta2)),
                   eps=float(np.float32(1e-8)), weight_decay=float(np.float32(0.01)), buffer_mode=mode)
        ref = reference_step(hp, x, m, v, g, 7)
        status = lib.luminav_triton_step_f32(engine, ptr(x), ptr(g), ptr(m), ptr(v), ptr(master), None,
                                             x.size, 1e-2, 0.9, beta2, 1e-8, 0.01, 0.0, 0.0, mode, 0, 0,
                                             0.0, 7, 42)
        assert status == 0, lib.luminav_last_error_message()
        assert_within_forward_error("x", master if use_master else x, ref.x, ref.scale_x)
        if use_master:
            np.testing.assert_array_equal(x, master)
        assert_within_forward_error("m", m, ref.m, ref.scale_m)
        assert_within_forward_error("v", v, ref.v, ref.scale_v)
        assert lib.luminav_triton_step_f32(engine, ptr(x), ptr(g), ptr(m), ptr(v), None, None, x.size,
                                           -1.0, 0.9, beta2, 1e-8, 0.01, 0.0, 0.0, mode, 0, 0, 0.0, 8, 42) == 1
        assert "lr" in lib.luminav_last_error_message().decode()
    finally:
        lib.luminav_triton_engine_destroy(engine)


C_PROGRAM = r"""
/* Compiled as C99: one CLM step through each header's API. */
#include <stdio.h>
#include <luminav/luminav.h>
#include <luminav_triton_standalone.h>

int main(void) {
  float x[3] = {0.5f, -1.0f, 2.0f}, g[3] = {0.1f, -0.2f, 0.3f}, m[3] = {0}, v[3] = {0};
  float x2[3] = {0.5f, -1.0f, 2.0f}, m2[3] = {0}, v2[3] = {0};
  luminav_hyperparams hp;
  luminav_tensor t = {0};
  LuminaVTritonEngine* engine;
  int status, i;
  luminav_hyperparams_init(&hp);
  t.param = x; t.grad = g; t.exp_avg = m; t.exp_avg_sq = v; t.num_elements = 3;
  t.param_dtype = LUMINAV_DTYPE_F32; t.grad_dtype = LUMINAV_DTYPE_F32;
  status = luminav_step(&hp, &t, NULL);
  if (status != LUMINAV_STATUS_OK) { printf("error %s\n", luminav_last_error_message()); return 1; }
  engine = luminav_triton_engine_create();
  status = luminav_triton_step_f32(engine, x2, g, m2, v2, NULL, NULL, 3, 1e-3f, 0.9f, 0.999f, 1e-8f,
                                   0.01f, 0.0f, 0.0f, 2, 0, 0, 0.0f, 1, 0);
  if (status != 0) return 2;
  printf("%s %s %s\n", luminav_version(), luminav_triton_get_platform(engine),
         luminav_triton_get_arch(engine));
  for (i = 0; i < 3; ++i) printf("%.9g %.9g %.9g %.9g\n", x[i], m[i], v[i], x2[i]);
  hp.eps = -1.0;
  status = luminav_step(&hp, &t, NULL);
  printf("%d %s\n", status, luminav_last_error_message());
  luminav_triton_engine_destroy(engine);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_program_compiled_as_c_against_the_installed_headers(tmp_path):
    source = tmp_path / "step.c"
    source.write_text(C_PROGRAM)
    lib_path = Path(luminamoon.c_library_path())
    exe = tmp_path / "step"
    subprocess.run(["cc", "-std=c99", "-pedantic", "-Wall", "-Werror", "-I", luminamoon.include_dir(),
                    str(source), "-o", str(exe), str(lib_path), f"-Wl,-rpath,{lib_path.parent}"],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    version, platform, arch = out[0].split()
    assert version == "0.1.0" and platform == "cpu" and arch
    values = np.array([[float(f) for f in line.split()] for line in out[1:4]])
    x0 = np.array([0.5, -1.0, 2.0], np.float32)
    g = np.array([0.1, -0.2, 0.3], np.float32)
    ref = reference_step(Hyper(), x0, np.zeros(3), np.zeros(3), g, 1)
    assert_within_forward_error("x", values[:, 0], ref.x, ref.scale_x)
    assert_within_forward_error("m", values[:, 1], ref.m, ref.scale_m)
    assert_within_forward_error("v", values[:, 2], ref.v, ref.scale_v)
    # the seed API (float betas) agrees with the double API within the bound at t = 1
    assert_within_forward_error("x (standalone)", values[:, 3], ref.x, ref.scale_x)
    status, message = out[4].split(" ", 1)
    assert status == "1" and "eps" in message
