"""Peak memory and per-CPU-second rate of the whole CLI (`luminamoon data run`)
on inputs of several sizes, for one or more builds side by side: each input
runs once per build per round, builds interleaved, medians over the rounds.
Peak RSS, user and system time come from wait4() on the child, the figures
/usr/bin/time -v prints (Maximum resident set size, User time, System time).

    python bench/real_text_recombine.py --gb 2 /tmp/corpus-2GB.jsonl   # inputs
    python bench/cli_peak_memory.py --build before=/work/main/.venv/bin/python \\
        --build after=.venvs/NAME/bin/python --rounds 1 /tmp/corpus-*.jsonl [-- EXTRA CLI ARGS]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402


def input_bytes(path: str) -> int:
    """Bytes of JSON in the input (a .gz file counts its decompressed bytes)."""
    if os.path.isdir(path):
        return sum(input_bytes(os.path.join(path, f)) for f in sorted(os.listdir(path)))
    if path.endswith(".gz"):
        import gzip
        with gzip.open(path, "rb") as f:
            return sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), b""))
    return os.path.getsize(path)


def run_cli(python: str, inputs: str, out_dir: str, extra: list[str]) -> dict:
    """One CLI run: peak RSS (MB), CPU seconds (user, sys) and wall seconds."""
    import time
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [python, "-m", "luminamoon.cli", "data", "run", inputs, "-o", out_dir, "--no-resume",
           "--progress", "none", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"peak_rss_mb": usage.ru_maxrss / 1024, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
            "wall_s": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="input files or directories, one CLI run each")
    ap.add_argument("--build", action="append", required=True, metavar="NAME=PYTHON",
                    help="a build: the Python interpreter that imports it")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default=tempfile.gettempdir())
    ap.add_argument("--json")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: more CLI arguments
    a = ap.parse_args(argv[:cut])
    extra = ["--threads", str(a.threads)] + argv[cut + 1:]
    builds = dict(b.split("=", 1) for b in a.build)
    print(harness.machine())
    results: dict[str, dict[str, list[dict]]] = {b: {i: [] for i in a.inputs} for b in builds}
    for _ in range(a.rounds):
        for inp in a.inputs:
            for name, python in builds.items():
                r = run_cli(python, inp, os.path.join(a.work, f"cli-peak-{os.getpid()}-{name}"), extra)
                results[name][inp].append(r)
                print(json.dumps({"build": name, "input": inp, **r}), flush=True)
    rows = []
    for name in builds:
        for inp in a.inputs:
            runs = results[name][inp]
            cpu = statistics.median(r["user_s"] + r["sys_s"] for r in runs)
            mb = input_bytes(inp) / 1e6
            rows.append({"build": name, "input": os.path.basename(inp), "input_mb": round(mb, 1),
                         "peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in runs), 1),
                         "cpu_s": round(cpu, 2),
                         "wall_s": round(statistics.median(r["wall_s"] for r in runs), 2),
                         "mb_per_cpu_s": round(mb / cpu, 1)})
    print(f"| build | input | MB | peak RSS MB | CPU s | wall s | MB per CPU-s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['build']} | {r['input']} | {r['input_mb']} | {r['peak_rss_mb']} | {r['cpu_s']} | "
              f"{r['wall_s']} | {r['mb_per_cpu_s']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": harness.machine(), "extra": extra, "rows": rows, "runs": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
