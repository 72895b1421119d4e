/* luminav_triton_standalone.h: the standalone C API of seed 000, for native
 * training engines that drive LuminaV without a Python interpreter.
 *
 * Names, argument order and types are exactly the seed's. Rules:
 *  - `param` is the fp32 parameter (N elements). `master_param` may be NULL:
 *    then `param` itself is the fp32 working weight. When it is given, it is
 *    the fp32 master copy (N elements) and `param` receives the same values.
 *  - `grad` and `exp_avg` have N elements. In CLM (buffer_mode = 2)
 *    `exp_avg_sq` has N elements; in TD-CLM (buffer_mode = 1) it points to the
 *    single per-tensor scalar s.
 *  - `scratch` may be NULL (the engine then uses its own workspace) or point to
 *    at least luminav_scratch_bytes(num_elements) bytes (see luminav/luminav.h),
 *    suitably aligned for double.
 *  - The betas are float here; the bias corrections 1 - beta^t are computed in
 *    double from these float values (spec/luminav-update.md).
 *  - `step` is t >= 1 (the caller increments it before the call).
 *  - Returns 0 on success, else a LUMINAV_STATUS_* code from luminav/luminav.h;
 *    luminav_last_error_message() gives the message of the calling thread's
 *    last failure. On failure nothing is written. The finite check is on
 *    (a NaN/Inf gradient gives LUMINAV_STATUS_NONFINITE_GRAD).
 *  - Where a step runs (chosen per call by the memory `param` lives in):
 *     * When the CUDA backend can run here (a driver, a device, kernels for
 *       it), a `param` in CUDA device memory (cuMemAlloc/cudaMalloc, torch
 *       CUDA tensors) or managed memory runs on that GPU, on the device that
 *       owns `param`, on the legacy default stream (the call returns once the
 *       step's reductions are done; the last kernels may still run, ordered
 *       before later default-stream work). A NULL `scratch` then means the
 *       engine's own device workspace; a given one must be device memory.
 *     * Any other `param` (malloc'ed or pinned host memory) runs on the best
 *       CPU backend (simd, else scalar), as on a machine without a driver.
 *     * All non-NULL buffers of one call must be on the same side as `param`
 *       (and the same device): a mix of host and device pointers returns
 *       LUMINAV_STATUS_INVALID_ARGUMENT, naming the buffer, and writes nothing.
 *       Without a usable driver the memory cannot be asked: every pointer
 *       must then be host memory.
 *     * LUMINAV_FORCE_BACKEND=name (not "auto"), read at creation, wins: that
 *       backend runs every step and every pointer is its memory (device
 *       pointers for "cuda"/"hip", host pointers for "scalar"/"simd").
 *  - get_platform/get_arch say what device pointers run on when the engine
 *    has a GPU ("cuda" and e.g. "sm_90"), else the CPU backend ("cpu" and
 *    e.g. "x86_64-avx512" / "x86_64-avx2" / "aarch64-neon"); with
 *    LUMINAV_FORCE_BACKEND, that backend's platform ("cpu", "cuda", "rocm",
 *    "vulkan") and architecture. A NULL engine gives "".
 *  - create returns NULL, with the message set, when a forced backend cannot
 *    run; without one it always succeeds (the CPU backends always can).
 */
#ifndef LUMINAV_TRITON_STANDALONE_H
#define LUMINAV_TRITON_STANDALONE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct LuminaVTritonEngine LuminaVTritonEngine;

LuminaVTritonEngine* luminav_triton_engine_create(void);
void luminav_triton_engine_destroy(LuminaVTritonEngine* engine);
const char* luminav_triton_get_platform(const LuminaVTritonEngine* engine);
const char* luminav_triton_get_arch(const LuminaVTritonEngine* engine);

int luminav_triton_step_f32(
    LuminaVTritonEngine* engine,
    float* param,
    const float* grad,
    float* exp_avg,
    float* exp_avg_sq,
    float* master_param,
    float* scratch,
    size_t num_elements,
    float lr,
    float beta1,
    float beta2,
    float eps,
    float weight_decay,
    float tau,
    float lam,
    int buffer_mode,
    int cautious,
    int bound_mode,
    float bound_ratio,
    uint64_t step,
    uint32_t seed
);

#ifdef __cplusplus
}
#endif

#endif /* LUMINAV_TRITON_STANDALONE_H */
