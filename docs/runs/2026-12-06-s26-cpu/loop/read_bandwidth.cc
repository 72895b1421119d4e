#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
#include <immintrin.h>
// max |g| bits over [lo,hi): variants
static int32_t one(const float* g, size_t lo, size_t hi, size_t pf) {
  __m256i m = _mm256_setzero_si256();
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
  for (size_t i = lo; i + 8 <= hi; i += 8) {
    if (pf && i + pf < hi && (i & 15) == 0) _mm_prefetch((const char*)(g + i + pf), _MM_HINT_T0);
    __m256i x = _mm256_and_si256(_mm256_loadu_si256((const __m256i*)(g + i)), absmask);
    m = _mm256_max_epi32(m, x);
  }
  alignas(32) int32_t l[8]; _mm256_store_si256((__m256i*)l, m);
  return *std::max_element(l, l + 8);
}
static int32_t multi(const float* g, size_t lo, size_t hi, int s) {
  // s interleaved sub-ranges walked together
  size_t n = (hi - lo) / s / 8 * 8;
  __m256i m = _mm256_setzero_si256();
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
  for (size_t i = 0; i < n; i += 8)
    for (int q = 0; q < s; ++q)
      m = _mm256_max_epi32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i*)(g + lo + q * n + i)), absmask));
  alignas(32) int32_t l[8]; _mm256_store_si256((__m256i*)l, m);
  return *std::max_element(l, l + 8);
}
int main() {
  size_t n = 7u << 22;  // 29.4M floats
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = (i % 1000) * 0.001f;
  auto run = [&](const char* name, auto fn) {
    std::vector<double> t;
    for (int r = 0; r < 15; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      int32_t res[2];
      std::thread a([&] { res[0] = fn(0, n / 2); });
      std::thread b([&] { res[1] = fn(n / 2, n); });
      a.join(); b.join();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (res[0] < 0) std::puts("x");
    }
    std::sort(t.begin(), t.end());
    std::printf("%-22s %.2f ms  %.1f GB/s\n", name, t[7], n * 4 / t[7] / 1e6);
  };
  run("one stream", [&](size_t lo, size_t hi) { return one(g.data(), lo, hi, 0); });
  run("prefetch 1024", [&](size_t lo, size_t hi) { return one(g.data(), lo, hi, 1024); });
  run("prefetch 4096", [&](size_t lo, size_t hi) { return one(g.data(), lo, hi, 4096); });
  run("prefetch 16384", [&](size_t lo, size_t hi) { return one(g.data(), lo, hi, 16384); });
  run("2 streams", [&](size_t lo, size_t hi) { return multi(g.data(), lo, hi, 2); });
  run("4 streams", [&](size_t lo, size_t hi) { return multi(g.data(), lo, hi, 4); });
  run("8 streams", [&](size_t lo, size_t hi) { return multi(g.data(), lo, hi, 8); });
  run("one stream again", [&](size_t lo, size_t hi) { return one(g.data(), lo, hi, 0); });
}
