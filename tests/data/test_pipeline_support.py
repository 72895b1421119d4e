"""Helpers shared by the pipeline tests (no tests here): run the CLI, read any
output format back with pyarrow, compare runs."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

CLI = [sys.executable, "-m", "luminamoon.data.cli"]


def run_cli(args, env=None, timeout=120, **kw):
    full_env = dict(os.environ)
    full_env.pop("LUMINAMOON_TEST_CRASH_AT", None)
    if env:
        full_env.update(env)
    return subprocess.run(CLI + list(args), env=full_env, capture_output=True, text=True,
                          timeout=timeout, **kw)


def read_part(path: str):
    """One part file as a pyarrow Table, whatever its format."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.json as pajson
    import pyarrow.parquet as pq
    if path.endswith(".parquet"):
        return pq.read_table(path)
    if path.endswith(".arrow"):
        with ipc.open_file(path) as reader:
            return reader.read_all()
    if path.endswith(".arrows"):
        with ipc.open_stream(path) as reader:
            return reader.read_all()
    if path.endswith(".ndjson"):
        if os.path.getsize(path) == 0:
            return pa.table({})
        return pajson.read_json(path)
    raise ValueError(path)


def part_files(directory: str) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(directory, "part-*")) if not p.endswith(".tmp"))


def read_rows(directory: str) -> list[dict]:
    """Every row of every part, in part-name order (= stream order)."""
    rows: list[dict] = []
    for path in part_files(directory):
        rows.extend(read_part(path).to_pylist())
    return rows


def summary_counts(output: str) -> dict:
    with open(os.path.join(output, "summary.json")) as f:
        summary = json.load(f)
    return {k: v for k, v in summary.items() if k not in ("this_run",)}


def write_jsonl(path: str, records) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n")


def long_text(seed: int, words: int = 80) -> str:
    """An English-like text that passes the default quality checks."""
    import random
    rng = random.Random(seed)
    vocab = ["river", "mountain", "garden", "window", "letter", "market", "winter", "summer",
             "teacher", "village", "story", "morning", "question", "answer", "kitchen", "friend",
             "journey", "harbor", "forest", "bridge", "painter", "doctor", "lantern", "meadow"]
    stop = ["the", "be", "to", "of", "and", "that", "have", "with"]
    out = []
    for i in range(words):
        out.append(rng.choice(stop) if i % 4 == 0 else rng.choice(vocab) + str(rng.randrange(1000)))
    return " ".join(out) + "."
