// The signature path's shingle order: indexes grouped by byte length, 16
// shingles a vector on AVX-512 (Highway, runtime dispatch).
#include "data/minhash/shingle_groups.h"

#include <cstring>

// Note [shingles grouped by length]
// XXH3-64 branches on its input's length (<= 16, <= 32, <= 64, <= 128, ...
// bytes). Of the 5-word shingles of real text 74% are 17-32 bytes and 21%
// 33-64 (docs/benchmarks.md, issue 15 session 5), in no order a branch
// predictor can learn: hashed in document order, the 32-byte branch goes the
// unpredicted way about once in five shingles (session 6, on an AVX-512 Xeon:
// the corpus's shingles hash in 6.7 ns each grouped by length against 8.1 ns
// in document order, bench/minhash_hash_order.cc). Signatures do not depend
// on the order of the shingle hashes (oph keeps bin minima, kperm
// permutation minima), so the signature path hashes the short group, then
// the long one. The split must cost less
// than it saves: a scalar split (a compare and two stores per shingle) cost
// as much as it saved; with AVX-512 it is a compare and two vpcompressd per
// 16 shingles. Highway 1.0's Compress of 32-bit lanes on AVX2 and older
// targets copies a 1 KiB table onto the stack on every call (GCC), which
// costs more than the mispredictions, so those targets keep document order
// (and skip the index array).

#ifdef LUMINA_MINHASH_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "data/minhash/shingle_groups.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace luminamoon {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

bool OrderShinglesForHashing(const uint32_t* HWY_RESTRICT starts, size_t count, size_t n,
                             uint32_t* HWY_RESTRICT order, uint32_t* HWY_RESTRICT scratch) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  const hn::ScalableTag<uint32_t> d;
  const size_t N = hn::Lanes(d);
  const auto span_of_32_bytes = hn::Set(d, 33u);  // starts[i + n] - starts[i] = length + 1
  const auto step = hn::Set(d, static_cast<uint32_t>(N));
  auto index = hn::Iota(d, 0);
  size_t shorts = 0, longs = 0;  // into order and scratch
  size_t i = 0;
  for (; i < count; i += N) {
    // The last vector's lanes past count are neither short nor long.
    const auto valid = hn::FirstN(d, count - i);
    const auto span = hn::Sub(hn::MaskedLoad(valid, d, starts + i + n), hn::MaskedLoad(valid, d, starts + i));
    const auto is_long = hn::And(valid, hn::Gt(span, span_of_32_bytes));
    const auto is_short = hn::AndNot(is_long, valid);
    // Compressed in a register, stored whole (the slack): a compressing
    // store to memory is several times slower.
    hn::StoreU(hn::Compress(index, is_short), d, order + shorts);
    hn::StoreU(hn::Compress(index, is_long), d, scratch + longs);
    shorts += hn::CountTrue(d, is_short);
    longs += hn::CountTrue(d, is_long);
    index = hn::Add(index, step);
  }
  std::memcpy(order + shorts, scratch, longs * sizeof(uint32_t));
  return true;
#else
  (void)starts, (void)count, (void)n, (void)order, (void)scratch;
  return false;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace luminamoon
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminamoon {
HWY_EXPORT(OrderShinglesForHashing);
bool order_shingles_for_hashing(const uint32_t* starts, size_t count, size_t n, uint32_t* order,
                                uint32_t* scratch) {
  return HWY_DYNAMIC_DISPATCH(OrderShinglesForHashing)(starts, count, n, order, scratch);
}
}  // namespace luminamoon
#endif  // HWY_ONCE

#else  // !LUMINA_MINHASH_WITH_HWY

namespace luminamoon {
bool order_shingles_for_hashing(const uint32_t*, size_t, size_t, uint32_t*, uint32_t*) { return false; }
}  // namespace luminamoon

#endif
