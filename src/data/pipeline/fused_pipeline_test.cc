// FusedPipeline end to end in C++ (the ThreadSanitizer job's pipeline test):
// several threads, small batches and parts, every stage on; the counts are
// the corpus's hand-known ones, a resumed run adds nothing, and stream()
// sees the same kept documents as run() wrote.
#include "luminamoon/fused_pipeline.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "data/common/parallel.h"
#include "data/pipeline/stage_runner.h"
#include "luminamoon/data_error.h"
#include "luminamoon/data_threads.h"

namespace luminamoon {
namespace {

namespace fs = std::filesystem;

struct Corpus {
  std::vector<std::string> paths;
  std::set<std::string> distinct;  // texts of the well-formed documents
  int documents = 0, malformed = 0;
};

// Documents of random words from a large vocabulary (no two near each other),
// each written twice across the shards (exact duplicates), plus malformed lines.
Corpus make_corpus(const fs::path& dir, int shards, int per_shard) {
  std::mt19937_64 rng(16);
  Corpus c;
  std::vector<std::string> history;
  for (int s = 0; s < shards; ++s) {
    std::string path = (dir / ("shard-" + std::to_string(s) + ".jsonl")).string();
    std::ofstream out(path);
    for (int d = 0; d < per_shard; ++d) {
      std::string text;
      if (!history.empty() && d % 5 == 4) {
        text = history[rng() % history.size()];
      } else {
        for (int w = 0; w < 40; ++w) text += "w" + std::to_string(rng() % 100000) + " ";
        text += "end";
        history.push_back(text);
      }
      out << "{\"id\":\"s" << s << "-" << d << "\",\"text\":\"" << text << "\",\"n\":" << d << "}\n";
      c.distinct.insert(text);
      ++c.documents;
      if (d % 17 == 0) {
        out << "{\"id\":\"bad\",\"text\":\n";
        ++c.malformed;
      }
    }
    c.paths.push_back(path);
  }
  return c;
}

uint64_t field(const std::string& summary, const char* name) {
  simdjson::dom::parser parser;
  return parser.parse(summary).at_key(name).get_uint64().value();
}

class FusedPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lm_pipeline_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  PipelineConfig config() const {
    PipelineConfig c;
    c.quality = false;  // random words are not English; every other stage runs
    c.writer.format = OutputFormat::kNdjson;
    c.writer.part_max_rows = 37;
    c.reader.batch_docs = 16;
    c.num_threads = 4;
    c.max_batches_in_flight = 6;
    return c;
  }

