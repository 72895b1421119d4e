"""Training-ready data (issue 21): the tokenization stage against `tokenizers` called directly, and the
TokenLoader's packed tokens/s against the Llama training step's consumption.

    .venv/bin/python bench/tokens_bench.py [--size-mb 8] [--repeats 5]

Tokenize: the same documents (a generated corpus, luminamoon.data.cli.generate_corpus) through
(a) `Tokenizer.encode_batch_fast` + the ids of every encoding, from Python (the floor: the library
itself), and (b) `luminamoon.data.tokenize_corpus` (C++ reader, encode, EOS, C++ shard writer with
fsync, manifest and checkpoint). Each side runs in a child process with RAYON_RS_NUM_CPUS=1, so the
figures are tokens/s on one core; sides alternate, medians of --repeats.
Loader: TokenLoader over the shards, seq 512 x batch 16 (the Llama run's batch), num_workers 0 and 2;
packed tokens/s delivered to a loop that only touches the batch, against 16 x 512 tokens per 35 ms
(the H200 loop's step, docs/benchmarks.md issue 13/14).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

STEP_TOKENS, STEP_SECONDS = 16 * 512, 0.035

CHILD_DIRECT = r"""
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
texts = [json.loads(l)["text"] for p in sys.argv[2:] for l in open(p, encoding="utf-8")]
t = time.perf_counter()
n = 0
for i in range(0, len(texts), 1024):
    for e in tok.encode_batch_fast(texts[i:i + 1024]):
        n += len(e.ids) + 1
print(json.dumps({"tokens": n, "seconds": time.perf_counter() - t}))
"""

CHILD_STAGE = r"""
import json, shutil, sys, tempfile, time
from luminamoon.data import tokenize_corpus
out = tempfile.mkdtemp()
t = time.perf_counter()
s = tokenize_corpus(sys.argv[2:], out, sys.argv[1], megatron_prefix=None)
dt = time.perf_counter() - t
shutil.rmtree(out)
print(json.dumps({"tokens": s["tokens"], "seconds": dt}))
"""


def child(code: str, args: list[str]) -> dict:
    env = dict(os.environ, RAYON_RS_NUM_CPUS="1", TOKENIZERS_PARALLELISM="true")
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def loader_rate(tokens_dir: str, workers: int, batches: int) -> float:
    from luminamoon.data import TokenLoader
    loader = TokenLoader(tokens_dir, 512, 16, num_workers=workers, num_epochs=None, seed=0)
    it = iter(loader)
    next(it)  # workers started
    t = time.perf_counter()
    n = 0
    for _ in range(batches):
        b = next(it)
        n += b["input_ids"].numel()
    return n / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=float, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batches", type=int, default=300)
    args = ap.parse_args()
    from luminamoon.data import tokenize_corpus, train_bpe_tokenizer
    from luminamoon.data.cli import generate_corpus
    work = tempfile.mkdtemp(prefix="lm-tokens-bench-")
    per_shard = int(args.size_mb * 1e6 / 1450 / 4) + 1
    generated = generate_corpus(os.path.join(work, "generated"), shards=4, docs_per_shard=per_shard, seed=3)
    # Re-written through json.dumps so that both sides read the same documents (the generator plants
    # malformed lines and raw control characters for the pipeline's own tests).
    shards = []
    for k, path in enumerate(generated):
        out = os.path.join(work, f"corpus-{k}.jsonl")
        with open(path, encoding="utf-8", errors="replace") as f, open(out, "w", encoding="utf-8") as g:
            for line in f:
                try:
                    g.write(json.dumps({"text": json.loads(line, strict=False)["text"]}) + "\n")
                except (ValueError, KeyError, TypeError):
                    pass
        shards.append(out)
    texts = [json.loads(l)["text"] for l in open(shards[0], encoding="utf-8")][:2000]
    tok_path = os.path.join(work, "tokenizer.json")
    train_bpe_tokenizer(texts, vocab_size=8192, path=tok_path)
    size = sum(os.path.getsize(p) for p in shards)
    direct, stage = [], []
    for _ in range(args.repeats):
        d = child(CHILD_DIRECT, [tok_path, *shards])
        s = child(CHILD_STAGE, [tok_path, *shards])
        assert d["tokens"] == s["tokens"], (d, s)
        direct.append(d["tokens"] / d["seconds"])
        stage.append(s["tokens"] / s["seconds"])
    tokens_dir = os.path.join(work, "tokens")
    summary = tokenize_corpus(shards, tokens_dir, tok_path)
    need = STEP_TOKENS / STEP_SECONDS
    rates = {w: statistics.median(loader_rate(tokens_dir, w, args.batches) for _ in range(3)) for w in (0, 2)}
    result = {
        "corpus_mb": size / 1e6, "tokens": summary["tokens"], "load_avg": os.getloadavg(),
        "tokenize_direct_tokens_per_s_core": statistics.median(direct),
        "tokenize_stage_tokens_per_s_core": statistics.median(stage),
        "stage_over_direct": statistics.median(stage) / statistics.median(direct),
        "direct_runs": direct, "stage_runs": stage,
        "loader_tokens_per_s": rates, "training_step_tokens_per_s": need,
        "loader_margin": {w: r / need for w, r in rates.items()},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
