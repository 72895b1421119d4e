"""LuminaV's Triton kernels (spec/luminav-update.md): the step's constants, pass 1, its finalize, pass 2.

A second implementation language of the math in src/optim/core/ (update_math.h,
half_convert.h, stochastic_hash.h, reduction_rounds.h, factor_update.h): every
formula below mirrors the function named in its comment, operation for
operation (the reciprocal bias corrections, sqrt and divide correctly rounded
as nvcc's defaults are), so that the CUDA, CPU and Triton backends meet the
spec's accuracy contract against one another and write the same stochastic
rounding bits where their fp32 values agree.

Note [device-resident Triton step]: as the CUDA backend's kernels (Note
[device-resident step] in src/optim/cuda/), nothing here needs the host
during a step. ``prepare_kernel`` forms the step's fp32 constants on the
device from the step counter, lr and GradScaler's scale (bias corrections in
double); pass 1 writes per-program partials that ``finalize_kernel`` adds in
program order (no atomics in a sum, so the bits repeat) into the tensor's
globals; a failed finite check, ``found_inf`` or an earlier failure sets the
step's words, and every later kernel of the step reads them and writes
nothing; ``commit_kernel`` writes the verdict into the status word
(luminav_step_status) and ``advance_kernel`` the step counters.

16-bit parameters and gradients travel as int16 views and are converted with
integer operations (bf16) or bit casts (fp16), identically in compiled code
and under TRITON_INTERPRET=1.

Buffers of the step (all on the tensors' device):
  k      fp32[8]  lr, 1 - lr*wd, 1/(1-beta1^t), 1/(1-beta2^t), 1/sigma (prepare_kernel)
  step   int64[1] t (the stochastic rounding hash's step)
  hp64   fp64[4]  beta1, beta2, weight_decay, lr (the host's values, as given)
  words  int32[2] blocked, first bad position (kNoBad: none)
  status int32[4] luminav_step_status: verdict, failed, skipped, refused
  gl     fp32[4]  a tensor's globals: s, cautious scale, bound scale, rho
"""
from __future__ import annotations

import os

import triton
import triton.language as tl


