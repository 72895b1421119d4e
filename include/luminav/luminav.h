/* luminav.h: the full C API of the LuminaV optimizer (spec/luminav-update.md).
 *
 * Conventions: every function returns an int status (LUMINAV_STATUS_OK = 0);
 * luminav_last_error_message() returns the message of the calling thread's
 * last failure (kept until the next failure). A failed call writes nothing
 * (no parameter, master, moment or scalar); the library never exits, aborts
 * or lets a C++ exception out. Buffers are host pointers for the CPU backends
 * and device pointers for GPU backends (luminav_options.device_type).
 *
 * Environment: LUMINAV_FORCE_BACKEND=name picks the backend of calls whose
 * options do not name one; LUMINAV_NUM_THREADS sets the default thread count
 * of the CPU backends; LUMINAV_LOG=1 prints to stderr (once) why "auto" fell
 * back from simd to scalar.
 */
#ifndef LUMINAV_LUMINAV_H
#define LUMINAV_LUMINAV_H

#include <stddef.h>
#include <stdint.h>

#include "../luminav_triton_standalone.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LUMINAV_VERSION_MAJOR 0
#define LUMINAV_VERSION_MINOR 1
#define LUMINAV_VERSION_PATCH 0
const char* luminav_version(void);

enum luminav_status {
  LUMINAV_STATUS_OK = 0,
  LUMINAV_STATUS_INVALID_ARGUMENT = 1,
  LUMINAV_STATUS_NONFINITE_GRAD = 2,
  LUMINAV_STATUS_BACKEND_UNAVAILABLE = 3,
  LUMINAV_STATUS_DRIVER_ERROR = 4,
  LUMINAV_STATUS_OUT_OF_MEMORY = 5,
  LUMINAV_STATUS_INTERNAL = 6
};
const char* luminav_status_name(int status);
/* The calling thread's last error message ("" when none). The pointer stays
 * valid until that thread's next failing call. */
const char* luminav_last_error_message(void);

enum luminav_dtype { LUMINAV_DTYPE_F32 = 0, LUMINAV_DTYPE_BF16 = 1, LUMINAV_DTYPE_F16 = 2 };
enum luminav_buffer_mode { LUMINAV_MODE_TDCLM = 1, LUMINAV_MODE_CLM = 2 };
/* LUMINAV_BOUND_RMS is an extension beyond the spec (version 2), Adafactor's
 * update clipping (Shazeer and Stern 2018) on LuminaV's update: with
 * A = ||d||_2 as for the tensor bound and B = lr * sqrt(N), d <- d * ratio*B/A
 * when B > 0 and A > ratio*B, i.e. u <- u / max(1, RMS(u) / ratio). */
enum luminav_bound_mode {
  LUMINAV_BOUND_NONE = 0,
  LUMINAV_BOUND_TENSOR = 1,
  LUMINAV_BOUND_ELEMENT = 2,
  LUMINAV_BOUND_RMS = 3
};
enum luminav_device_type { LUMINAV_DEVICE_CPU = 0, LUMINAV_DEVICE_CUDA = 1, LUMINAV_DEVICE_ROCM = 2 };
/* TD-CLM's second moment (spec "TD-CLM second moment"), per tensor: over the
 * R rows and C = N / R columns of the tensor (factored: exp_avg_sq holds the
 * row factor then the column factor, R + C floats, R when C == 1), one
 * number per row (row: R floats) or version 1's one scalar (tensor: 1). */
enum luminav_td_factor { LUMINAV_TD_FACTORED = 0, LUMINAV_TD_ROW = 1, LUMINAV_TD_TENSOR = 2 };

/* Hyperparameters of one step; betas in double as torch gives them. */
typedef struct luminav_hyperparams {
  double lr, beta1, beta2, eps, weight_decay;
  double tau;          /* soft clip; 0 = off */
  double lam;          /* gradient blend in [0,1] */
  double bound_ratio;  /* > 0 when bound_mode != 0 */
  int buffer_mode;     /* LUMINAV_MODE_CLM or LUMINAV_MODE_TDCLM */
  int cautious;        /* 0 or 1 (as are check_finite and stochastic_rounding) */
  int bound_mode;      /* LUMINAV_BOUND_* */
  int check_finite;    /* 1: refuse non-finite gradients (NONFINITE_GRAD) */
  int stochastic_rounding; /* 1: bf16/f16 parameters written by SR, else RNE */
  uint64_t step;       /* t >= 1 */
  double grad_scale;   /* sigma > 0: every gradient is read as g * fp32(1/sigma)
                          (loss scaling, spec "Gradient scale"); 1 = none */
} luminav_hyperparams;
/* Invalid values give INVALID_ARGUMENT with a message naming the parameter
 * and its value ("lr must be >= 0 and finite (got -0.1)"): lr < 0, eps <= 0,
 * betas outside [0,1), lam outside [0,1], tau < 0, an unknown buffer_mode or
 * bound_mode, bound_ratio <= 0 with a bound, step 0, grad_scale <= 0, NaN or
 * Inf anywhere. A struct filled by hand must set grad_scale (0 is refused). */

