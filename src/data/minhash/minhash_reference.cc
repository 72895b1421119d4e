// The scalar reference of the MinHash minima (unsigned __int128 products) and
// the lane layout the vector kernel reads.
#include <algorithm>

#include "data/minhash/minhash_kernel.h"

namespace luminamoon {

PermutationLanes::PermutationLanes(const MinHashPermutations& p) {
  padded = (p.a.size() + kPermutationPad - 1) / kPermutationPad * kPermutationPad;
  a_lo.assign(padded, 1);
  a_hi.assign(padded, 0);
  b.assign(padded, 0);
  for (size_t k = 0; k < p.a.size(); ++k) {
    a_lo[k] = p.a[k] & 0xFFFFFFFFu;
    a_hi[k] = p.a[k] >> 32;
    b[k] = p.b[k];
  }
}

void minhash_min_scalar(const uint64_t* x, size_t n, const MinHashPermutations& p, uint64_t* out) {
  for (size_t k = 0; k < p.a.size(); ++k) {
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < n; ++i) {
      unsigned __int128 v = static_cast<unsigned __int128>(p.a[k]) * x[i] + p.b[k];
      m = std::min(m, static_cast<uint64_t>(v % kMinHashPrime));
    }
    out[k] = m;
  }
}

}  // namespace luminamoon