def _interpreter_scalar_index() -> None:
    """Note [interpreter and NumPy 2.4]: TRITON_INTERPRET=1 holds a scalar as a 1-element array and
    turns it into a loop bound with int(array), which NumPy 2.4 refuses (only 0-d arrays convert):
    every kernel with a runtime loop bound fails under Triton 3.6's interpreter. The interpreter's
    tensor patch is wrapped so that __index__ reads the one element instead."""
    from triton.runtime import interpreter
    original = interpreter._patch_lang_tensor
    if getattr(original, "luminav_wrapped", False):
        return

    def patch(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patch.luminav_wrapped = True
    interpreter._patch_lang_tensor = patch


if os.environ.get("TRITON_INTERPRET") == "1":
    _interpreter_scalar_index()

# The step's words (dispatch::AsyncStepWords): no tensor has failed yet.
NO_BAD = 0x7FFFFFFF
# Partials per pass-1 program (luminav_partials' fields, counts as exact fp64).
PARTIAL_FIELDS = 5
# Note [Triton block sizes]: elements per program of the element-wise kernels and warps per
# program, for the JIT step (triton_step.py) and the AOT build (build_triton_aot.py) alike. The
# apply kernel at 1024 elements and 4 warps ran the CLM fp32 step at N = 2^28 in 2.22 ms on the
# H200 (92% of the device copy), against 2.29-2.47 ms for 2048-8192 elements with 4-16 warps
# (docs/benchmarks.md, issue 18; docs/runs/issue18_run2/sweep.log).
APPLY_BLOCK = 1024
REDUCE_BLOCK = 4096
FINALIZE_BLOCK = 1024
NUM_WARPS = 4
# Note [Triton factor tiles] (issue 18 session 6, the nvcc design of Note [factor tiles] in
# src/optim/dispatch/async_workspace.h): TD-CLM's round 0 reads each row/factored gradient once,
# in tiles of FACTOR_CHUNK_ROWS rows by FACTOR_WIDE_COLS columns (FACTOR_NARROW_COLS where C <
# FACTOR_WIDE_FROM), FACTOR_LOAD_ROWS rows per load (the whole tile: every load of a program is
# issued before the first use); a tile gives one fp64 partial per row (its strip of columns) and
# one per column (its chunk of rows), and the finite verdict. 128 columns, not the nvcc kernels'
# 256: Triton lays a [rows, 128] fp32 tile out with each row inside one warp (4 columns a lane),
# so a row's sum is a warp shuffle tree; at 256 columns a row spans two warps and every row sum
# went through shared memory with barriers (seen in the sm_90 SASS). The factors are then formed
# over many programs: factor_rows_kernel (FACTOR_ROW_BLOCK rows a program, and the sum of its new
# row factors) and factor_cols_kernel (FACTOR_COL_BLOCK columns a program, rho from the row
# blocks' sums), FACTOR_MERGE partials per load, each sum in an order fixed by the shape alone.
# The JIT and the AOT build take the same tiles (build_triton_aot.py names them). Until session 5
# the row sums, the column sums (a second read of the gradient) and the factors (one program for
# the whole tensor) were separate: 2.27-2.36 ms at 16384 x 16384 fp32 on the H200 against 1.91 ms
# for the nvcc kernels of this design (docs/benchmarks.md, issue 18 session 6).
# A 2-byte gradient's wide tile is 256 columns: 8 values, one 16-byte load, a lane, so that a row still
# lies in one warp and a program reads as many bytes as an fp32 one. At 128 columns (4 values, 8 bytes
# a lane) the factored bf16 + masters step ran at 89% of the H100's copy bandwidth by replay and 86%
# eager; at 256 x 128 rows, 92-93% and 89-90% (docs/benchmarks.md, issue 18 session 16).
# Warps per sums program by tile width (FACTOR_WARPS): the 2-byte tile at 4 warps, not 8, read a bf16
# 16384 x 16384 gradient at 2.42 TB/s on the H200 (8 warps: 1.76; the copy 4.27), and the factored
# bf16 + masters step ran 4-5% faster by replay at 2^28 and in the Llama 98M loop, on the H200 and the
# H100 alike. The fp32 tile kept 8: at 2 warps its sums reached 3.75 TB/s and the 2^28 step 7% faster,
# but the loop's step (111 smaller tensors) 11% slower, and the AOT step 10% slower
# (docs/benchmarks.md, issue 18 session 17). At 4 warps (session 32, H100, the Llama 98M loop with
# LUMINAV_TRITON_FACTOR_WARPS=2/4/8 alternating, two rounds) the JIT's step as a graph took 0.855/0.850
# ms against 0.898/0.893 at 8 and 0.972/0.963 at 2 (nvcc 0.882-0.884): the fp32 tile now takes 4. The
# narrow tile keeps 8 (not measured).
# FACTOR_WARPS_ONE_ALIGNED: the one-tensor sums launch over an aligned gradient (address, R and C
# multiples of 16: what the JIT specializes on, and the AOT _a16 kernel's hints) takes the fp32 tile at
# 2 warps. That launch is the one the 3.75 TB/s and the 7% faster 2^28 step above came from (session 32,
# H100, the JIT: 2.192 against 2.265 ms by replay, 98% of copy). The cubins (offline, sm_90,
# cuobjdump -res-usage): at 2 warps the kernel holds its 128 x 128 tile in 255 registers with 128 bytes
# of spill stack once the row partials' address is known to be a multiple of 16, 896 bytes without
# that hint (session 17's AOT _a16 kernel, which ran 10% slower at 2 warps). Those are the AOT build's
# cubins, whose counts are 64-bit: the JIT passes R and C as i32, and its own compile (session 33, offline
# with the JIT's binder) holds the tile in 166 registers with no spill. AOT sums built that way (session 35,
# docs/runs/2026-12-07-s35-gpu/i32-sums.patch) ran the factored and row steps at 2^28 0-1% faster on the H100,
# about the drift of the unchanged kernels in the same call: not kept. The multi-tensor kernel does not spill at
# 2 warps (222 registers), but the loop above was slower.
FACTOR_CHUNK_ROWS = 128
FACTOR_WIDE_COLS = 128
FACTOR_WIDE_COLS_2B = 256
FACTOR_NARROW_COLS = 16
FACTOR_WIDE_FROM = 128
FACTOR_LOAD_ROWS = {128: 128, 256: 128, 16: 128}  # rows per load of each tile (one load per tile)
FACTOR_ROW_BLOCK = 256
FACTOR_COL_BLOCK = 256
FACTOR_MERGE = 16
# Warps of the factor kernels (factor_rows/cols_kernel and their multi-tensor forms). At 4 warps each
# thread holds 32 values of a [MERGE, BLOCK] load of fp64 partials, and the sm_90 SASS of
# factored_cols_multi_kernel (offline: nvdisasm of the AOT cubin) loads them one at a time, one register
# reused, each add waiting for its load: in the Llama 98M loop the column factors took 25 us of the
# step on the H100 against the nvcc kernel's 5 (docs/benchmarks.md, row X3k). At 8 warps a thread holds
# 16 and the loop issues 8 loads before its first add (64 registers): the column factors 5.7 us and the
# row factors 4.6-5.0 us (were 8.2-8.5), against nvcc's 5.3 and 4.1 (session 32, H100, torch.profiler).
FACTOR_FORM_WARPS = 8
FACTOR_WARPS = {128: 4, 256: 4, 16: 8}  # by tile columns, as FACTOR_LOAD_ROWS
FACTOR_WARPS_ONE_ALIGNED = {128: 2, 256: 4, 16: 8}  # the one-tensor sums over aligned gradients (JIT, AOT _a16)
# Parameter/gradient dtype codes of the kernels' DTYPE arguments.
F32, BF16, F16 = 0, 1, 2
# TD-CLM second-moment kinds (core::SecondMoment); CLM and per-element TD-CLM are ELEMENT.
ELEMENT, TENSOR, ROW, FACTORED = 0, 1, 2, 3


# ---- conversions and rounding (core/half_convert.h, core/stochastic_hash.h) ----------------------


@triton.jit
def rounding_bits(seed, step, index):
    """core::rounding_bits: the SplitMix64 finaliser over (seed, t, i), high 32 bits (uint64 in)."""
    z = seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + index * 0x94D049BB133111EB
    z ^= z >> 30
    z *= 0xBF58476D1CE4E5B9
    z ^= z >> 27
    z *= 0x94D049BB133111EB
    z ^= z >> 31
    return (z >> 32).to(tl.uint32)


@triton.jit
def load_f32(ptr, offs, mask, DTYPE: tl.constexpr):
    """A parameter or gradient as fp32 (16-bit data through its int16 view; exact)."""
    if DTYPE == 0:
        return tl.load(ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    else:
        h = tl.load(ptr + offs, mask=mask, other=0, eviction_policy="evict_first")
        if DTYPE == 1:
            # core::bf16_to_f32: the upper half of an fp32
            bits = h.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
            return bits.to(tl.float32, bitcast=True)
        else:
            return h.to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def f32_to_bf16_rne(x):
    """core::f32_to_bf16_rne: round to nearest even, NaN kept quiet (uint32 bits in the low half)."""
    u = x.to(tl.uint32, bitcast=True)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return tl.where(nan, (u >> 16) | 0x0040, rounded & 0xFFFF)


@triton.jit
def f32_to_bf16_stochastic(x, r):
    """core::f32_to_bf16_stochastic: upper half of bits + (r & 0xFFFF); Inf/NaN/overflow as RNE."""
    u = x.to(tl.uint32, bitcast=True)
    nearest = f32_to_bf16_rne(x)
    h = ((u + (r & 0xFFFF)) >> 16) & 0xFFFF
    special = ((u & 0x7F800000) == 0x7F800000) | ((nearest & 0x7FFF) == 0x7F80) | ((h & 0x7FFF) == 0x7F80)
    return tl.where(special, nearest, h)


@triton.jit
def f16_magnitude(bits):
    """|value| of fp16 bits (uint32 in the low half) as fp32 (core::f16_to_f32, exact)."""
    return (bits & 0x7FFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def f32_to_f16_stochastic(x, r):
    """core::f32_to_f16_stochastic: hi iff r < ceil(f * 2^32) (Note [exact threshold]); large values RNE."""
    a = x.to(tl.uint32, bitcast=True) & 0x7FFFFFFF
    nearest = x.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)  # RNE (cvt.rn)
    abs_x = a.to(tl.float32, bitcast=True)
    abs_nearest = f16_magnitude(nearest)
    lo = tl.where(abs_nearest > abs_x, nearest - 1, nearest)
    hi = lo + 1
    abs_lo = f16_magnitude(lo)
    abs_hi = f16_magnitude(hi)
    fraction = tl.div_rn(abs_x - abs_lo, abs_hi - abs_lo)
    threshold = tl.math.ceil(fraction * 4294967296.0).to(tl.uint64)
    chosen = tl.where(r.to(tl.uint64) < threshold, hi, lo)
    keep = (a >= 0x477FE000) | (abs_nearest == abs_x)
    return tl.where(keep, nearest, chosen) & 0xFFFF


@triton.jit
def store_param(ptr, offs, x, mask, seed, step, index_offset, DTYPE: tl.constexpr, SR: tl.constexpr):
    """core::store_param: fp32 as is; 16-bit by the spec's stochastic rounding or RNE."""
    if DTYPE == 0:
        tl.store(ptr + offs, x, mask=mask, cache_modifier=".cs")
    else:
        if SR:
            r = rounding_bits(seed, step, index_offset + offs.to(tl.uint64))
            if DTYPE == 1:
                bits = f32_to_bf16_stochastic(x, r)
            else:
                bits = f32_to_f16_stochastic(x, r)
        else:
            if DTYPE == 1:
                bits = f32_to_bf16_rne(x)
            else:
                bits = x.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)
        tl.store(ptr + offs, bits.to(tl.uint16).to(tl.int16, bitcast=True), mask=mask, cache_modifier=".cs")


# ---- the element math (core/update_math.h) --------------------------------------------------------


@triton.jit
def tanh_f32(x):
    """tanh to 0.5 ulp + 2^-29 in fp32, saturating, never NaN for a non-NaN input (spec step 2).

    Evaluated in double as the host's ScalarOps::tanh is (Note [scalar tanh
    accuracy]): (1 - e)/(1 + e) with e = exp(-2|x|) in [0, 1] cannot overflow
    and tends to 1; below |x| = 2^-10, where 1 - e cancels, the odd series
    x - x^3/3 + 2x^5/15 (truncation below 2^-60 relative). tl.math.tanh does
    not exist in Triton 3.6 and libdevice's fails under the interpreter.
    """
    a = tl.abs(x.to(tl.float64))
    e = tl.exp(-2.0 * a)
    big = (1.0 - e) / (1.0 + e)
    a2 = a * a
    small = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0)))
    t = tl.where(a < 0.0009765625, small, big)
    return tl.where(x < 0, -t, t).to(tl.float32)


@triton.jit
def raw_update(m, second, g, inv_bc1, inv_bc2, eps, lam, one_minus_lam, tau,
               HAS_LAM: tl.constexpr, HAS_TAU: tl.constexpr):
    """core::raw_update: u = n / (sqrt(second / (1-beta2^t)) + eps), soft-clipped when tau > 0."""
    n = m * inv_bc1
    if HAS_LAM:
        n = one_minus_lam * n + lam * g
    den = tl.sqrt_rn(second * inv_bc2) + eps
    u = tl.div_rn(n, den)
    if HAS_TAU:
        u = tau * tanh_f32(tl.div_rn(u, tau))
    return u


