"""Same-run A/B of MinHash `oph` signature speed between builds, one thread,
rounds interleaved (the order flips every round), medians of MB per CPU-second:
C++ drivers (bench/minhash_oph_breakdown.cc linked against each build's
libluminamoon_data.a) and/or installed `luminamoon` packages (a folder that
holds the package, put first on sys.path in a child process).

    python bench/minhash_build_ab.py --docs docs.nul \\
        --driver before=/tmp/before/oph_breakdown --driver after=/tmp/after/oph_breakdown \\
        --package before=/tmp/before-python --package after=.venvs/x/lib/python3.11/site-packages \\
        [--rounds 6] [--reps 5] [--json out.json]

docs.nul: the documents NUL-separated (the first 8,000 of
bench/real_text_corpus.py's corpus for row D7). The load average is printed
with every round: the machines are shared.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# Run in a child with the package folder first on sys.path: CPU seconds of
# MinHashLSH.signatures (one thread) per rep, one figure a line.
PACKAGE_CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import luminamoon.data as data
texts = open(sys.argv[2], "rb").read().split(b"\0")[:-1]
mb = sum(map(len, texts)) / 1e6
tensor = data.StringTensor(texts)
lsh = data.MinHashLSH(scheme="oph", num_threads=1)
lsh.signatures(tensor, num_threads=1)
for _ in range(int(sys.argv[3])):
    c0 = time.process_time()
    lsh.signatures(tensor, num_threads=1)
    print(round(mb / (time.process_time() - c0), 1))
print(data.__file__, file=sys.stderr)
"""


def named(pairs: list[str]) -> list[tuple[str, str]]:
    out = []
    for p in pairs:
        name, sep, path = p.partition("=")
        if not sep:
            raise SystemExit(f"expected NAME=PATH, got {p!r}")
        out.append((name, path))
    return out


def run_one(kind: str, path: str, docs: str, reps: int) -> list[float]:
    if kind == "driver":
        cmd = [path, docs, str(reps), "signatures"]
    else:
        cmd = [sys.executable, "-c", PACKAGE_CHILD, path, docs, str(reps)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return [float(x) for x in done.stdout.split()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", required=True)
    ap.add_argument("--driver", action="append", default=[])
    ap.add_argument("--package", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = [("driver", n, p) for n, p in named(a.driver)] + [("package", n, p) for n, p in named(a.package)]
    if not runs:
        raise SystemExit("nothing to run: give --driver and/or --package")
    samples: dict[str, list[float]] = {f"{k} {n}": [] for k, n, _ in runs}
    loads = []
    for r in range(a.rounds):
        for kind, name, path in (runs if r % 2 == 0 else runs[::-1]):
            samples[f"{kind} {name}"] += run_one(kind, path, a.docs, a.reps)
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}: load {loads[-1]:.1f}", flush=True)
    rows = [{"build": key, "median": statistics.median(v), "q1": statistics.quantiles(v, n=4)[0],
             "q3": statistics.quantiles(v, n=4)[2], "samples": v} for key, v in samples.items()]
    if a.json:
        Path(a.json).write_text(json.dumps(
            {"docs": a.docs, "rounds": a.rounds, "reps": a.reps, "load_per_round": loads, "rows": rows}, indent=1))
    table = [f"| {r['build']} | {r['median']:.1f} | {r['q1']:.1f}-{r['q3']:.1f} | {len(r['samples'])} |" for r in rows]
    print("\n| build | median MB per CPU-s | quartiles | samples |\n| --- | ---: | --- | ---: |\n" + "\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
