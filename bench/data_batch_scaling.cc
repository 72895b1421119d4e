// Per-stage throughput of the batch stages over a dumped corpus, per thread
// count (CPU and wall time), for scaling runs on machines without Python:
//   data_batch_scaling BYTES_FILE OFFSETS_FILE REPEATS THREADS...
//   data_batch_scaling BYTES_FILE OFFSETS_FILE checksum
// (bench/data_batch_bench.py --dump PREFIX writes PREFIX.bytes / PREFIX.offsets).
// The checksum mode prints XXH3-64 digests of every output of the three
// stages (cleaned bytes and statuses; every quality metric's bits, the keep
// flags and failing checks of the cleaned batch, and the metrics of the
// uncleaned batch; masked bytes and counts),
// so that an optimization can be shown to change no result bit.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "luminamoon/data_threads.h"
#include "luminamoon/pii_masker.h"
#include "luminamoon/quality_filter.h"
#include "luminamoon/text_cleaner.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

using namespace luminamoon;

namespace {
template <class T>
std::vector<T> load(const char* path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  const size_t n = static_cast<size_t>(f.tellg());
  f.seekg(0);
  std::vector<T> v(n / sizeof(T));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n));
  return v;
}
double now(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 && !(argc == 4 && std::string(argv[3]) == "checksum")) {
    std::fprintf(stderr, "usage: %s BYTES OFFSETS REPEATS THREADS...\n", argv[0]);
    return 2;
  }
  const auto bytes = load<uint8_t>(argv[1]);
  const auto offsets = load<int64_t>(argv[2]);
  const int repeats = std::atoi(argv[3]);
  const TextBatchView batch{bytes.data(), offsets.data(), offsets.size() - 1};
  const TextCleaner cleaner;
  const QualityFilter quality;
  const PiiMasker masker;
  if (std::string(argv[3]) == "checksum") {
    auto digest = [](const void* p, size_t n) { return static_cast<unsigned long long>(XXH3_64bits(p, n)); };
    const CleanResult c = cleaner.clean(batch);
    const QualityResult q = quality.evaluate(c.texts.view());
    const PiiResult p = masker.mask(c.texts.view());
    const QualityResult raw = quality.evaluate(batch);  // uncleaned: control bytes, invalid UTF-8
    std::printf("clean   bytes %016llx offsets %016llx status %016llx\n", digest(c.texts.data.data(), c.texts.data.size()),
                digest(c.texts.offsets.data(), c.texts.offsets.size() * 8), digest(c.status.data(), c.status.size()));
    std::printf("quality metrics %016llx keep %016llx failed %016llx\n", digest(q.metrics.data(), q.metrics.size() * 8),
                digest(q.keep.data(), q.keep.size()), digest(q.failed_check.data(), q.failed_check.size() * 2));
    for (size_t k = 0; k < kQualityMetricCount; ++k)
      std::printf("  %-22s %016llx\n", quality_metric_name(static_cast<QualityMetric>(k)),
                  digest(q.metrics.data() + k * q.size, q.size * 8));
    std::printf("quality of the uncleaned batch: metrics %016llx\n", digest(raw.metrics.data(), raw.metrics.size() * 8));
    std::printf("pii     bytes %016llx offsets %016llx counts %016llx\n", digest(p.texts.data.data(), p.texts.data.size()),
                digest(p.texts.offsets.data(), p.texts.offsets.size() * 8), digest(p.counts.data(), sizeof p.counts));
    return 0;
  }
  std::printf("| stage | threads | MB/s wall (median) | MB/s per CPU-second (median) |\n| --- | --- | --- | --- |\n");
  for (int a = 4; a < argc; ++a) {
    const int threads = std::atoi(argv[a]);
    set_data_num_threads(threads);
    for (const char* stage : {"clean", "quality", "pii", "clean+quality+pii"}) {
      std::vector<double> wall, cpu;
      for (int r = 0; r < repeats; ++r) {
        const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        const std::string s = stage;
        if (s == "clean") cleaner.clean(batch);
        if (s == "quality") quality.evaluate(batch);
        if (s == "pii") masker.mask(batch);
        if (s == "clean+quality+pii") {
          const CleanResult c = cleaner.clean(batch);
          quality.evaluate(c.texts.view());
          masker.mask(c.texts.view());
        }
        wall.push_back(now(CLOCK_MONOTONIC) - w0);
        cpu.push_back(now(CLOCK_PROCESS_CPUTIME_ID) - c0);
      }
      std::sort(wall.begin(), wall.end());
      std::sort(cpu.begin(), cpu.end());
      const double mb = double(bytes.size()) / 1e6;
      std::printf("| %s | %d | %.0f | %.0f |\n", stage, threads, mb / wall[wall.size() / 2], mb / cpu[cpu.size() / 2]);
    }
  }
  return 0;
}
