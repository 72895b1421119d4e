"""Larger inputs from real text: documents of 20-120 random non-empty lines of
the real-text corpus (bench/real_text_corpus.py), as plain JSONL, until the
file holds --gb gigabytes. For memory and throughput runs of the CLI at sizes
the machine's documentation alone does not reach.

    python bench/real_text_recombine.py --gb 2 OUT.jsonl [--seed 1]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import real_text_corpus  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--gb", type=float, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus-cache", default="/tmp/luminamoon-real-text.jsonl.gz")
    a = ap.parse_args()
    lines = [x for t in real_text_corpus.cached_texts(a.corpus_cache) for x in t.split("\n") if x.strip()]
    rng = random.Random(a.seed)
    total, i = 0, 0
    with open(a.out, "w", encoding="utf-8") as out:
        while total < a.gb * 1e9:
            text = "\n".join(rng.choice(lines) for _ in range(rng.randint(20, 120)))
            row = json.dumps({"id": f"g{i}", "text": text}, ensure_ascii=False) + "\n"
            out.write(row)
            total += len(row)
            i += 1
    print(json.dumps({"documents": i, "bytes": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