@triton.jit
def element_update(k_ptr, g, m_old, v_old, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, lam,
                   one_minus_lam, tau, CLM: tl.constexpr, HAS_LAM: tl.constexpr, HAS_TAU: tl.constexpr):
    """core::clm_moments_and_update / tdclm_moments_and_update: (m, v, u); TD-CLM's v_old is vhat."""
    inv_bc1 = tl.load(k_ptr + 2)
    inv_bc2 = tl.load(k_ptr + 3)
    m = beta1 * m_old + one_minus_beta1 * g
    if CLM:
        v = beta2 * v_old + one_minus_beta2 * g * g
    else:
        v = v_old
    u = raw_update(m, v, g, inv_bc1, inv_bc2, eps, lam, one_minus_lam, tau, HAS_LAM, HAS_TAU)
    return m, v, u


@triton.jit
def scaled_gradient(k_ptr, g, SCALED: tl.constexpr):
    """core::scaled_gradient: g * fp32(1/sigma) (the multiply is skipped without a scale)."""
    if SCALED:
        inv = tl.load(k_ptr + 4)
        g = tl.where(inv == 1.0, g, g * inv)
    return g


@triton.jit
def row_and_column(offs, start, cols):
    """(row, column) of the flat offsets `offs` in [start, start + BLOCK) of a row-major tensor of C = cols
    columns, with one integer division per program instead of a 64-bit one per element (Note [row index
    without division]).

    Note [row index without division]: within a program, j = offs - C*floor(start/C) lies in [0, C + BLOCK)
    and its row within the program is q = floor(j/C) <= 1 + BLOCK/C. fp32(j) * fp32(1/C) (a reciprocal within
    2 ulp) is within 2^-21 relative of j/C, so within 0.001 of it (q <= 1025), and its truncation is q - 1,
    q or q + 1; one exact integer test each way corrects it. Below C = 2^29 (every tensor but a few rows
    of a billion columns) j, q * C and the column fit in 32 bits, where the test costs a few instructions;
    in 64 bits it cost about 75 instructions per element, as much as the rest of the bf16 pass 2 (sm_90
    SASS). A 64-bit division per element (session 5) is a long subroutine on a GPU; the nvcc kernels make
    one 32-bit division per 4 elements.
    """
    r0 = start // cols
    if cols < 0x20000000:
        cols32 = cols.to(tl.int32)
        j32 = (start - r0 * cols).to(tl.int32) + (offs - start).to(tl.int32)
        q32 = (j32.to(tl.float32) * (1.0 / cols.to(tl.float32))).to(tl.int32)
        q32 = tl.where(q32 * cols32 > j32, q32 - 1, q32)
        q32 = tl.where(q32 * cols32 + cols32 <= j32, q32 + 1, q32)
        row = r0 + q32.to(tl.int64)
        col = (j32 - q32 * cols32).to(tl.int64)
    else:
        j = offs - r0 * cols
        q = (j.to(tl.float32) * (1.0 / cols.to(tl.float32))).to(tl.int64)
        q = tl.where(q * cols > j, q - 1, q)
        q = tl.where((q + 1) * cols <= j, q + 1, q)
        row = r0 + q
        col = j - q * cols
    return row, col


