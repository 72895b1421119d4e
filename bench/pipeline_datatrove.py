"""The datatrove side of bench/pipeline_bench.py: the same stages on datatrove's
LocalPipelineExecutor. Usage: pipeline_datatrove.py CORPUS_DIR WORK_DIR WORKERS.
Prints one JSON line: documents read and kept."""
from __future__ import annotations

import json
import math
import os
import re
import sys
from collections import Counter


def main() -> int:
    corpus, work, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, \
        MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter, LambdaFilter
    from datatrove.pipeline.formatters import PIIFormatter
    from datatrove.pipeline.formatters.base import BaseFormatter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.hashing import HashConfig

    class CleanFormatter(BaseFormatter):
        """The TextCleaner's steps (spec section 2) in Python."""
        name = "clean"
        _controls = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
        _trailing = re.compile(r"[ \t]+$", re.M)
        _blank_runs = re.compile(r"\n{3,}")

        def format(self, text: str) -> str:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            text = self._controls.sub("", text)
            text = self._trailing.sub("", text).strip(" \t\n")
            return self._blank_runs.sub("\n\n", text)

    def entropy_ok(doc) -> bool:
        counts = Counter(doc.text)
        n = len(doc.text)
        if n == 0:
            return False
        return -sum(c / n * math.log2(c / n) for c in counts.values()) >= 3.0

    config = MinhashConfig(n_grams=5, num_buckets=8, hashes_per_bucket=8, hash_config=HashConfig(precision=64))
    tasks = 8
    filtered, sigs = os.path.join(work, "filtered"), os.path.join(work, "signatures")
    buckets, remove = os.path.join(work, "buckets"), os.path.join(work, "remove_ids")
    logs = os.path.join(work, "logs")
    stage1 = LocalPipelineExecutor(pipeline=[
        JsonlReader(corpus, glob_pattern="*.jsonl"),
        CleanFormatter(),
        LambdaFilter(lambda d: len(d.text) > 0),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        LambdaFilter(entropy_ok),
        JsonlWriter(filtered, compression=None),
    ], tasks=tasks, workers=workers, logging_dir=os.path.join(logs, "1"))
    stage2 = LocalPipelineExecutor(pipeline=[
        JsonlReader(filtered), MinhashDedupSignature(output_folder=sigs, config=config),
    ], tasks=tasks, workers=workers, logging_dir=os.path.join(logs, "2"), depends=stage1)
    stage3 = LocalPipelineExecutor(pipeline=[
        MinhashDedupBuckets(input_folder=sigs, output_folder=buckets, config=config),
    ], tasks=config.num_buckets, workers=workers, logging_dir=os.path.join(logs, "3"), depends=stage2)
    stage4 = LocalPipelineExecutor(pipeline=[
        MinhashDedupCluster(input_folder=buckets, output_folder=remove, config=config),
    ], tasks=1, workers=1, logging_dir=os.path.join(logs, "4"), depends=stage3)
    stage5 = LocalPipelineExecutor(pipeline=[
        JsonlReader(filtered), MinhashDedupFilter(input_folder=remove), PIIFormatter(),
        JsonlWriter(os.path.join(work, "output"), compression=None),
    ], tasks=tasks, workers=workers, logging_dir=os.path.join(logs, "5"), depends=stage4)
    stage5.run()
    documents = sum(1 for f in os.listdir(corpus) if f.endswith(".jsonl")
                    for _ in open(os.path.join(corpus, f), encoding="utf-8"))
    kept = sum(1 for f in os.listdir(os.path.join(work, "output"))
               for _ in open(os.path.join(work, "output", f), encoding="utf-8"))
    print(json.dumps({"documents": documents, "kept": kept}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
