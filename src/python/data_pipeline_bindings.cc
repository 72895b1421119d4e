// Bindings of the FusedPipeline: config conversion, DataError translation,
// GIL release and a bounded queue for stream(). Compiled into _native (no
// Arrow) and again into _data_io (with the Arrow formats registered).
#include <nanobind/nanobind.h>

namespace nb = nanobind;

#if defined(LUMINA_HAVE_FUSED_PIPELINE)

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "data/pipeline/freed_memory.h"
#include "luminamoon/data_error.h"
#include "luminamoon/fused_pipeline.h"
#include "luminamoon/reader.h"
#include "luminamoon/shard_tasks.h"
#include "luminamoon/writer.h"
#include "python/data_error_bridge.h"

using namespace luminamoon;
using bridge::translating;

namespace {

[[noreturn]] void bad_value(const std::string& key, const char* want) {
  throw DataError(DataErrorKind::kUsage, "config key '" + key + "' must be " + want);
}

bool as_bool(const std::string& key, nb::handle v) {
  if (!PyBool_Check(v.ptr())) bad_value(key, "true or false");
  return v.ptr() == Py_True;
}
int64_t as_int(const std::string& key, nb::handle v, int64_t min) {
  if (PyBool_Check(v.ptr()) || !PyLong_Check(v.ptr())) bad_value(key, "an integer");
  int64_t x = nb::cast<int64_t>(v);
  if (x < min) bad_value(key, (">= " + std::to_string(min)).c_str());
  return x;
}
double as_float(const std::string& key, nb::handle v) {
  if (PyBool_Check(v.ptr()) || !(PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr()))) {
    bad_value(key, "a number");
  }
  return nb::cast<double>(v);
}
std::string as_str(const std::string& key, nb::handle v) {
  if (!PyUnicode_Check(v.ptr())) bad_value(key, "a string");
  return nb::cast<std::string>(v);
}

// A path from Python: bytes as they are, str through the file system encoding
// (os.fsencode), so that names which are not UTF-8 survive.
std::string path_from(nb::handle v) {
  // PyBytes_AsString/Size, not the macros: the stable ABI (abi3) has functions only.
  if (PyBytes_Check(v.ptr())) return std::string(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
  nb::object encoded = nb::steal(PyUnicode_EncodeFSDefault(v.ptr()));
  if (!encoded.is_valid()) throw nb::python_error();
  return std::string(PyBytes_AsString(encoded.ptr()), PyBytes_Size(encoded.ptr()));
}
std::vector<std::string> paths_from(nb::handle list) {
  std::vector<std::string> out;
  for (nb::handle item : list) out.push_back(path_from(item));
  return out;
}
nb::object path_to_python(const std::string& path) {
  return nb::steal(PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size())));
}

