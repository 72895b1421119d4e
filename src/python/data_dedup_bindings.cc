// Bindings of exact dedup (StreamDeduplicator) and MinHash LSH: conversion,
// DataError translation and GIL release only.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

#if defined(LUMINA_HAVE_DEDUP) && defined(LUMINA_HAVE_MINHASH) && defined(LUMINA_DATA_BATCH)

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "data/dedup/text_normalize.h"
#include "luminamoon/data_error.h"
#include "luminamoon/minhash_lsh.h"
#include "luminamoon/stream_deduplicator.h"
#include "luminamoon/string_tensor.h"

using namespace luminamoon;

namespace {

using RefArray = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using SigArray = nb::ndarray<const uint64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

PyObject* g_state_corrupt_error = nullptr;

// Runs f, turning a DataError into the Python exception its kind calls for.
template <class F>
auto translating(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const DataError& e) {
    switch (e.kind()) {
      case DataErrorKind::kUsage:
        throw nb::value_error(e.what());
      case DataErrorKind::kStateCorrupt:
        PyErr_SetString(g_state_corrupt_error, e.what());
        throw nb::python_error();
      default:
        PyErr_SetString(PyExc_OSError, e.what());
        throw nb::python_error();
    }
  }
}

template <class T, class Allocator>
nb::ndarray<nb::numpy, T> numpy_from(std::vector<T, Allocator>&& v, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<T, Allocator>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T, Allocator>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape, owner);
}

std::span<const int64_t> refs_of(const std::optional<RefArray>& refs, size_t n) {
  if (!refs) return {};
  if (refs->shape(0) != n) throw nb::value_error("refs must have one entry per text");
  return {refs->data(), n};
}

WalOptions wal_options(std::optional<std::string> path, const std::string& sync,
                       std::optional<uint64_t> resume_position, unsigned split_pause_us) {
  WalOptions o;
  if (path) o.path = *path;
  if (sync == "fdatasync") {
    o.sync = WalSync::kFdatasync;
  } else if (sync == "none") {
    o.sync = WalSync::kNone;
  } else {
    throw nb::value_error(("sync must be 'fdatasync' or 'none', got '" + sync + "'").c_str());
  }
  o.resume_position = resume_position;
  o.split_write_pause_us_for_tests = split_pause_us;
  return o;
}

nb::dict replay_dict(const WalReplayStats& s) {
  nb::dict d;
  d["blocks"] = s.blocks;
  d["records"] = s.records;
  d["valid_bytes"] = s.valid_bytes;
  d["cut_bytes"] = s.cut_bytes;
  return d;
}

// One object may be shared by Python threads, with or without a GIL (Note
// [free-threaded bindings] in module.cc): every call that touches the engine
// object, mutators and readers alike, holds its mutex. The mutex is taken with
// the interpreter released, so a thread waiting for it never holds the GIL
// (GIL builds) or blocks a stop-the-world pause (free-threaded builds).
struct DedupHandle {
  StreamDeduplicator impl;
  std::mutex mu;
};

struct LshHandle {
  MinHashLSH impl;
  std::mutex mu;
};

// Runs f(h.impl) without the GIL and under the object's lock.
template <class Handle, class F>
void with_object(Handle& h, F&& f) {
  translating([&] {
    nb::gil_scoped_release release;
    std::lock_guard lock(h.mu);
    f(h.impl);
  });
}

// A value read under the object's lock (the lock taken without the GIL).
template <class Handle, class F>
auto read_locked(Handle& h, F&& f) {
  nb::gil_scoped_release release;
  std::lock_guard lock(h.mu);
  return f(h.impl);
}

// The (keep, matched, similarity) arrays of one LSH decision pass.
struct LshDecisions {
  std::vector<uint8_t> keep;
  std::vector<int64_t> matched;
  std::vector<double> similarity;
  explicit LshDecisions(size_t n) : keep(n), matched(n), similarity(n) {}
  nb::tuple to_python() {
    const size_t n = keep.size();
    return nb::make_tuple(numpy_from(std::move(keep), {n}), numpy_from(std::move(matched), {n}),
                          numpy_from(std::move(similarity), {n}));
  }
};

}  // namespace