/* Fills `hp` with AdamW's defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8,
 * weight decay 0.01, CLM, check_finite 1, stochastic_rounding 1, step 1,
 * grad_scale 1). */
void luminav_hyperparams_init(luminav_hyperparams* hp);

/* One tensor (or one shard of a logical tensor). Every buffer the mode needs
 * is non-NULL and aligned to its element size unless num_elements is 0; no
 * two buffers overlap, within a tensor or across the tensors of one call. */
typedef struct luminav_tensor {
  void* param;            /* N elements of param_dtype */
  const void* grad;       /* N elements of grad_dtype */
  float* exp_avg;         /* N */
  float* exp_avg_sq;      /* luminav_exp_avg_sq_length(N, rows, mode, td_factor)
                             floats: CLM N; TD-CLM factored rows + C (rows
                             when C == 1), row: rows, tensor: 1 (s) */
  float* master;          /* optional fp32 master weights (N) or NULL */
  size_t num_elements;    /* N of this buffer */
  uint64_t index_offset;  /* index of element 0 in the logical tensor (shards) */
  uint64_t seed;          /* per-tensor stochastic rounding seed */
  int param_dtype;        /* LUMINAV_DTYPE_* */
  int grad_dtype;         /* LUMINAV_DTYPE_* */
  uint64_t rows;          /* TD-CLM factored/row: R of this buffer, whole rows
                             (C = num_elements / rows); ignored otherwise */
  int td_factor;          /* LUMINAV_TD_* (TD-CLM only; 0 = factored) */
} luminav_tensor;
/* With TD-CLM factored or row, rows == 0, rows not dividing num_elements and
 * an unknown td_factor are INVALID_ARGUMENT naming the value (so a zeroed
 * descriptor never writes past a one-float exp_avg_sq). The tensor is the
 * row-major R x C matrix of spec "TD-CLM second moment" (R = the first
 * dimension; a 1-D tensor has C = 1, which is exactly CLM's per-element v). */

/* Floats exp_avg_sq holds for N elements in `rows` rows (0 when the
 * arguments are invalid): CLM N; TD-CLM factored rows + C (rows when C == 1),
 * row: rows, tensor: 1. For a shard: its own rows plus the whole C. */
size_t luminav_exp_avg_sq_length(uint64_t num_elements, uint64_t rows, int buffer_mode,
                                 int td_factor);

/* Where and how to run. NULL options mean: backend "auto", host buffers,
 * library-owned scratch. "auto" picks by device_type: host memory runs on
 * simd when it can, else scalar (host tensors are never copied to a GPU; an
 * accelerator reading host memory in place may take tensors of >= 16384
 * elements); CUDA memory runs on cuda, ROCm memory on hip. Naming a backend
 * that is unknown is INVALID_ARGUMENT (the message lists the known ones); one
 * not compiled in or unable to run here is BACKEND_UNAVAILABLE (with the
 * reason); one whose memory differs from device_type is INVALID_ARGUMENT. */
typedef struct luminav_options {
  const char* backend;    /* NULL/"auto", "scalar", "simd", "cuda", ... */
  int device_type;        /* LUMINAV_DEVICE_* */
  int device_index;
  void* stream;           /* CUstream / hipStream_t, NULL = default */
  void* scratch;          /* optional caller workspace, or NULL */
  size_t scratch_bytes;   /* its size: >= luminav_scratch_bytes(N), summed over
                             the tensors of a multi-tensor call; 8-byte aligned */
} luminav_options;

/* Workspace a step over N elements needs: one 64-byte partial per tile of
 * 65536 elements, at least one tile: max(1, ceil(N/65536)) * 64. */
