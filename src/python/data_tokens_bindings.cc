// Bindings of the token shards (TokenShardWriter, export_megatron):
// conversion, DataError translation and GIL release only.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

#if defined(LUMINA_HAVE_TOKEN_SHARDS)

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <span>

#include "luminamoon/token_shards.h"
#include "python/data_error_bridge.h"

using namespace luminamoon;
using bridge::translating;

namespace {

using TokenArray = nb::ndarray<const uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using LengthArray = nb::ndarray<const uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

nb::dict info_dict(const TokenShardInfo& s) {
  nb::dict d;
  d["file"] = s.file;
  d["documents"] = s.documents;
  d["tokens"] = s.tokens;
  d["bytes"] = s.bytes;
  d["payload_crc32"] = s.payload_crc32;
  return d;
}

}  // namespace

void register_data_tokens(nb::module_& m) {
  nb::class_<TokenShardWriter>(m, "_TokenShardWriter")
      .def("__init__",
           [](TokenShardWriter* self, std::string dir, uint32_t token_bytes, uint64_t shard_max_tokens,
              std::string metadata_json) {
             translating([&] {
               new (self) TokenShardWriter(std::move(dir),
                                           TokenShardOptions{token_bytes, shard_max_tokens, std::move(metadata_json)});
             });
           },
           nb::arg("dir"), nb::arg("token_bytes"), nb::arg("shard_max_tokens"), nb::arg("metadata_json"))
      .def("discard_uncommitted",
           [](TokenShardWriter& w, uint64_t committed) {
             translating([&] {
               nb::gil_scoped_release release;
               w.discard_uncommitted(committed);
             });
           })
      .def("add_documents",
           [](TokenShardWriter& w, TokenArray tokens, LengthArray lengths) {
             translating([&] {
               nb::gil_scoped_release release;
               w.add_documents(std::span<const uint32_t>(tokens.data(), tokens.shape(0)),
                               std::span<const uint64_t>(lengths.data(), lengths.shape(0)));
             });
           })
      .def_prop_ro("shard_full", &TokenShardWriter::shard_full)
      .def_prop_ro("shard_empty", &TokenShardWriter::shard_empty)
      .def("write_shard",
           [](TokenShardWriter& w) {
             TokenShardInfo info = translating([&] {
               nb::gil_scoped_release release;
               return w.write_shard();
             });
             return info_dict(info);
           })
      .def("committed", [](const TokenShardWriter& w) {
        nb::list out;
        for (const auto& s : w.committed()) out.append(info_dict(s));
        return out;
      });

  m.def("_read_token_shard_header", [](const std::string& path) {
    uint32_t token_bytes = 0;
    TokenShardInfo info = translating([&] { return read_token_shard_header(path, &token_bytes); });
    nb::dict d = info_dict(info);
    d["token_bytes"] = token_bytes;
    return d;
  });
  m.def("_export_megatron", [](std::vector<std::string> shards, std::string prefix) {
    return translating([&] {
      nb::gil_scoped_release release;
      return export_megatron(shards, prefix);
    });
  });
}

#else

void register_data_tokens(nb::module_& m) { (void)m; }

#endif
