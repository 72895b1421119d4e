// A portable cpuid/getauxval probe, run once.
#include "optim/dispatch/cpu_features.h"

#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace luminav::dispatch {
namespace {

struct Probe {
  std::vector<const char*> features;
  std::string arch;
};

bool has(const std::vector<const char*>& list, std::string_view name) {
  for (const char* f : list) {
    if (name == f) return true;
  }
  return false;
}

#if defined(__x86_64__) || defined(__i386__)
unsigned long long read_xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

Probe probe() {
  Probe p;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) {
    p.arch = "x86_64";
    return p;
  }
  auto bit = [](unsigned reg, int n) { return ((reg >> n) & 1u) != 0; };
  const bool osxsave = bit(c, 27);
  const unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM halves
  if (bit(d, 26)) p.features.push_back("sse2");
  if (bit(c, 0)) p.features.push_back("sse3");
  if (bit(c, 9)) p.features.push_back("ssse3");
  if (bit(c, 19)) p.features.push_back("sse4.1");
  if (bit(c, 20)) p.features.push_back("sse4.2");
  if (os_avx && bit(c, 28)) p.features.push_back("avx");
  if (os_avx && bit(c, 12)) p.features.push_back("fma");
  if (os_avx && bit(c, 29)) p.features.push_back("f16c");
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 7) {
    unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0;
    __cpuid_count(7, 0, a7, b7, c7, d7);
    if (os_avx && bit(b7, 5)) p.features.push_back("avx2");
    if (bit(b7, 8)) p.features.push_back("bmi2");
    if (os_avx512) {
      if (bit(b7, 16)) p.features.push_back("avx512f");
      if (bit(b7, 17)) p.features.push_back("avx512dq");
      if (bit(b7, 30)) p.features.push_back("avx512bw");
      if (bit(b7, 31)) p.features.push_back("avx512vl");
      if (bit(c7, 1)) p.features.push_back("avx512vbmi");
      if (bit(c7, 11)) p.features.push_back("avx512vnni");
      if (bit(d7, 23)) p.features.push_back("avx512fp16");
      unsigned a71 = 0, b71 = 0, c71 = 0, d71 = 0;
      __cpuid_count(7, 1, a71, b71, c71, d71);
      if (bit(a71, 5)) p.features.push_back("avx512bf16");
    }
  }
  const auto& f = p.features;
  if (has(f, "avx512f") && has(f, "avx512bw") && has(f, "avx512dq") && has(f, "avx512vl")) {
    p.arch = "x86_64-avx512";
  } else if (has(f, "avx2") && has(f, "fma")) {
    p.arch = "x86_64-avx2";
  } else if (has(f, "sse4.2")) {
    p.arch = "x86_64-sse4";
  } else {
    p.arch = "x86_64";
  }
  return p;
}
#elif defined(__aarch64__) && defined(__linux__)
Probe probe() {
  Probe p;
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  if (hwcap & (1ul << 1)) p.features.push_back("neon");
  if (hwcap & (1ul << 10)) p.features.push_back("fp16");
  if (hwcap & (1ul << 22)) p.features.push_back("sve");
  if (hwcap2 & (1ul << 1)) p.features.push_back("sve2");
  if (hwcap2 & (1ul << 14)) p.features.push_back("bf16");
  p.arch = has(p.features, "sve") ? "aarch64-sve" : "aarch64-neon";
  return p;
}
#else
Probe probe() {
  Probe p;
#if defined(__aarch64__)
  p.arch = "aarch64";
#elif defined(__riscv)
  p.arch = "riscv64";
#elif defined(__powerpc64__)
  p.arch = "ppc64";
#else
  p.arch = "unknown";
#endif
  return p;
}
#endif

const Probe& probed() {
  static const Probe result = probe();
  return result;
}

}  // namespace

const std::string& cpu_features() {
  static const std::string joined = [] {
    std::string s;
    for (const char* f : probed().features) {
      if (!s.empty()) s += ",";
      s += f;
    }
    return s;
  }();
  return joined;
}

const std::string& cpu_arch() { return probed().arch; }

}  // namespace luminav::dispatch
