// StringTensor: Utf8View slots on the 12-byte boundary, prefix comparison,
// Arrow C export/import round trip without copying the bytes.
#include "luminamoon/string_tensor.h"

#include <gtest/gtest.h>

#include <string>

#include "luminamoon/arrow_c_data.h"

namespace luminamoon {
namespace {

StringTensor make(std::initializer_list<std::string_view> items) {
  TextBatch b;
  for (auto s : items) b.push_back(s);
  return StringTensor(std::move(b));
}

TEST(StringTensor, ViewSlots) {
  const std::string twelve = "abcdefghijkl", thirteen = "abcdefghijklm";
  StringTensor t = make({"", twelve, thirteen, "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"});
  const auto& v = t.views();
  EXPECT_EQ(v[0].length, 0);
  EXPECT_EQ(v[1].length, 12);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&v[1]) + 4, 12), twelve);
  EXPECT_EQ(v[2].length, 13);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v[2].prefix), 4), "abcd");
  EXPECT_EQ(v[2].ref.buffer_index, 0);
  EXPECT_EQ(v[2].ref.offset, 12);
  EXPECT_EQ(t.view_buffers()[0] + v[2].ref.offset, t.data() + t.offsets()[2]);  // no copy
  EXPECT_EQ(t.compare(1, 2), -1);
  EXPECT_EQ(t.compare(2, 2), 0);
  EXPECT_EQ(t.compare(3, 0), 1);
}

TEST(StringTensor, ArrowRoundTripSharesBytes) {
  StringTensor t = make({"hello", "", "a longer string than twelve"});
  ArrowSchema schema;
  ArrowArray array;
  export_arrow_schema(ArrowStringLayout::kLargeString, &schema);
  export_arrow_array(t, ArrowStringLayout::kLargeString, &array);
  StringTensor back = import_arrow_array(&schema, &array);
  EXPECT_EQ(array.release, nullptr);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back.data(), t.data());
  EXPECT_EQ(back[2], "a longer string than twelve");
  schema.release(&schema);
  ArrowSchema bad;
  export_arrow_schema(ArrowStringLayout::kLargeString, &bad);
  bad.format = "i";
  export_arrow_array(t, ArrowStringLayout::kLargeString, &array);
  EXPECT_THROW(import_arrow_array(&bad, &array), std::invalid_argument);
  if (array.release) array.release(&array);
}

}  // namespace
}  // namespace luminamoon