size_t luminav_scratch_bytes(size_t num_elements);

/* Read-only partial sums of pass 1. They add element-wise across shards
 * (all-reduce with SUM) to give the logical tensor's values. */
typedef struct luminav_partials {
  uint64_t nonfinite_count;  /* gradient elements that are NaN or +-Inf */
  uint64_t agree_count;      /* K: elements with u_i * g_i > 0 */
  double grad_sq_sum;        /* sum g_i^2 */
  double update_sq_sum;      /* sum (lr * u_i * phi_i)^2, before the cautious scale */
  double weight_sq_sum;      /* sum x_i^2 (x before the step); read by the tensor bound only, and may be 0 without it */
  double row_factor_sum;     /* TD-CLM factored: sum over this shard's rows of the
                                updated row factor row_r (rho = sum / R) */
  uint64_t row_count;        /* TD-CLM factored/row: rows of this shard (sums to R) */
} luminav_partials;

/* TD-CLM factored/row, caller-owned arrays of pass 1's row and column sums
 * of g^2 (round 0 writes them; later rounds and the apply pass read them):
 *   row_sq: `rows` doubles, sum over each row of this shard: local, never
 *           all-reduced;
 *   col_sq: C doubles, this shard's sum over each column: all-reduce (SUM)
 *           over the shards after round 0, like the partials. Needed by
 *           factored with C > 1 only (may be NULL otherwise).
 * Neither is needed (NULL) for CLM, td_factor tensor, or C == 1. */
typedef struct luminav_factor_sums {
  double* row_sq;
  double* col_sq;
} luminav_factor_sums;

/* Values every element of pass 2 needs, derived from the global partials. */
typedef struct luminav_globals {
  float second_moment;   /* TD-CLM tensor: s after this step; unused otherwise */
  float cautious_scale;  /* N / max(K, 0.001 N); 1 without cautious */
  float bound_scale;     /* tensor bound: ratio*B/A when it binds, else 1 */
  float row_factor_mean; /* TD-CLM factored: rho = mean of the updated row factor */
  uint64_t logical_rows; /* TD-CLM factored/row: R of the logical tensor
                            (the summed row_count; b_c divides by it) */
} luminav_globals;

/* One whole step of one unsharded tensor: pass 1, globals, pass 2.
 * N = 0 succeeds and touches nothing. */
int luminav_step(const luminav_hyperparams* hp, const luminav_tensor* tensor,
                 const luminav_options* options);

/* Entry points for 16-bit parameters with gradients of the same dtype
 * (bf16: uint16_t bit patterns of bfloat16; f16: IEEE binary16). `master`
 * (fp32, N) may be NULL; `seed` keys stochastic rounding; the rest as in
 * luminav_step (exp_avg_sq: N floats in CLM, the scalar s in TD-CLM: these
 * take no rows, so their TD-CLM is td_factor tensor). */
int luminav_step_bf16(const luminav_hyperparams* hp, uint16_t* param, const uint16_t* grad,
                      float* exp_avg, float* exp_avg_sq, float* master, size_t num_elements,
                      uint64_t seed, const luminav_options* options);
int luminav_step_f16(const luminav_hyperparams* hp, uint16_t* param, const uint16_t* grad,
                     float* exp_avg, float* exp_avg_sq, float* master, size_t num_elements,
                     uint64_t seed, const luminav_options* options);

/* One step of `count` tensors sharing the hyperparameters, in one call. The
 * finite check covers every tensor before any is written: a non-finite
 * gradient anywhere leaves all of them untouched (the message names the
 * tensor's position). */
int luminav_step_multi(const luminav_hyperparams* hp, const luminav_tensor* tensors,
                       size_t count, const luminav_options* options);

