// KeptSignatures: the verification values and the ref of every document the
// LSH index keeps, appended in id order, held in an unnamed temporary file and read back
// for the candidates only (Note [signatures on disk]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace luminamoon {

// Note [signatures on disk]
// The index verifies a band candidate on the low 32 bits of each signature
// value (Note [verification on 32 bits] in minhash_lsh.cc): 256 bytes per kept
// document at 64 values, more than the band tables, and read only when a band
// key collides (a near duplicate, or one of the rare accidental collisions).
// Kept in memory they made the CLI's peak grow with the corpus (127 MB at
// 500k kept documents, twice that while a std::vector doubled). They now go to
// an unnamed temporary file (O_TMPFILE: nothing to clean up after a crash; a
// named file unlinked at once where O_TMPFILE is missing) in the index's
// directory, or TMPDIR, or /tmp, in blocks of kBlockDocs documents; a
// candidate is read back with one pread (from the page cache, which the
// kernel may reclaim, and which is not the process's memory). Where no
// temporary file can be made, they stay in memory as before. The .lsh log
// keeps the full values, so nothing here needs to survive the process.
//
// Each document's ref (what a near duplicate of it reports as matched) is
// stored after its values: it is read only for the best match, and the
// index's in-memory array of refs had been the last 8 bytes per kept
// document still in memory besides the band runs' filters (issue 15,
// session 12).

class KeptSignatures {
 public:
  static constexpr size_t kBlockDocs = 4096;

  // width: values per signature; dir: where the temporary file goes ("" for
  // TMPDIR or /tmp).
  KeptSignatures(size_t width, const std::string& dir);
  ~KeptSignatures();
  KeptSignatures(const KeptSignatures&) = delete;
  KeptSignatures& operator=(const KeptSignatures&) = delete;

  // Appends the low 32 bits of sig[0..width) and the document's ref.
  void append(const uint64_t* sig, int64_t ref);
  // The values of document `id` (< size()) into out[0..width); returns its ref.
  int64_t read(size_t id, uint32_t* out) const;
  size_t size() const { return in_file_ + tail_.size() / stride_; }
  bool on_disk() const { return fd_ >= 0; }
  uint64_t memory_bytes() const { return tail_.capacity() * sizeof(uint32_t); }

 private:
  void flush_tail();

  size_t width_;
  size_t stride_;               // uint32 words per document: the values, then the ref's two halves
  int fd_ = -1;                 // the temporary file; -1: everything in tail_
  std::string what_;            // its directory, for error messages
  size_t in_file_ = 0;          // documents already in the file
  std::vector<uint32_t> tail_;  // the documents after them
  mutable std::vector<uint32_t> record_;  // read()'s buffer for a record from the file (one reader at a time)
};

}  // namespace luminamoon