// The flat config dict the Python front end builds (data/pipeline.py validates
// names and suggests fixes; this checks types again, never trusting it).
PipelineConfig config_from(nb::dict d) {
  PipelineConfig c;
  for (auto [k, v] : d) {
    std::string key = nb::cast<std::string>(k);
    if (key == "text_field") c.reader.text_field = as_str(key, v);
    else if (key == "id_field") c.reader.id_field = as_str(key, v);
    else if (key == "txt_mode") {
      std::string m = as_str(key, v);
      if (m == "file") c.reader.txt_mode = TxtMode::kFile;
      else if (m == "line") c.reader.txt_mode = TxtMode::kLine;
      else if (m == "paragraph") c.reader.txt_mode = TxtMode::kParagraph;
      else bad_value(key, "file, line or paragraph");
    } else if (key == "batch_docs") c.reader.batch_docs = as_int(key, v, 1);
    else if (key == "batch_bytes") c.reader.batch_bytes = as_int(key, v, 1);
    else if (key == "max_record_bytes") c.reader.max_record_bytes = as_int(key, v, 1);
    else if (key == "strict") c.strict = as_bool(key, v);
    else if (key == "format") c.writer.format = parse_output_format(as_str(key, v));
    else if (key == "compression") c.writer.parquet_compression = as_str(key, v);
    else if (key == "compression_level") c.writer.parquet_compression_level = static_cast<int>(as_int(key, v, -100));
    else if (key == "row_group_rows") c.writer.parquet_row_group_rows = as_int(key, v, 1);
    else if (key == "part_rows") c.writer.part_max_rows = as_int(key, v, 1);
    else if (key == "part_bytes") c.writer.part_max_bytes = as_int(key, v, 1);
    else if (key == "write_dropped") c.writer.write_dropped = as_bool(key, v);
    else if (key == "write_metrics") c.writer.write_metrics = as_bool(key, v);
    else if (key == "clean") c.clean = as_bool(key, v);
    else if (key == "invalid_utf8") c.invalid_utf8 = as_str(key, v);
    else if (key == "quality") c.quality = as_bool(key, v);
    else if (key == "quality_thresholds") {
      if (!nb::isinstance<nb::dict>(v)) bad_value(key, "a table of check name -> number or null");
      for (auto [name, bound] : nb::cast<nb::dict>(v)) {
        std::string n = nb::cast<std::string>(name);
        if (bound.is_none()) c.quality_thresholds.emplace_back(n, std::nullopt);
        else c.quality_thresholds.emplace_back(n, as_float(key + "." + n, bound));
      }
    } else if (key == "dedup") c.dedup = as_bool(key, v);
    else if (key == "dedup_normalized") c.dedup_normalized = as_bool(key, v);
    else if (key == "minhash") c.minhash = as_bool(key, v);
    else if (key == "minhash_num_perm") c.minhash_num_perm = static_cast<int>(as_int(key, v, 1));
    else if (key == "minhash_ngram") c.minhash_ngram = static_cast<int>(as_int(key, v, 1));
    else if (key == "minhash_bands") c.minhash_bands = static_cast<int>(as_int(key, v, 1));
    else if (key == "minhash_rows") c.minhash_rows = static_cast<int>(as_int(key, v, 1));
    else if (key == "minhash_threshold") c.minhash_threshold = as_float(key, v);
    else if (key == "minhash_seed") c.minhash_seed = static_cast<uint64_t>(as_int(key, v, 0));
    else if (key == "minhash_scheme") c.minhash_scheme = as_str(key, v);
    else if (key == "pii") c.pii = as_bool(key, v);
    else if (key == "pii_types") {
      for (auto t : nb::cast<nb::list>(v)) c.pii_types.push_back(as_str(key, t));
    } else if (key == "pii_keep_private_ip") c.pii_keep_private_ip = as_bool(key, v);
    else if (key == "num_threads") c.num_threads = static_cast<int>(as_int(key, v, 0));
    else if (key == "max_batches_in_flight") c.max_batches_in_flight = as_int(key, v, 0);
    else throw DataError(DataErrorKind::kUsage, "unknown config key '" + key + "'");
  }
  return c;
}

template <class T>
nb::ndarray<nb::numpy, const T, nb::ndim<1>> array_of(std::shared_ptr<std::vector<T>> v) {
  auto* keep = new std::shared_ptr<std::vector<T>>(v);
  nb::capsule owner(keep, [](void* p) noexcept {
    delete static_cast<std::shared_ptr<std::vector<T>>*>(p);
  });
  return nb::ndarray<nb::numpy, const T, nb::ndim<1>>(v->data(), {v->size()}, owner);
}

// A byte buffer as a read-only uint8 array that owns it (no copy).
nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>> bytes_array_of(std::string bytes) {
  auto* keep = new std::string(std::move(bytes));
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::string*>(p); });
  return nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>>(reinterpret_cast<const uint8_t*>(keep->data()),
                                                           {keep->size()}, owner);
}

