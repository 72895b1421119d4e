// CPU features detected at run time (cpuid/xgetbv on x86-64, getauxval on
// AArch64), for introspection and luminav_triton_get_arch.
#pragma once

#include <string>

namespace luminav::dispatch {

// Comma-separated, e.g. "sse2,sse4.2,avx,avx2,fma,f16c,avx512f,...". Vector
// extensions are listed only when the OS also saves their registers.
const std::string& cpu_features();

// Architecture and its best vector level: "x86_64-avx512" (F+BW+DQ+VL),
// "x86_64-avx2" (AVX2+FMA), "x86_64-sse4", "x86_64", "aarch64-sve",
// "aarch64-neon", or the compiler's architecture name elsewhere.
const std::string& cpu_arch();

}  // namespace luminav::dispatch
