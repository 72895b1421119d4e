// Note [a stage's loops run to completion]: a stage's loop inside a pipeline
// whose group is cancelled mid-loop still covers every document.
#include "data/common/parallel.h"

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <atomic>
#include <string>
#include <vector>

#include "luminamoon/text_batch.h"

namespace luminamoon::detail {
namespace {

// 1,000 documents of 1 KB: chunk_bounds cuts them into 16 chunks of 64 KB.
struct Documents {
  std::string bytes = std::string(1000 * 1024, 'x');
  std::vector<int64_t> offsets;
  Documents() {
    for (int64_t i = 0; i <= 1000; ++i) offsets.push_back(i * 1024);
  }
  TextBatchView view() const { return {reinterpret_cast<const uint8_t*>(bytes.data()), offsets.data(), 1000}; }
};

TEST(StageLoops, RunToCompletionWhenThePipelineIsCancelledMidLoop) {
  const Documents docs;
  tbb::task_arena arena(2);
  for (bool in_pipeline_arena : {true, false}) {
    std::atomic<size_t> seen{0};
    arena.execute([&] {
      // The pipeline's cancellation group, as parallel_pipeline's filters run in it; a
      // document of the stage's first chunk cancels it, as a failing filter would.
      tbb::task_group_context pipeline;
      tbb::task_group filters(pipeline);
      filters.run_and_wait([&] {
        StagesInCallersArena stage_call;  // how the pipeline calls a stage
        if (!in_pipeline_arena) t_stages_in_callers_arena = false;  // the batch API's own arena
        for_each_document(docs.view(), [&](size_t i, std::string_view) {
          if (i == 0) pipeline.cancel_group_execution();
          seen.fetch_add(1);
        });
      });
    });
    EXPECT_EQ(seen.load(), 1000u) << (in_pipeline_arena ? "in the pipeline's arena" : "in its own arena");
  }
}

}  // namespace
}  // namespace luminamoon::detail
