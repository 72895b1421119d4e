// OpenPart: the rows of the part being filled, on their way to one part file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace luminamoon {

class OpenPart {
 public:
  virtual ~OpenPart() = default;
  // Adds one row; with_text false for a part without a text column.
  virtual void push(std::string_view text, std::string_view fields, bool with_text = true) = 0;
  virtual uint64_t rows() const = 0;
  virtual uint64_t text_bytes() const = 0;
  // Makes the part's rows the file final_path, durably (temporary name,
  // fsync, rename: step 1 of Note [commit order]), and empties the part for
  // the next one. Returns the file's size in bytes.
  virtual uint64_t publish(const std::string& final_path) = 0;
};

}  // namespace luminamoon