void register_data_dedup(nb::module_& m) {
  g_state_corrupt_error =
      PyErr_NewException("luminamoon._native.DedupStateCorruptError", PyExc_RuntimeError, nullptr);
  m.attr("DedupStateCorruptError") = nb::handle(g_state_corrupt_error);

  nb::class_<DedupHandle>(m, "_StreamDeduplicator")
      .def(
          "__init__",
          [](DedupHandle* self, std::optional<std::string> wal_path, bool normalized,
             bool track_matches, const std::string& sync, std::optional<uint64_t> resume_position,
             int num_threads, unsigned split_pause_us, uint64_t expected_distinct, uint64_t memory_keys,
             std::optional<std::string> spill_dir) {
            StreamDeduplicatorOptions o;
            o.expected_distinct = expected_distinct;
            o.memory_keys = memory_keys;
            o.spill_dir = spill_dir.value_or("");
            o.key = normalized ? DedupKey::kNormalizedText : DedupKey::kText;
            o.track_matches = track_matches;
            o.wal = wal_options(std::move(wal_path), sync, resume_position, split_pause_us);
            o.num_threads = num_threads;
            translating([&] {
              nb::gil_scoped_release release;
              new (self) DedupHandle{StreamDeduplicator(std::move(o)), {}};
            });
          },
          nb::arg("wal_path").none(), nb::arg("normalized"), nb::arg("track_matches"),
          nb::arg("sync"), nb::arg("resume_position").none(), nb::arg("num_threads"),
          nb::arg("split_write_pause_us"), nb::arg("expected_distinct"), nb::arg("memory_keys"),
          nb::arg("spill_dir").none())
      .def(
          "add",
          [](DedupHandle& h, const StringTensor& texts, std::optional<RefArray> refs) {
            const size_t n = texts.size();
            std::vector<uint8_t> keep(n);
            std::vector<int64_t> matched(n);
            auto ref_span = refs_of(refs, n);
            with_object(h, [&](auto& d) { d.add(texts.view(), ref_span, keep, matched); });
            return nb::make_tuple(numpy_from(std::move(keep), {n}),
                                  numpy_from(std::move(matched), {n}));
          },
          nb::arg("texts"), nb::arg("refs").none())
      .def("flush", [](DedupHandle& h) { with_object(h, [](auto& o) { o.flush(); }); })
      .def("commit", [](DedupHandle& h) { with_object(h, [](auto& o) { o.commit(); }); })
      .def("key_of", [](DedupHandle& h, nb::bytes text) {
        return h.impl.key_of({text.c_str(), text.size()});
      })
      .def("contains_key",
           [](DedupHandle& h, uint64_t key) {
             return read_locked(h, [key](auto& d) { return d.contains_key(key); });
           })
      .def("keys",
           [](DedupHandle& h) {
             std::vector<uint64_t> keys = read_locked(h, [](auto& d) { return d.keys(); });
             const size_t n = keys.size();
             return numpy_from(std::move(keys), {n});
           })
      .def_prop_ro("committed_position",
                   [](DedupHandle& h) { return read_locked(h, [](auto& d) { return d.committed_position(); }); })
      .def_prop_ro("distinct", [](DedupHandle& h) { return read_locked(h, [](auto& d) { return d.distinct(); }); })
      .def_prop_ro("documents_seen",
                   [](DedupHandle& h) { return read_locked(h, [](auto& d) { return d.documents_seen(); }); })
      .def_prop_ro("set_memory_bytes",
                   [](DedupHandle& h) { return read_locked(h, [](auto& d) { return d.set_memory_bytes(); }); })
      .def_prop_ro("memory_bytes",
                   [](DedupHandle& h) { return read_locked(h, [](auto& d) { return d.memory_bytes(); }); })
      .def_prop_ro("spilled_keys",
                   [](DedupHandle& h) { return read_locked(h, [](auto& d) { return d.spilled_keys(); }); })
      .def_prop_ro("replay_stats", [](DedupHandle& h) {
        return replay_dict(read_locked(h, [](auto& d) { return d.replay_stats(); }));
      });

  nb::class_<LshHandle>(m, "_MinHashLSH")
      .def(
          "__init__",
          [](LshHandle* self, int num_perm, int bands, int rows, int ngram, double threshold,
             uint64_t seed, std::optional<std::string> path, const std::string& sync,
             std::optional<uint64_t> resume_position, int num_threads, unsigned split_pause_us,
             const std::string& scheme) {
            MinHashLSHOptions o;
            translating([&] {
              o.params = {.num_perm = num_perm, .ngram = ngram, .seed = seed, .scheme = parse_minhash_scheme(scheme)};
            });
            o.bands = bands;
            o.rows = rows;
            o.threshold = threshold;
            o.index = wal_options(std::move(path), sync, resume_position, split_pause_us);
            o.num_threads = num_threads;
            translating([&] {
              nb::gil_scoped_release release;
              new (self) LshHandle{MinHashLSH(std::move(o)), {}};
            });
          },
          nb::arg("num_perm"), nb::arg("bands"), nb::arg("rows"), nb::arg("ngram"),
          nb::arg("threshold"), nb::arg("seed"), nb::arg("path").none(), nb::arg("sync"),
          nb::arg("resume_position").none(), nb::arg("num_threads"),
          nb::arg("split_write_pause_us"), nb::arg("scheme") = "oph")
      .def(
          "signatures",
          [](LshHandle& h, const StringTensor& texts, int num_threads, bool scalar) {
            const size_t n = texts.size();
            const size_t width = static_cast<size_t>(h.impl.hasher().params().num_perm);
            // Every value is written by signatures(): no zero-fill of n * num_perm values first.
            std::vector<uint64_t, UninitializedAllocator<uint64_t>> out;
            out.resize(n * width);
            translating([&] {
              nb::gil_scoped_release release;
              h.impl.hasher().signatures(texts.view(), out,
                                         num_threads > 0 ? num_threads
                                                         : h.impl.options().num_threads,
                                         scalar ? MinHashKernel::kScalar : MinHashKernel::kAuto);
            });
            return numpy_from(std::move(out), {n, width});
          },
          nb::arg("texts"), nb::arg("num_threads") = 0, nb::arg("scalar") = false)
      .def(
          "add",
          [](LshHandle& h, const StringTensor& texts, std::optional<RefArray> refs) {
            LshDecisions out(texts.size());
            auto ref_span = refs_of(refs, texts.size());
            with_object(h, [&](auto& lsh) {
              lsh.add(texts.view(), ref_span, out.keep, out.matched, out.similarity);
            });
            return out.to_python();
          },
          nb::arg("texts"), nb::arg("refs").none())
      .def(
          "add_signatures",
          [](LshHandle& h, SigArray sigs, std::optional<RefArray> refs) {
            const size_t n = sigs.shape(0);
            if (sigs.shape(1) != static_cast<size_t>(h.impl.hasher().params().num_perm)) {
              throw nb::value_error("signatures must have num_perm columns");
            }
            LshDecisions out(n);
            auto ref_span = refs_of(refs, n);
            with_object(h, [&](auto& lsh) {
              lsh.add_signatures({sigs.data(), n * sigs.shape(1)}, ref_span, out.keep, out.matched,
                                 out.similarity);
            });
            return out.to_python();
          },
          nb::arg("signatures"), nb::arg("refs").none())
      .def("shingle_hashes",
           [](LshHandle& h, nb::bytes text) {
             auto v = h.impl.hasher().shingle_hashes({text.c_str(), text.size()});
             const size_t n = v.size();
             return numpy_from(std::move(v), {n});
           })
      .def("permutations",
           [](LshHandle& h) {
             const auto& p = h.impl.hasher().permutations();
             auto a = p.a, b = p.b;
             const size_t n = a.size();
             return nb::make_tuple(numpy_from(std::move(a), {n}), numpy_from(std::move(b), {n}));
           })
      .def("flush", [](LshHandle& h) { with_object(h, [](auto& o) { o.flush(); }); })
      .def("commit", [](LshHandle& h) { with_object(h, [](auto& o) { o.commit(); }); })
      .def_prop_ro("committed_position",
                   [](LshHandle& h) { return read_locked(h, [](auto& l) { return l.committed_position(); }); })
      .def_prop_ro("kept", [](LshHandle& h) { return read_locked(h, [](auto& l) { return l.kept(); }); })
      .def_prop_ro("documents_seen",
                   [](LshHandle& h) { return read_locked(h, [](auto& l) { return l.documents_seen(); }); })
      .def_prop_ro("memory_bytes",
                   [](LshHandle& h) { return read_locked(h, [](auto& l) { return l.memory_bytes(); }); })
      .def_prop_ro("replay_stats", [](LshHandle& h) {
        return replay_dict(read_locked(h, [](auto& l) { return l.replay_stats(); }));
      });

  m.def("minhash_kernel_target", [] { return MinHasher::kernel_target(); });
  m.def("dedup_normalize", [](nb::bytes text) {
    std::string s = normalize_for_dedup({text.c_str(), text.size()});
    return nb::bytes(s.data(), s.size());
  });
}

#else

void register_data_dedup(nb::module_& m) { (void)m; }

#endif
