// For the reader's tests: zlib's deflate as an independent compressor.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace luminamoon::test_support {

// window_bits 15 + 16: one gzip member; 15: a zlib stream. Level 0 stores.
inline std::string deflate_member(const std::string& s, int window_bits = 15 + 16, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, s.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace luminamoon::test_support