/* --- The pass-1 / pass-2 split, for sharded tensors -----------------------
 * rounds = luminav_reduction_rounds(hp) is 0, 1 or 2. For each round r:
 *   luminav_reduce(hp, shard, r, globals_so_far, &partial) on every shard,
 *   all-reduce the partials (SUM), then
 *   luminav_finalize(hp, &sum, N_logical, r, s_old, &globals).
 * Round 0 holds the finite check and sum g^2 (and, in CLM, K and the norms;
 * in TD-CLM factored/row the row and column sums, row_factor_sum and
 * row_count); round 1 (TD-CLM with cautious or a tensor bound) holds K and
 * the norms, which need the second moment from round 0. Then
 * luminav_apply(hp, shard, &globals) on every shard. With 0 rounds call
 * luminav_finalize with a zero partials struct and round 0 to obtain the
 * globals.
 *
 * TD-CLM factored and row also need the row and column sums of g^2: they go
 * through luminav_reduce_with_factors / luminav_apply_with_factors (the
 * plain luminav_reduce / luminav_apply are these with factor_sums = NULL,
 * and refuse a factored or row tensor with C > 1).
 * Sharding (FSDP2 Shard(0)) is by whole rows: a shard's index_offset must be
 * a multiple of C (a shard boundary inside a row is INVALID_ARGUMENT); its
 * descriptor gives its own rows; its exp_avg_sq holds its rows' factor then
 * the whole column factor (replicated: every shard updates its copy from
 * the same all-reduced sums, so the copies stay bit-identical). Per step:
 *   round 0: luminav_reduce_with_factors(..., &sums, &partial) per shard;
 *            all-reduce the partials and sums.col_sq (SUM); finalize.
 *   round 1 (cautious or tensor bound): the same call with the same sums.
 *   luminav_apply_with_factors(hp, shard, &globals, &sums, options).
 * A shard with no elements has no rows: it contributes zeros (its col_sq
 * zero-filled by the caller) and its apply does nothing. */

/* Returns the rounds, or -status (negative) when hp is invalid. Round 0 of
 * luminav_finalize fails with NONFINITE_GRAD when check_finite is on and the
 * summed nonfinite_count is not 0. luminav_reduce writes nothing but *out
 * (and, round 0 with factors, the factor sums). */
int luminav_reduction_rounds(const luminav_hyperparams* hp);
int luminav_reduce(const luminav_hyperparams* hp, const luminav_tensor* shard, int round,
                   const luminav_globals* globals, luminav_partials* out,
                   const luminav_options* options);
int luminav_finalize(const luminav_hyperparams* hp, const luminav_partials* global_sum,
                     uint64_t logical_num_elements, int round, float s_old,
                     luminav_globals* inout);
int luminav_apply(const luminav_hyperparams* hp, const luminav_tensor* shard,
                  const luminav_globals* globals, const luminav_options* options);
/* The same with the TD-CLM factored/row sums (factor_sums may be NULL when
 * the shard needs none; see luminav_factor_sums). */
int luminav_reduce_with_factors(const luminav_hyperparams* hp, const luminav_tensor* shard,
                                int round, const luminav_globals* globals,
                                const luminav_factor_sums* factor_sums, luminav_partials* out,
                                const luminav_options* options);
int luminav_apply_with_factors(const luminav_hyperparams* hp, const luminav_tensor* shard,
                               const luminav_globals* globals,
                               const luminav_factor_sums* factor_sums,
                               const luminav_options* options);

/* --- Threads ------------------------------------------------------------------
 * Threads of the CPU backends. 0 restores the default: LUMINAV_NUM_THREADS
 * when set, else the number of cores. Returns the previous setting (0 when it
 * was the default); a negative argument changes nothing and returns
 * -LUMINAV_STATUS_INVALID_ARGUMENT. get returns the count in effect (>= 1). */
int luminav_set_num_threads(int num_threads);
int luminav_get_num_threads(void);

/* --- Introspection --------------------------------------------------------- */
/* Backends compiled in and whether they can run here (and, if not, why, in
 * one line). Availability is probed once, on first use. */
int luminav_backend_count(void);
const char* luminav_backend_name(int index);
int luminav_backend_available(int index);
const char* luminav_backend_unavailable_reason(int index); /* "" when available */
/* The devices a backend sees, one line each ("name (type, ...): why it is or
 * is not used"; the vulkan backend lists every Vulkan device, then one line
 * "asynchronous step ...: ...; synchronous fallback: ..." naming what
 * luminav_step_groups_enqueue runs synchronously there); "" for the CPU
 * backends. */
const char* luminav_backend_devices(int index);
/* Backend (and for simd the target, e.g. "simd:AVX3") that ran this thread's
 * last successful step. */
const char* luminav_last_backend(void);
/* Comma-separated CPU features detected at run time, e.g. "sse4,avx2,avx512f". */
const char* luminav_cpu_features(void);

#ifdef __cplusplus
}
#endif

/* The whole optimizer step in one call, and its asynchronous device form. */
#include "luminav_groups.h"

#endif /* LUMINAV_LUMINAV_H */