// The kept documents of a batch as Python objects.
nb::dict batch_to_python(const DocBatch& batch) {
  auto data = std::make_shared<std::vector<uint8_t>>();
  auto offsets = std::make_shared<std::vector<int64_t>>(1, 0);
  nb::list ids, metadata;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch.kept(i)) continue;
    auto t = batch.text[i];
    data->insert(data->end(), t.begin(), t.end());
    offsets->push_back(static_cast<int64_t>(data->size()));
    ids.append(nb::str(batch.ids[i].data(), batch.ids[i].size()));
    metadata.append(nb::str(batch.metadata[i].data(), batch.metadata[i].size()));
  }
  nb::dict out;
  out["text_data"] = array_of(data);
  out["text_offsets"] = array_of(offsets);
  out["ids"] = ids;
  out["metadata"] = metadata;
  out["shard"] = path_to_python(batch.shard_path);
  out["documents_in"] = batch.size();
  out["global_row_end"] = batch.end.global_row_idx;
  return out;
}

// stream(): the pipeline runs on its own thread and hands batches over a
// bounded queue, so a training loop pulls them at its own pace.
class BatchStream {
 public:
  BatchStream(PipelineConfig config, std::vector<std::string> inputs)
      : pipeline_(std::move(config)), capacity_(std::max<size_t>(2, pipeline_.config().max_batches_in_flight)) {
    worker_ = std::thread([this, inputs = std::move(inputs)] {
      try {
        pipeline_.stream(inputs, [this](std::shared_ptr<DocBatch> b) {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return closed_ || queue_.size() < capacity_; });
          if (closed_) return false;
          queue_.push_back(std::move(b));
          cv_.notify_all();
          return true;
        });
      } catch (const DataError& e) {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = std::make_unique<DataError>(e);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = std::make_unique<DataError>(DataErrorKind::kInput, e.what());
      }
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      cv_.notify_all();
    });
  }
  ~BatchStream() { close(); }

  // The next batch, or None at the end (raises the pipeline's error).
  nb::object next() {
    std::shared_ptr<DocBatch> batch;
    {
      nb::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || done_; });
      if (!queue_.empty()) {
        batch = std::move(queue_.front());
        queue_.pop_front();
        cv_.notify_all();
      }
    }
    if (batch) return batch_to_python(*batch);
    std::unique_ptr<DataError> error;
    {
      std::lock_guard<std::mutex> lock(mu_);
      error = std::move(error_);
    }
    if (error) bridge::raise_data_error(*error);
    return nb::none();
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      cv_.notify_all();
    }
    pipeline_.cancel();
    // Two threads may close one stream (free-threaded builds, or a GIL build
    // where both wait here without the GIL): one joins, the other waits for it.
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(join_mu_);
    if (worker_.joinable()) worker_.join();
  }

 private:
  FusedPipeline pipeline_;
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<DocBatch>> queue_;
  bool closed_ = false;
  bool done_ = false;
  std::unique_ptr<DataError> error_;
  std::mutex join_mu_;
  std::thread worker_;
};

nb::dict progress_dict(const PipelineProgress& p) {
  nb::dict d;
  d["documents_in"] = p.documents_in.load();
  d["documents_kept"] = p.documents_kept.load();
  d["bytes_in"] = p.bytes_in.load();
  d["input_bytes_done"] = p.input_bytes_done.load();
  d["input_bytes_total"] = p.input_bytes_total.load();
  d["parts_committed"] = p.parts_committed.load();
  d["running"] = p.running.load();
  return d;
}

}  // namespace

