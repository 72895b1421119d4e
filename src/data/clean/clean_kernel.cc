// The cleaner's kernel: a Highway scan for the bytes that need work (control
// bytes: \n, \r, \t and the ones to remove), bulk copies in between.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "data/clean/clean_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "data/clean/clean_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace luminamoon::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Note [clean scan]: in UTF-8 every byte below 0x80 is its own code point, so
// the code points the cleaner acts on (U+0000..U+001F, U+007F) are exactly
// the bytes <= 0x1F and 0x7F. Spaces are not "special": trailing spaces are
// removed by looking back at the output when a newline arrives, so ordinary
// prose is copied in runs of a whole line.
HWY_INLINE size_t FindControl(const uint8_t* HWY_RESTRICT s, size_t n) {
  const hn::ScalableTag<uint8_t> d;
  const size_t N = hn::Lanes(d);
  const auto k1F = hn::Set(d, 0x1F);
  const auto k7F = hn::Set(d, 0x7F);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto a = hn::LoadU(d, s + i);
    const auto b = hn::LoadU(d, s + i + N);
    const auto ma = hn::Or(hn::Eq(hn::Min(a, k1F), a), hn::Eq(a, k7F));
    const auto mb = hn::Or(hn::Eq(hn::Min(b, k1F), b), hn::Eq(b, k7F));
    if (!hn::AllFalse(d, hn::Or(ma, mb))) {
      const intptr_t pa = hn::FindFirstTrue(d, ma);
      if (pa >= 0) return i + static_cast<size_t>(pa);
      return i + N + static_cast<size_t>(hn::FindFirstTrue(d, mb));
    }
  }
  for (; i + N <= n; i += N) {
    const auto a = hn::LoadU(d, s + i);
    const intptr_t pa = hn::FindFirstTrue(d, hn::Or(hn::Eq(hn::Min(a, k1F), a), hn::Eq(a, k7F)));
    if (pa >= 0) return i + static_cast<size_t>(pa);
  }
  for (; i < n; ++i)
    if (s[i] <= 0x1F || s[i] == 0x7F) return i;
  return n;
}

size_t FindControlByte(const uint8_t* s, size_t n) { return FindControl(s, n); }

size_t CleanValidUtf8(const uint8_t* HWY_RESTRICT s, size_t n, std::string& out) {
  const size_t base = out.size();
  auto strip_trailing_blanks = [&] {
    size_t e = out.size();
    while (e > base && (out[e - 1] == ' ' || out[e - 1] == '\t')) --e;
    out.resize(e);
  };
  size_t i = 0;
  while (i < n) {
    const size_t j = i + FindControl(s + i, n - i);
    if (j > i) {
      if (out.size() == base)  // leading whitespace of the document
        while (i < j && s[i] == ' ') ++i;
      out.append(reinterpret_cast<const char*>(s + i), j - i);
    }
    if (j >= n) break;
    const uint8_t c = s[j];
    i = j + 1;
    if (c == '\n' || c == '\r') {
      if (c == '\r' && i < n && s[i] == '\n') ++i;  // "\r\n" is one newline
      strip_trailing_blanks();
      const size_t len = out.size() - base;
      if (len == 0) continue;  // leading newlines
      const bool one = out[out.size() - 1] == '\n';
      const bool two = one && len >= 2 && out[out.size() - 2] == '\n';
      if (!two) out.push_back('\n');
    } else if (c == '\t') {
      if (out.size() > base) out.push_back('\t');
    }
    // any other control byte is removed
  }
  size_t e = out.size();
  while (e > base && (out[e - 1] == ' ' || out[e - 1] == '\t' || out[e - 1] == '\n')) --e;
  out.resize(e);
  return e - base;
}

}  // namespace HWY_NAMESPACE
}  // namespace luminamoon::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminamoon::detail {
HWY_EXPORT(CleanValidUtf8);
HWY_EXPORT(FindControlByte);

size_t clean_valid_utf8(const uint8_t* s, size_t n, std::string& out) {
  return HWY_DYNAMIC_DISPATCH(CleanValidUtf8)(s, n, out);
}
size_t find_control_byte(const uint8_t* s, size_t n) { return HWY_DYNAMIC_DISPATCH(FindControlByte)(s, n); }
}  // namespace luminamoon::detail
#endif