@triton.jit
def second_of(v_ptr, gl_ptr, row_ptr, col_over_rho_ptr, offs, start, mask, cols, KIND: tl.constexpr):
    """The element's second moment as pass 2 reads it: v_i, s, row_r(i) or row_r * col_c / rho (`start`:
    the program's first offset).

    Note [programs inside one row]: where the program's elements all lie in one row (every program when
    BLOCK divides C, and most when C >= BLOCK), that row's factor is one scalar load and the columns run
    on from start mod C, so no element computes its own row and column (Note [row index without
    division]) nor gathers its own row factor. In the sm_90 SASS of the factored bf16 + masters pass 2
    (offline, Triton 3.6) that cuts the instructions a program runs by about a fifth (about 1,120 -> 900 a
    warp for 8 elements a thread); on two H100s that step ran 3.2-4.6% faster on the AOT kernels (94% of
    copy) and 1-3% on the JIT. On the H200 it ran at 73-81% of copy before this and is not yet measured
    after (docs/benchmarks.md, issue 18 sessions 36 and 37). The products are the same operands in the same
    order: the same bits either way."""
    if KIND == 0:
        return tl.load(v_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    elif KIND == 1:
        return tl.load(gl_ptr + 0)
    else:
        r0 = start // cols
        c0 = start - r0 * cols
        if c0 + offs.shape[0] <= cols:
            row_factor = tl.load(row_ptr + r0)
            if KIND == 2:
                second = tl.broadcast_to(row_factor, offs.shape)
            else:
                second = row_factor * tl.load(col_over_rho_ptr + c0 + tl.arange(0, offs.shape[0]), mask=mask,
                                              other=0.0)
        else:
            r, c = row_and_column(offs, start, cols)
            row_factors = tl.load(row_ptr + r, mask=mask, other=0.0)
            if KIND == 2:
                second = row_factors
            else:
                second = row_factors * tl.load(col_over_rho_ptr + c, mask=mask, other=0.0)
        return second


@triton.jit
def step_open(words_ptr):
    """True while this step may write: not blocked and no tensor has failed its finite check."""
    return (tl.load(words_ptr + 0) == 0) & (tl.load(words_ptr + 1) == 0x7FFFFFFF)


# ---- the step's constants ------------------------------------------------------------------------


@triton.jit
def pow_by_squaring(base, t):
    """base^t in double for 1 <= t < 2^25 (the fp32 step counter's exact range)."""
    result = base * 0.0 + 1.0
    for bit in tl.static_range(25):
        result = tl.where(((t >> bit) & 1) != 0, result * base, result)
        base = base * base
    return result


@triton.jit
def prepare_kernel(k_ptr, step_out_ptr, hp64_ptr, counter_ptr, lr_ptr, grad_scale_ptr, found_inf_ptr,
                   status_ptr, words_ptr, LR: tl.constexpr, SCALED: tl.constexpr, FOUND_INF: tl.constexpr,
                   RESET: tl.constexpr):
    """core::set_step_and_lr and inverse_grad_scale on the device (spec "Asynchronous devices").

    t = counter + 1, lr from hp64 (LR = 0), a float32 (1) or float64 (2) tensor.
    RESET (the first group of a step) also resets the step's words, blocked
    when the status word holds a failure or GradScaler found an Inf.
    """
    beta1 = tl.load(hp64_ptr + 0)
    beta2 = tl.load(hp64_ptr + 1)
    weight_decay = tl.load(hp64_ptr + 2)
    if LR == 0:
        lr = tl.load(hp64_ptr + 3)
    else:
        lr = tl.load(lr_ptr).to(tl.float64)
    t = tl.load(counter_ptr).to(tl.int64) + 1
    tl.store(step_out_ptr, t)
    tl.store(k_ptr + 0, lr.to(tl.float32))
    tl.store(k_ptr + 1, (1.0 - lr * weight_decay).to(tl.float32))
    tl.store(k_ptr + 2, (1.0 / (1.0 - pow_by_squaring(beta1, t))).to(tl.float32))
    tl.store(k_ptr + 3, (1.0 / (1.0 - pow_by_squaring(beta2, t))).to(tl.float32))
    if SCALED:
        tl.store(k_ptr + 4, (1.0 / tl.load(grad_scale_ptr).to(tl.float64)).to(tl.float32))
    else:
        tl.store(k_ptr + 4, 1.0)
    if RESET:
        blocked = tl.load(status_ptr + 1) != 0
        if FOUND_INF:
            blocked = blocked | (tl.load(found_inf_ptr) != 0.0)
        tl.store(words_ptr + 0, blocked.to(tl.int32))
        tl.store(words_ptr + 1, 0x7FFFFFFF)


# ---- pass 1 -------------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["cols", "position"])
def reduce_kernel(g_ptr, m_ptr, v_ptr, x_ptr, partials_ptr, k_ptr, words_ptr, gl_ptr, row_ptr,
                  col_over_rho_ptr, n, cols, position, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, lam,
                  one_minus_lam, tau, GDTYPE: tl.constexpr, XDTYPE: tl.constexpr, GRAD_SUMS: tl.constexpr,
                  UPDATE_SUMS: tl.constexpr, KIND: tl.constexpr, HAS_LAM: tl.constexpr,
                  HAS_TAU: tl.constexpr, SCALED: tl.constexpr, VERDICT: tl.constexpr, BLOCK: tl.constexpr):
    """One program's partials (cuda reduce_element): nonfinite count and sum g^2 (GRAD_SUMS); K,
    sum (lr*u*phi)^2 and sum x^2 (UPDATE_SUMS, u recomputed from the old state as pass 2 will).

    x_ptr is the master (XDTYPE 0) or the parameter. Partials are fp64, field-major
    (partials[field * programs + program]). VERDICT (a CLM tensor with nothing else to reduce):
    a program that finds a non-finite gradient marks the step itself (the smallest position
    wins, whatever the order), and the finalize launch is skipped.
    """
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) & step_open(words_ptr)
    g = scaled_gradient(k_ptr, load_f32(g_ptr, offs, mask, GDTYPE), SCALED)
    base = partials_ptr + pid.to(tl.int64)
    stride = tl.num_programs(0).to(tl.int64)  # field-major: finalize reads each field coalesced
    if GRAD_SUMS:
        bad = ((g.to(tl.uint32, bitcast=True) & 0x7F800000) == 0x7F800000) & mask
        g64 = g.to(tl.float64)
        bad_count = tl.sum(bad.to(tl.float64), axis=0)
        tl.store(base, bad_count)
        if VERDICT:
            if bad_count > 0.0:
                tl.atomic_min(words_ptr + 1, position)
        tl.store(base + 2 * stride, tl.sum(g64 * g64, axis=0))
    else:
        tl.store(base, 0.0)
        tl.store(base + 2 * stride, 0.0)
    if UPDATE_SUMS:
        m_old = tl.load(m_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        second = second_of(v_ptr, gl_ptr, row_ptr, col_over_rho_ptr, offs, pid.to(tl.int64) * BLOCK, mask, cols,
                           KIND)
        x = load_f32(x_ptr, offs, mask, XDTYPE)
        m, v, u = element_update(k_ptr, g, m_old, second, beta1, one_minus_beta1, beta2, one_minus_beta2,
                                 eps, lam, one_minus_lam, tau, KIND == 0, HAS_LAM, HAS_TAU)
        agree = (u * g > 0.0) & mask
        # core::unscaled_step: lr * u * phi
        d = (tl.load(k_ptr + 0) * tl.where(agree, u, 0.0)).to(tl.float64)
        x64 = x.to(tl.float64)
        tl.store(base + 1 * stride, tl.sum(agree.to(tl.float64), axis=0))
        tl.store(base + 3 * stride, tl.sum(tl.where(mask, d * d, 0.0), axis=0))
        tl.store(base + 4 * stride, tl.sum(x64 * x64, axis=0))
    else:
        tl.store(base + 1 * stride, 0.0)
        tl.store(base + 3 * stride, 0.0)
        tl.store(base + 4 * stride, 0.0)


@triton.jit
def nonfinite_f64(x):
    """x is NaN or +-Inf (fp64 bits)."""
    return (x.to(tl.uint64, bitcast=True) & 0x7FF0000000000000) == 0x7FF0000000000000


@triton.jit(do_not_specialize=["position", "with_cols"])
def factor_sums_kernel(g_ptr, row_part_ptr, col_part_ptr, k_ptr, words_ptr, rows, cols, position, with_cols,
                       GDTYPE: tl.constexpr, SCALED: tl.constexpr, CHUNK_ROWS: tl.constexpr,
                       LOAD_ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    """TD-CLM row/factored round 0 (Note [Triton factor tiles]; cuda factor_sums): program
    chunk * strips + strip reads rows [CHUNK_ROWS chunk, +CHUNK_ROWS) x columns [BLOCK_C strip, +BLOCK_C)
    of the gradient once and writes each row's sum of g^2 over the strip (row_part[strip * R + r]),
    each column's over the chunk (col_part[chunk * C + c], when with_cols) and the finite verdict.

    The verdict needs no test per element: g^2 of a finite fp32 g is finite in fp64 (at most 1.2e77,
    and 2^64 such still sum below 1e97), a NaN or Inf square is NaN or Inf and stays so in a sum of
    squares, so a column's sum over the chunk is non-finite exactly when one of its gradients is. A
    program that finds one marks the step with `position` (the smallest wins; kNoBad, as the JIT
    passes without the check, changes nothing).
    """
    if step_open(words_ptr):
        factor_sums_program(tl.program_id(0).to(tl.int64), g_ptr, row_part_ptr, col_part_ptr, k_ptr, words_ptr, rows,
                            cols, position, with_cols, GDTYPE, SCALED, CHUNK_ROWS, LOAD_ROWS, BLOCK_C)


@triton.jit
def factor_sums_program(pid, g_ptr, row_part_ptr, col_part_ptr, k_ptr, words_ptr, rows, cols, position, with_cols,
                        GDTYPE: tl.constexpr, SCALED: tl.constexpr, CHUNK_ROWS: tl.constexpr,
                        LOAD_ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    """Program `pid` (int64) of factor_sums_kernel, for it and for factored_sums_multi_kernel."""
    strips = tl.cdiv(cols, BLOCK_C)
    chunk = pid // strips
    strip = pid - chunk * strips
    c = strip * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < cols
    col = tl.zeros([LOAD_ROWS, BLOCK_C], dtype=tl.float64)
    for i in tl.static_range(CHUNK_ROWS // LOAD_ROWS):  # unrolled: the loads of a tile issue together
        r = chunk * CHUNK_ROWS + i * LOAD_ROWS + tl.arange(0, LOAD_ROWS)
        r_ok = r < rows
        mask = r_ok[:, None] & c_ok[None, :]
        g = scaled_gradient(k_ptr, load_f32(g_ptr, r[:, None] * cols + c[None, :], mask, GDTYPE), SCALED)
        g64 = g.to(tl.float64)
        sq = g64 * g64
        col += sq
        tl.store(row_part_ptr + strip * rows + r, tl.sum(sq, axis=1), mask=r_ok)
    col_sum = tl.sum(col, axis=0)
    if with_cols != 0:
        tl.store(col_part_ptr + chunk * cols + c, col_sum, mask=c_ok)
    if tl.max(nonfinite_f64(col_sum).to(tl.int32), axis=0) > 0:
        tl.atomic_min(words_ptr + 1, position.to(tl.int32))


@triton.jit
def merged_factor(part_ptr, stride, count, idx, ok, old_ptr, elements, beta2, one_minus_beta2, BLOCK: tl.constexpr,
                  MERGE: tl.constexpr):
    """The new factors of the rows or columns `idx` (core::factor_mean, factor_ema): each one's `count`
    partials part[q * stride + idx] added MERGE at a time, then over the MERGE lanes by a fixed tree, over
    `elements`, and blended with old_ptr[idx] (Note [Triton factor tiles])."""
    lanes = tl.arange(0, MERGE)
    acc = tl.zeros([MERGE, BLOCK], dtype=tl.float64)
    for q0 in range(0, count, MERGE):
        q = (q0 + lanes).to(tl.int64)
        acc += tl.load(part_ptr + q[:, None] * stride + idx[None, :], mask=(q[:, None] < count) & ok[None, :],
                       other=0.0)
    mean = (tl.sum(acc, axis=0) / elements.to(tl.float64)).to(tl.float32)
    return beta2 * tl.load(old_ptr + idx, mask=ok, other=0.0) + one_minus_beta2 * mean


@triton.jit(do_not_specialize=["rows", "cols", "strips"])
def factor_rows_kernel(row_part_ptr, exp_avg_sq_ptr, new_ptr, block_sums_ptr, words_ptr, rows, cols, strips, beta2,
                       one_minus_beta2, BLOCK: tl.constexpr, MERGE: tl.constexpr):
    """The new row factors of rows [BLOCK pid, +BLOCK) (core::updated_row_factor: each row's strip
    partials added MERGE at a time, then MERGE lanes by a fixed tree) into new[r], and the sum of
    these new factors in fp64 (a fixed tree) into block_sums[pid] (Note [Triton factor tiles])."""
    if step_open(words_ptr):
        factor_rows_program(tl.program_id(0), row_part_ptr, exp_avg_sq_ptr, new_ptr, block_sums_ptr, rows, cols, strips,
                            beta2, one_minus_beta2, BLOCK, MERGE)


@triton.jit
def factor_rows_program(pid, row_part_ptr, exp_avg_sq_ptr, new_ptr, block_sums_ptr, rows, cols, strips, beta2,
                        one_minus_beta2, BLOCK: tl.constexpr, MERGE: tl.constexpr):
    """Program `pid` of factor_rows_kernel, for it and for factored_rows_multi_kernel."""
    r = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    r_ok = r < rows
    row = merged_factor(row_part_ptr, rows, strips, r, r_ok, exp_avg_sq_ptr, cols, beta2, one_minus_beta2,
                        BLOCK, MERGE)
    tl.store(new_ptr + r, row, mask=r_ok)
    tl.store(block_sums_ptr + pid, tl.sum(tl.where(r_ok, row.to(tl.float64), 0.0), axis=0))


@triton.jit(do_not_specialize=["rows", "cols", "form_cols", "chunks", "row_blocks"])
def factor_cols_kernel(col_part_ptr, block_sums_ptr, exp_avg_sq_ptr, new_ptr, gl_ptr, words_ptr, rows, cols,
                       form_cols, chunks, row_blocks, beta2, one_minus_beta2, BLOCK: tl.constexpr,
                       MERGE: tl.constexpr):
    """rho = fp32(sum of the new row factors / R) from the row blocks' sums (the same loads and tree in
    every program: the same bits), then the new column factors and col/rho of columns [BLOCK pid, +BLOCK)
    below form_cols (C factored, 0 row: one program) into new[R + c] and new[R + C + c], each column's
    chunk partials added MERGE at a time, then by a fixed tree. Program 0 writes the tensor's globals
    (s 0, scales 1, rho) as the finalize does (Note [Triton factor tiles])."""
    if step_open(words_ptr):
        factor_cols_program(tl.program_id(0), col_part_ptr, block_sums_ptr, exp_avg_sq_ptr, new_ptr, gl_ptr, rows, cols,
                            form_cols, chunks, row_blocks, beta2, one_minus_beta2, BLOCK, MERGE)


@triton.jit
def factor_cols_program(pid, col_part_ptr, block_sums_ptr, exp_avg_sq_ptr, new_ptr, gl_ptr, rows, cols, form_cols,
                        chunks, row_blocks, beta2, one_minus_beta2, BLOCK: tl.constexpr, MERGE: tl.constexpr):
    """Program `pid` of factor_cols_kernel, for it and for factored_cols_multi_kernel."""
    lanes = tl.arange(0, BLOCK)
    racc = tl.zeros([BLOCK], dtype=tl.float64)
    for b0 in range(0, row_blocks, BLOCK):
        b = b0 + lanes
        racc += tl.load(block_sums_ptr + b, mask=b < row_blocks, other=0.0)
    rho = (tl.sum(racc, axis=0) / rows.to(tl.float64)).to(tl.float32)
    if pid == 0:
        tl.store(gl_ptr + 0, 0.0)
        tl.store(gl_ptr + 1, 1.0)
        tl.store(gl_ptr + 2, 1.0)
        tl.store(gl_ptr + 3, rho)
    c = pid.to(tl.int64) * BLOCK + lanes
    c_ok = c < form_cols
    col = merged_factor(col_part_ptr, cols, chunks, c, c_ok, exp_avg_sq_ptr + rows, rows, beta2, one_minus_beta2,
                        BLOCK, MERGE)
    tl.store(new_ptr + rows + c, col, mask=c_ok)
    over = tl.where(rho > 0.0, tl.div_rn(col, tl.zeros_like(col) + rho), 0.0)  # core::column_over_rho
    tl.store(new_ptr + rows + cols + c, over, mask=c_ok)


# Note [finalize loads in flight]: the finalize is one program, and a 2^28-element tensor has 65,536
# partials (64 chunks of BLOCK per field). One chunk a loop iteration, the sm_90 SASS reused one register
# for the loads and each add waited for its load: a serial chain of L2 round trips. Four chunks' loads
# are written before their adds, which stay in chunk order, so each lane's sum has the same bits as one
# chunk at a time (a chunk past the end adds +0.0 to a sum of non-negative terms: no bit changes).
# Whether ptxas then keeps the loads in flight depends on what the compile is told: the AOT build (64-bit
# counts, no alignment hints) issued 18 loads before the first add and took 19 us per step at 2^28 on the
# H100, where the JIT's compile of the same source (32-bit counts, the partials' address hinted 16-aligned)
# added after every load or two and took 87 us (docs/benchmarks.md, issue 18 session 33). The index math is
# therefore 64-bit, and the JIT does not specialize on the partials' alignment: offline, the JIT's
# specialization then gives 17 loads before the first add (sm_90 SASS, 126 registers), as the AOT cubin.
@triton.jit
def add_four_chunks(acc, field_ptr, p, num_partials, BLOCK: tl.constexpr):
    """acc + the partials at p, p + BLOCK, p + 2 BLOCK, p + 3 BLOCK (0 past num_partials), added in that order."""
    x0 = tl.load(field_ptr + p, mask=p < num_partials, other=0.0)
    x1 = tl.load(field_ptr + p + BLOCK, mask=p + BLOCK < num_partials, other=0.0)
    x2 = tl.load(field_ptr + p + 2 * BLOCK, mask=p + 2 * BLOCK < num_partials, other=0.0)
    x3 = tl.load(field_ptr + p + 3 * BLOCK, mask=p + 3 * BLOCK < num_partials, other=0.0)
    return (((acc + x0) + x1) + x2) + x3


@triton.jit(do_not_specialize=["num_partials", "n", "rows", "cols", "position", "chunks"],
            do_not_specialize_on_alignment=["partials_ptr"])
def finalize_kernel(partials_ptr, num_partials, gl_ptr, words_ptr, k_ptr, exp_avg_sq_ptr, row_sums_ptr,
                    col_sums_ptr, new_ptr, n, rows, cols, chunks, position, beta2, one_minus_beta2, bound_ratio,
                    ROUND_GRAD: tl.constexpr, ROUND_UPDATE: tl.constexpr, CHECK_FINITE: tl.constexpr,
                    KIND: tl.constexpr, CAUTIOUS: tl.constexpr, BOUND_TENSOR: tl.constexpr,
                    BLOCK: tl.constexpr):
    """core::fold_round_sums on the device: the partials added in program order; the verdict.

    CLM, TD-CLM tensor (KIND 1: s) and round 1 of any form. The row and factored forms' round 0 has its
    own kernels (factor_rows_kernel, factor_cols_kernel); row_sums_ptr, col_sums_ptr, new_ptr, rows,
    cols and chunks are no longer read, and stay so that the AOT finalize keeps its C signature
    (LUMINAV_TRITON_FINALIZE_SIG, shared with the CLM step).
    """
    if step_open(words_ptr):
        lanes = tl.arange(0, BLOCK)
        acc_bad = tl.zeros([BLOCK], dtype=tl.float64)
        acc_agree = tl.zeros([BLOCK], dtype=tl.float64)
        acc_g = tl.zeros([BLOCK], dtype=tl.float64)
        acc_u = tl.zeros([BLOCK], dtype=tl.float64)
        acc_x = tl.zeros([BLOCK], dtype=tl.float64)
        count = num_partials.to(tl.int64)  # Note [finalize loads in flight]
        for p0 in range(0, count, 4 * BLOCK):
            p = p0 + lanes.to(tl.int64)
            acc_bad = add_four_chunks(acc_bad, partials_ptr, p, count, BLOCK)
            acc_agree = add_four_chunks(acc_agree, partials_ptr + count, p, count, BLOCK)
            acc_g = add_four_chunks(acc_g, partials_ptr + 2 * count, p, count, BLOCK)
            acc_u = add_four_chunks(acc_u, partials_ptr + 3 * count, p, count, BLOCK)
            acc_x = add_four_chunks(acc_x, partials_ptr + 4 * count, p, count, BLOCK)
        n64 = n.to(tl.float64)
        if ROUND_GRAD:
            if CHECK_FINITE:
                if tl.sum(acc_bad, axis=0) > 0.0:
                    tl.atomic_min(words_ptr + 1, position)
            s = 0.0
            rho = 0.0
            if KIND == 1:  # s <- beta2*s + (1-beta2)*fp32(sum g^2 / N)
                s = beta2 * tl.load(exp_avg_sq_ptr) + one_minus_beta2 * (tl.sum(acc_g, axis=0) / n64).to(tl.float32)
            tl.store(gl_ptr + 0, s)
            tl.store(gl_ptr + 1, 1.0)
            tl.store(gl_ptr + 2, 1.0)
            tl.store(gl_ptr + 3, rho)
        if ROUND_UPDATE:
            c = n64 / n64
            if CAUTIOUS:
                agree = tl.sum(acc_agree, axis=0)
                c = n64 / tl.maximum(agree, 0.001 * n64)
                tl.store(gl_ptr + 1, c.to(tl.float32))
            if BOUND_TENSOR:
                a = c * tl.sqrt(tl.sum(acc_u, axis=0))  # fp64 sqrt is IEEE
                b = tl.sqrt(tl.sum(acc_x, axis=0))
                limit = b * bound_ratio  # double(fp32 ratio) * B
                scale = tl.where((b > 0.0) & (a > limit), (limit / a).to(tl.float32), 1.0)
                tl.store(gl_ptr + 2, scale)


# ---- pass 2 -------------------------------------------------------------------------------------


@triton.jit
def apply_tile(p_ptr, g_ptr, m_ptr, v_ptr, master_ptr, k_ptr, step_ptr, gl_ptr, row_ptr, col_over_rho_ptr, offs,
               start, mask, cols, seed,
               index_offset, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, lam, one_minus_lam, tau,
               bound_ratio, PDTYPE: tl.constexpr, GDTYPE: tl.constexpr, KIND: tl.constexpr, MASTER: tl.constexpr,
               SR: tl.constexpr, HAS_LAM: tl.constexpr, HAS_TAU: tl.constexpr, CAUTIOUS: tl.constexpr,
               BOUND: tl.constexpr, SCALED: tl.constexpr):
    """Steps 1-6 of the elements `offs` (from `start`) of one tensor (cuda apply_tile): moments, update,
    clip, mask, bound, decay, write-back (seed and index_offset as uint64)."""
    g = scaled_gradient(k_ptr, load_f32(g_ptr, offs, mask, GDTYPE), SCALED)
    m_old = tl.load(m_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    second = second_of(v_ptr, gl_ptr, row_ptr, col_over_rho_ptr, offs, start, mask, cols, KIND)
    if MASTER:
        x = tl.load(master_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    else:
        x = load_f32(p_ptr, offs, mask, PDTYPE)
    m, v, u = element_update(k_ptr, g, m_old, second, beta1, one_minus_beta1, beta2, one_minus_beta2, eps,
                             lam, one_minus_lam, tau, KIND == 0, HAS_LAM, HAS_TAU)
    # core::apply_update
    lr = tl.load(k_ptr + 0)
    if CAUTIOUS:
        u = tl.where(u * g > 0.0, u, 0.0) * tl.load(gl_ptr + 1)
    d = lr * u
    if BOUND == 1:
        d = d * tl.load(gl_ptr + 2)
    elif BOUND == 2:
        b = bound_ratio * tl.sqrt_rn(x * x + 1e-4)
        d = tl.minimum(tl.maximum(d, -b), b)
    x = x * tl.load(k_ptr + 1) - d
    tl.store(m_ptr + offs, m, mask=mask, cache_modifier=".cs")
    if KIND == 0:
        tl.store(v_ptr + offs, v, mask=mask, cache_modifier=".cs")
    if MASTER:
        tl.store(master_ptr + offs, x, mask=mask, cache_modifier=".cs")
    store_param(p_ptr, offs, x, mask, seed, tl.load(step_ptr).to(tl.uint64), index_offset, PDTYPE, SR)


@triton.jit(do_not_specialize=["seed", "index_offset"])
def apply_kernel(p_ptr, g_ptr, m_ptr, v_ptr, master_ptr, k_ptr, step_ptr, words_ptr, gl_ptr, new_ptr,
                 n, rows, cols, seed, index_offset, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, lam,
                 one_minus_lam, tau, bound_ratio, PDTYPE: tl.constexpr, GDTYPE: tl.constexpr,
                 KIND: tl.constexpr, MASTER: tl.constexpr, SR: tl.constexpr, HAS_LAM: tl.constexpr,
                 HAS_TAU: tl.constexpr, CAUTIOUS: tl.constexpr, BOUND: tl.constexpr, SCALED: tl.constexpr,
                 BLOCK: tl.constexpr):
    """Pass 2 of one tensor (apply_tile); program 0 also stores TD-CLM's s or new factors into exp_avg_sq."""
    apply_program(tl.program_id(0), tl.num_programs(0), step_open(words_ptr), p_ptr, g_ptr, m_ptr, v_ptr, master_ptr,
                  k_ptr, step_ptr, gl_ptr, new_ptr, n, rows, cols, seed.to(tl.uint64), index_offset.to(tl.uint64), beta1,
                  one_minus_beta1, beta2, one_minus_beta2, eps, lam, one_minus_lam, tau, bound_ratio, PDTYPE, GDTYPE,
                  KIND, MASTER, SR, HAS_LAM, HAS_TAU, CAUTIOUS, BOUND, SCALED, BLOCK)


@triton.jit
def apply_program(pid, programs, open_, p_ptr, g_ptr, m_ptr, v_ptr, master_ptr, k_ptr, step_ptr, gl_ptr, new_ptr, n,
                  rows, cols, seed, index_offset, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, lam,
                  one_minus_lam, tau, bound_ratio, PDTYPE: tl.constexpr, GDTYPE: tl.constexpr, KIND: tl.constexpr,
                  MASTER: tl.constexpr, SR: tl.constexpr, HAS_LAM: tl.constexpr, HAS_TAU: tl.constexpr,
                  CAUTIOUS: tl.constexpr, BOUND: tl.constexpr, SCALED: tl.constexpr, BLOCK: tl.constexpr):
    """Program `pid` of `programs` of apply_kernel, for it and for factored_apply_multi_kernel (seed and
    index_offset as uint64)."""
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) & open_
    if KIND == 1:
        if pid == 0:
            if open_:
                tl.store(v_ptr, tl.load(gl_ptr + 0))
    if KIND >= 2:
        # new_ptr: row[R] (then col[C], col/rho[C]): exp_avg_sq's row (and col), spread over the programs
        if KIND == 3:
            factors = rows + cols
        else:
            factors = rows
        for q0 in range(pid * BLOCK, factors, programs * BLOCK):
            q = q0 + tl.arange(0, BLOCK)
            qm = (q < factors) & open_
            tl.store(v_ptr + q, tl.load(new_ptr + q, mask=qm, other=0.0), mask=qm)
    apply_tile(p_ptr, g_ptr, m_ptr, v_ptr, master_ptr, k_ptr, step_ptr, gl_ptr, new_ptr, new_ptr + rows + cols, offs,
               pid.to(tl.int64) * BLOCK, mask, cols, seed, index_offset, beta1, one_minus_beta1, beta2,
               one_minus_beta2, eps, lam, one_minus_lam, tau, bound_ratio, PDTYPE, GDTYPE, KIND, MASTER, SR, HAS_LAM,
               HAS_TAU, CAUTIOUS, BOUND, SCALED)


# ---- many tensors per launch --------------------------------------------------------------------

# Note [tensor tables]: the multi-tensor kernels take, per launch, a table of TABLE_FIELDS int64 per
# tensor (its first program, N, the addresses of param, exp_avg, exp_avg_sq and master, the rounding
# seed, index offset and position), a program map (int32: the tensor of each program) and a
# gradient table (int64 per tensor: its gradient's address). A program reads its tensor's row and
# gradient address and works on BLOCK elements of it, exactly as the one-tensor kernel's program of
# that index would: the same element math, the same bits. The tensor tables hold what stays put
# for the life of a plan and are uploaded once, when the plan is built; gradients get new
# addresses on every step after zero_grad(set_to_none=True), so their table is apart: the host
# writes it (a few microseconds, pinned and non-blocking) only when an address changed, and the
# launches, their arguments included, stay those of the last step (Note [replayed launches]).
# Until issue 18 session 4 the whole table was rebuilt, converted (torch.tensor of 111 rows of
# Python ints) and uploaded on each such step, twice (one table per block size): in the Llama 98M
# loop on the H200 that was 57% of the step's 4 ms of profiled Python, and each rebuild's new
# device tables moved the small allocations after them, so 23 of 111 gradients had new addresses
# on every step and no step replayed; the eager step's host time was 3.56 ms (GPU 3.77 ms) against
# 1.02 ms (GPU 1.71 ms) with separate gradient tables (docs/benchmarks.md, issue 18 session 4).
TABLE_FIELDS = tl.constexpr(9)  # a constexpr global: compiled kernels may read it


@triton.jit
def _table_pointer(address_ptr, DTYPE: tl.constexpr, ALIGNED: tl.constexpr):
    """The int64 address at `address_ptr` (a table field) as a pointer to fp32 (DTYPE 0) or to int16
    (16-bit data). ALIGNED: every address and N of the batch are multiples of 16 (Note [aligned
    variants] in build_triton_aot.py: the hint that lets the compiler vectorize, as the JIT's
    specialization does)."""
    if DTYPE == 0:
        ptr = tl.load(address_ptr).to(tl.pointer_type(tl.float32))
    else:
        ptr = tl.load(address_ptr).to(tl.pointer_type(tl.int16))
    if ALIGNED:
        ptr = tl.multiple_of(ptr, 16)
    return ptr


@triton.jit
def _table_count(row_ptr, ALIGNED: tl.constexpr):
    """N of a tensor table row (a multiple of 16 when ALIGNED)."""
    n = tl.load(row_ptr + 1)
    if ALIGNED:
        n = tl.multiple_of(n, 16)
    return n


@triton.jit
def finite_check_multi_kernel(table_ptr, grad_table_ptr, program_map_ptr, k_ptr, words_ptr, GDTYPE: tl.constexpr,
                              SCALED: tl.constexpr, ALIGNED: tl.constexpr, BLOCK: tl.constexpr):
    """The finite check of CLM tensors with nothing else to reduce (reduce_kernel's VERDICT): a program
    that finds a non-finite gradient marks the step with its tensor's position (smallest wins)."""
    pid = tl.program_id(0)
    tensor = tl.load(program_map_ptr + pid).to(tl.int64)
    row = table_ptr + tensor * TABLE_FIELDS
    offs = (pid - tl.load(row + 0)) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < _table_count(row, ALIGNED)) & step_open(words_ptr)
    g = scaled_gradient(k_ptr, load_f32(_table_pointer(grad_table_ptr + tensor, GDTYPE, ALIGNED), offs, mask, GDTYPE),
                        SCALED)
    bad = ((g.to(tl.uint32, bitcast=True) & 0x7F800000) == 0x7F800000) & mask
    if tl.sum(bad.to(tl.int32), axis=0) > 0:
        tl.atomic_min(words_ptr + 1, tl.load(row + 8).to(tl.int32))


@triton.jit
def apply_multi_kernel(table_ptr, grad_table_ptr, program_map_ptr, k_ptr, step_ptr, words_ptr, beta1, one_minus_beta1,
                       beta2, one_minus_beta2, eps, lam, one_minus_lam, tau, bound_ratio, PDTYPE: tl.constexpr,
                       GDTYPE: tl.constexpr, MASTER: tl.constexpr, SR: tl.constexpr, HAS_LAM: tl.constexpr,
                       HAS_TAU: tl.constexpr, BOUND: tl.constexpr, SCALED: tl.constexpr, ALIGNED: tl.constexpr,
                       BLOCK: tl.constexpr):
    """Pass 2 of CLM tensors of one dtype pair (apply_tile, per-element second moments; no cautious
    mask nor tensor bound, which need per-tensor globals)."""
    pid = tl.program_id(0)
    tensor = tl.load(program_map_ptr + pid).to(tl.int64)
    row = table_ptr + tensor * TABLE_FIELDS
    offs = (pid - tl.load(row + 0)) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < _table_count(row, ALIGNED)) & step_open(words_ptr)
    m_ptr = _table_pointer(row + 3, 0, ALIGNED)
    v_ptr = _table_pointer(row + 4, 0, ALIGNED)
    apply_tile(_table_pointer(row + 2, PDTYPE, ALIGNED), _table_pointer(grad_table_ptr + tensor, GDTYPE, ALIGNED),
               m_ptr, v_ptr, _table_pointer(row + 5, 0, ALIGNED), k_ptr, step_ptr, v_ptr, v_ptr, v_ptr, offs, 0, mask, 1,
               tl.load(row + 6).to(tl.uint64), tl.load(row + 7).to(tl.uint64), beta1, one_minus_beta1, beta2,
               one_minus_beta2, eps, lam, one_minus_lam, tau, bound_ratio, PDTYPE, GDTYPE, 0, MASTER, SR,
               HAS_LAM, HAS_TAU, False, BOUND, SCALED)


# Note [factored tables]: TD-CLM's factored tensors, many per launch. One at a time, each takes four
# launches (sums, row factors, column factors, apply): 336 of a step's 349 launches in the Llama
# 98M model, where a graph replay of them took 2.1 ms against the nvcc kernels' 0.8 (issue 18,
# session 7). The factored kernels below run the same programs for every tensor of a batch: a
# program map per stage (int32: the tensor of each program), a table of FACTORED_FIELDS int64 per
# tensor (below) uploaded with the plan, and the gradient table of Note [tensor tables]. A
# program's tensor-local index is its index minus its tensor's first program of that stage, and
# the program computes exactly what the one-tensor kernel's program of that index would.
# (constexpr globals: the kernels read them; the plan writes a row with their .value)
FT_SUMS_FIRST, FT_ROWS_FIRST, FT_COLS_FIRST, FT_APPLY_FIRST = (tl.constexpr(i) for i in range(4))  # stages' first
FT_ROWS, FT_COLS, FT_POSITION = (tl.constexpr(i) for i in range(4, 7))  # R, C, the verdict's position
FT_ROW_PART, FT_COL_PART, FT_BLOCK_SUMS, FT_NEW, FT_GL = (tl.constexpr(i) for i in range(7, 12))  # scratch
FT_PARAM, FT_EXP_AVG, FT_EXP_AVG_SQ, FT_MASTER = (tl.constexpr(i) for i in range(12, 16))  # master: param's own
FT_SEED, FT_INDEX_OFFSET, FT_STRIPS, FT_CHUNKS, FT_ROW_BLOCKS, FT_APPLY_PROGRAMS = (tl.constexpr(i)
                                                                                   for i in range(16, 22))
FACTORED_FIELDS = tl.constexpr(22)


@triton.jit
def _factored_program(table_ptr, program_map_ptr, FIRST: tl.constexpr):
    """(the tensor, its table row, the tensor-local program index) of this program of the stage whose
    first programs are in field FIRST."""
    pid = tl.program_id(0)
    tensor = tl.load(program_map_ptr + pid).to(tl.int64)
    row = table_ptr + tensor * FACTORED_FIELDS
    return tensor, row, pid.to(tl.int64) - tl.load(row + FIRST)


@triton.jit
def _f64_field(row, i):
    return tl.load(row + i).to(tl.pointer_type(tl.float64))


@triton.jit
def _f32_field(row, i):
    return tl.load(row + i).to(tl.pointer_type(tl.float32))


@triton.jit
def _cols_field(row, ALIGNED: tl.constexpr):
    cols = tl.load(row + FT_COLS)
    if ALIGNED:
        cols = tl.multiple_of(cols, 16)
    return cols


@triton.jit
def factored_sums_multi_kernel(table_ptr, grad_table_ptr, program_map_ptr, k_ptr, words_ptr, GDTYPE: tl.constexpr,
                               SCALED: tl.constexpr, CHUNK_ROWS: tl.constexpr, LOAD_ROWS: tl.constexpr,
                               BLOCK_C: tl.constexpr, ALIGNED: tl.constexpr):
    """factor_sums_kernel for every tensor of a factored batch (Note [factored tables])."""
    if step_open(words_ptr):
        tensor, row, local = _factored_program(table_ptr, program_map_ptr, FT_SUMS_FIRST)
        g_ptr = _table_pointer(grad_table_ptr + tensor, GDTYPE, ALIGNED)
        factor_sums_program(local, g_ptr, _f64_field(row, FT_ROW_PART), _f64_field(row, FT_COL_PART), k_ptr,
                            words_ptr, tl.load(row + FT_ROWS), _cols_field(row, ALIGNED), tl.load(row + FT_POSITION),
                            1, GDTYPE, SCALED, CHUNK_ROWS, LOAD_ROWS, BLOCK_C)


@triton.jit
def factored_rows_multi_kernel(table_ptr, program_map_ptr, words_ptr, beta2, one_minus_beta2, BLOCK: tl.constexpr,
                               MERGE: tl.constexpr):
    """factor_rows_kernel for every tensor of a factored batch."""
    if step_open(words_ptr):
        _, row, local = _factored_program(table_ptr, program_map_ptr, FT_ROWS_FIRST)
        factor_rows_program(local, _f64_field(row, FT_ROW_PART), _f32_field(row, FT_EXP_AVG_SQ),
                            _f32_field(row, FT_NEW), _f64_field(row, FT_BLOCK_SUMS), tl.load(row + FT_ROWS),
                            tl.load(row + FT_COLS), tl.load(row + FT_STRIPS), beta2, one_minus_beta2, BLOCK, MERGE)


@triton.jit
def factored_cols_multi_kernel(table_ptr, program_map_ptr, words_ptr, beta2, one_minus_beta2, BLOCK: tl.constexpr,
                               MERGE: tl.constexpr):
    """factor_cols_kernel for every tensor of a factored batch."""
    if step_open(words_ptr):
        _, row, local = _factored_program(table_ptr, program_map_ptr, FT_COLS_FIRST)
        cols = tl.load(row + FT_COLS)
        factor_cols_program(local, _f64_field(row, FT_COL_PART), _f64_field(row, FT_BLOCK_SUMS),
                            _f32_field(row, FT_EXP_AVG_SQ), _f32_field(row, FT_NEW), _f32_field(row, FT_GL),
                            tl.load(row + FT_ROWS), cols, cols, tl.load(row + FT_CHUNKS), tl.load(row + FT_ROW_BLOCKS),
                            beta2, one_minus_beta2, BLOCK, MERGE)


@triton.jit
def factored_apply_multi_kernel(table_ptr, grad_table_ptr, program_map_ptr, k_ptr, step_ptr, words_ptr, beta1,
                                one_minus_beta1, beta2, one_minus_beta2, eps, lam, one_minus_lam, tau, bound_ratio,
                                PDTYPE: tl.constexpr, GDTYPE: tl.constexpr, MASTER: tl.constexpr, SR: tl.constexpr,
                                HAS_LAM: tl.constexpr, HAS_TAU: tl.constexpr, BOUND: tl.constexpr,
                                SCALED: tl.constexpr, ALIGNED: tl.constexpr, BLOCK: tl.constexpr):
    """apply_kernel (KIND FACTORED, no cautious mask nor tensor bound) for every tensor of a factored batch."""
    tensor, row, local = _factored_program(table_ptr, program_map_ptr, FT_APPLY_FIRST)
    rows, cols = tl.load(row + FT_ROWS), _cols_field(row, ALIGNED)
    p_ptr = _table_pointer(row + FT_PARAM, PDTYPE, ALIGNED)
    g_ptr = _table_pointer(grad_table_ptr + tensor, GDTYPE, ALIGNED)
    m_ptr = _table_pointer(row + FT_EXP_AVG, 0, ALIGNED)
    master_ptr = _table_pointer(row + FT_MASTER, 0, ALIGNED)
    seed, index_offset = tl.load(row + FT_SEED).to(tl.uint64), tl.load(row + FT_INDEX_OFFSET).to(tl.uint64)
    apply_program(local, tl.load(row + FT_APPLY_PROGRAMS), step_open(words_ptr), p_ptr, g_ptr, m_ptr,
                  _f32_field(row, FT_EXP_AVG_SQ), master_ptr, k_ptr, step_ptr, _f32_field(row, FT_GL),
                  _f32_field(row, FT_NEW), rows * cols, rows, cols, seed, index_offset, beta1, one_minus_beta1, beta2,
                  one_minus_beta2, eps, lam, one_minus_lam, tau, bound_ratio, PDTYPE, GDTYPE, 3, MASTER, SR, HAS_LAM,
                  HAS_TAU, False, BOUND, SCALED, BLOCK)


# ---- the verdict ---------------------------------------------------------------------------------


@triton.jit
def commit_kernel(status_ptr, words_ptr, found_inf_ptr, FOUND_INF: tl.constexpr, SKIP_NONFINITE: tl.constexpr):
    """cuda luminav_commit_step's decision: the verdict, the failure word and the counts."""
    failed = tl.load(status_ptr + 1)
    blocked = tl.load(words_ptr + 0)
    first_bad = tl.load(words_ptr + 1)
    if failed != 0:
        tl.store(status_ptr + 3, tl.load(status_ptr + 3) + 1)
        tl.store(status_ptr + 0, failed)
    elif blocked != 0:
        tl.store(status_ptr + 2, tl.load(status_ptr + 2) + 1)
        tl.store(status_ptr + 0, -1)  # LUMINAV_VERDICT_FOUND_INF
    elif first_bad != 0x7FFFFFFF:
        verdict = first_bad + 1
        if FOUND_INF:
            tl.store(found_inf_ptr, 1.0)
        if SKIP_NONFINITE:
            tl.store(status_ptr + 2, tl.load(status_ptr + 2) + 1)
        else:
            tl.store(status_ptr + 1, verdict)
        tl.store(status_ptr + 0, verdict)
    else:
        tl.store(status_ptr + 0, 0)


@triton.jit
def advance_kernel(status_ptr, counter_ptr):
    """An applied step advances the group's fp32 step counter."""
    if tl.load(status_ptr + 0) == 0:
        tl.store(counter_ptr, tl.load(counter_ptr) + 1.0)