void register_data_pipeline(nb::module_& m) {
  nb::class_<FusedPipeline>(m, "_FusedPipeline")
      .def("__init__",
           [](FusedPipeline* self, nb::dict config) {
             translating([&] { new (self) FusedPipeline(config_from(config)); });
           })
      .def(
          "run",
          [](FusedPipeline& p, nb::list input_list, nb::object output, bool resume) {
            std::vector<std::string> inputs = paths_from(input_list);
            std::string output_dir = path_from(output);
            return translating([&] {
              nb::gil_scoped_release release;
              return p.run(inputs, output_dir, resume);
            });
          },
          nb::arg("inputs"), nb::arg("output_dir"), nb::arg("resume") = true)
      .def("progress", [](const FusedPipeline& p) { return progress_dict(p.progress()); })
      .def("cancel", &FusedPipeline::cancel)
      .def("fingerprint", [](const FusedPipeline& p) { return p.config().fingerprint(); });

  nb::class_<BatchStream>(m, "_BatchStream")
      .def("__init__",
           [](BatchStream* self, nb::dict config, nb::list input_list) {
             std::vector<std::string> inputs = paths_from(input_list);
             translating([&] { new (self) BatchStream(config_from(config), std::move(inputs)); });
           })
      .def("next", &BatchStream::next)
      .def("close", &BatchStream::close);

  // One shard at a time, for a distributed executor (ray_executor.py).
  nb::class_<ShardTasks>(m, "_ShardTasks")
      .def("__init__",
           [](ShardTasks* self, nb::dict config, nb::list input_list) {
             std::vector<std::string> inputs = paths_from(input_list);
             translating([&] { new (self) ShardTasks(config_from(config), std::move(inputs)); });
           })
      .def("shard_count", &ShardTasks::shard_count)
      .def("preflight",
           [](const ShardTasks& t, nb::object output) {
             std::string dir = path_from(output);
             translating([&] {
               nb::gil_scoped_release release;
               t.preflight(dir);
             });
           })
      .def("manifest", [](const ShardTasks& t) { return translating([&] { return t.manifest(); }); })
      .def("check_manifest",
           [](const ShardTasks& t, const std::string& json) { translating([&] { t.check_manifest(json); }); })
      .def("map_shard",
           [](const ShardTasks& t, uint32_t shard, bool save_batches) {
             ShardSurvivors s = translating([&] {
               nb::gil_scoped_release release;
               return t.map_shard(shard, save_batches);
             });
             nb::dict out;
             out["refs"] = array_of(std::make_shared<std::vector<int64_t>>(std::move(s.refs)));
             out["exact_keys"] = array_of(std::make_shared<std::vector<uint64_t>>(std::move(s.exact_keys)));
             out["signatures"] = array_of(std::make_shared<std::vector<uint64_t>>(std::move(s.signatures)));
             out["band_keys"] = array_of(std::make_shared<std::vector<uint64_t>>(std::move(s.band_keys)));
             if (save_batches) out["batches"] = bytes_array_of(std::move(s.saved_batches));
             return out;
           },
           nb::arg("shard"), nb::arg("save_batches") = false)
      .def("finish_shard",
           [](const ShardTasks& t, uint32_t shard, nb::object output,
              nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> refs,
              nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> near,
              nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> matched,
              std::optional<nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>> batches) {
             std::string dir = path_from(output);
             PlannedDrops drops;
             drops.refs.assign(refs.data(), refs.data() + refs.shape(0));
             drops.near.assign(near.data(), near.data() + near.shape(0));
             drops.matched.assign(matched.data(), matched.data() + matched.shape(0));
             std::optional<std::string_view> saved;  // the caller's buffer (a Ray object, read in place)
             if (batches) saved = std::string_view(reinterpret_cast<const char*>(batches->data()), batches->shape(0));
             return translating([&] {
               nb::gil_scoped_release release;
               return t.finish_shard(shard, dir, drops, saved);
             });
           },
           nb::arg("shard"), nb::arg("output"), nb::arg("refs"), nb::arg("near"), nb::arg("matched"),
           nb::arg("batches") = nb::none())
      .def("summary",
           [](const ShardTasks& t, const std::vector<std::string>& totals, const std::vector<uint8_t>& session,
              bool resumed, double seconds) {
             return translating([&] { return t.summary(totals, session, resumed, seconds); });
           });

  m.def("keep_freed_memory", &keep_freed_memory, nb::arg("bytes"));  // Note [freed memory kept]
  m.def("pipeline_available_stages", &FusedPipeline::available_stages);
  m.def("pipeline_parquet_input_available", &parquet_reader_available);
  m.def("pipeline_arrow_output_available", &arrow_serializers_available);
  m.def("pipeline_describe_shard", [](const std::string& path) {
    return translating([&] {
      ShardInfo info = describe_shard(path, 0);
      const char* format = info.format == ShardFormat::kJsonl ? "jsonl"
                           : info.format == ShardFormat::kTxt ? "txt" : "parquet";
      return std::string(format);
    });
  });
}

#else

void register_data_pipeline(nb::module_& m) { (void)m; }

#endif