  fs::path dir_;
};

TEST_F(FusedPipelineTest, CountsResumeAndStreamAgree) {
  Corpus corpus = make_corpus(dir_, 3, 120);
  const std::string out = (dir_ / "out").string();
  FusedPipeline pipeline(config());
  std::string summary = pipeline.run(corpus.paths, out, /*resume=*/false);
  EXPECT_EQ(field(summary, "documents_in"), static_cast<uint64_t>(corpus.documents));
  EXPECT_EQ(field(summary, "records_malformed"), static_cast<uint64_t>(corpus.malformed));
  EXPECT_EQ(field(summary, "documents_kept"), corpus.distinct.size());

  // The run is finished: a resume reads nothing more and reports the same.
  FusedPipeline again(config());
  std::string resumed = again.run(corpus.paths, out, /*resume=*/true);
  EXPECT_EQ(field(resumed, "documents_kept"), corpus.distinct.size());

  std::set<std::string> streamed;
  uint64_t kept = 0;
  FusedPipeline streaming(config());
  streaming.stream(corpus.paths, [&](std::shared_ptr<DocBatch> batch) {
    for (size_t i = 0; i < batch->size(); ++i) {
      if (!batch->kept(i)) continue;
      ++kept;
      streamed.insert(std::string(batch->text[i]));
    }
    return true;
  });
  EXPECT_EQ(kept, corpus.distinct.size());
  EXPECT_EQ(streamed, corpus.distinct);
}

// Progress is read and cancel() called from other threads while a run works
// (what the CLI's progress display and Ctrl-C do); the resumed run finishes
// with the same counts as an uninterrupted one.
TEST_F(FusedPipelineTest, ProgressAndCancelFromOtherThreads) {
  Corpus corpus = make_corpus(dir_, 2, 150);
  const std::string out = (dir_ / "out").string();
  FusedPipeline pipeline(config());
  std::atomic<bool> done{false};
  uint64_t max_seen = 0;
  std::thread poller([&] {
    while (!done) {
      max_seen = std::max<uint64_t>(max_seen, pipeline.progress().documents_in.load());
      if (max_seen > 60) pipeline.cancel();
      std::this_thread::yield();
    }
  });
  std::string first = pipeline.run(corpus.paths, out, /*resume=*/false);
  done = true;
  poller.join();
  FusedPipeline resumed(config());
  std::string summary = resumed.run(corpus.paths, out, /*resume=*/true);
  EXPECT_EQ(field(summary, "documents_in"), static_cast<uint64_t>(corpus.documents));
  EXPECT_EQ(field(summary, "documents_kept"), corpus.distinct.size());
}

TEST_F(FusedPipelineTest, StrictFailsOnTheFirstRejectedRecord) {
  Corpus corpus = make_corpus(dir_, 1, 40);
  PipelineConfig c = config();
  c.strict = true;
  FusedPipeline pipeline(c);
  try {
    pipeline.run(corpus.paths, (dir_ / "out").string(), false);
    FAIL() << "strict run finished";
  } catch (const DataError& e) {
    EXPECT_EQ(e.kind(), DataErrorKind::kInput);
    EXPECT_NE(std::string(e.what()).find("shard-0.jsonl:2"), std::string::npos) << e.what();
  }
}

// Note [stages in the pipeline's arena]: a stage's parallel loop runs on the
// pipeline's threads, whatever the batch API's own thread count says.
class ThreadRecordingStage final : public PipelineStage {
 public:
  const char* name() const override { return "threads"; }
  StageMode mode() const override { return StageMode::kParallel; }
  void process(DocBatch& batch) override {
    detail::for_each_document(batch.text.view(), [&](size_t, std::string_view text) {
      uint64_t h = 0;
      for (int round = 0; round < 200; ++round)  // enough work per chunk for other threads to join
        for (char c : text) h = h * 31 + static_cast<uint8_t>(c);
      std::lock_guard<std::mutex> lock(mu_);
      threads_.insert(std::this_thread::get_id());
      sink_ ^= h;
    });
  }
  size_t threads_seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_.size();
  }

 private:
  std::mutex mu_;
  std::set<std::thread::id> threads_;
  uint64_t sink_ = 0;
};

class GeneratedBatches final : public pipeline_internal::BatchSource {
 public:
  explicit GeneratedBatches(int batches) : left_(batches) {}
  bool next(DocBatch& batch) override {
    if (left_-- <= 0) return false;
    batch.text.clear();
    for (int i = 0; i < 4000; ++i) batch.text.push(std::string(200, static_cast<char>('a' + i % 26)));
    batch.reset_decisions();
    return true;
  }

 private:
  int left_;
};

TEST(FusedPipelineThreads, StagesRunTheirLoopsOnThePipelinesThreadsOnly) {
  set_data_num_threads(4);  // what the batch API alone would use
  for (int threads : {1, 2}) {
    PipelineConfig config;
    config.num_threads = threads;
    std::vector<std::unique_ptr<PipelineStage>> stages;
    stages.push_back(std::make_unique<ThreadRecordingStage>());
    auto* recorder = static_cast<ThreadRecordingStage*>(stages.back().get());
    GeneratedBatches source(6);
    std::atomic<bool> cancelled{false};
    size_t batches = 0;
    pipeline_internal::run_stages(config, source, stages, cancelled, [&](pipeline_internal::BatchPtr) { ++batches; });
    EXPECT_EQ(batches, 6u);
    EXPECT_GE(recorder->threads_seen(), 1u);
    EXPECT_LE(recorder->threads_seen(), static_cast<size_t>(threads)) << threads << " pipeline threads";
  }
  set_data_num_threads(0);
}

}  // namespace
}  // namespace luminamoon
