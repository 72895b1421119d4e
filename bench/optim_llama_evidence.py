"""Issue 14's evidence run: every (regime, optimizer, seed) of bench/optim_llama_quality.py as its own
process, many at once on one machine, then one summary.

The training loop is host-bound (transformers' Python forward and backward), so on a GPU with 16
cores several processes at once fill the GPU better than one after another. Runs that share the GPU
do not measure step time (--no-timing); state bytes per parameter are measured from the state
tensors. Each run writes its JSON at every held-out point, so a run stopped at --deadline-s keeps
what it had (its `completed_steps` says how far it got).

  python bench/optim_llama_evidence.py --work /tmp/ev --out OUT --parallel 12 --deadline-s 500
  python bench/optim_llama_evidence.py --work /tmp/ev --out OUT --summarize-only

Arguments after `--` go to every run; `-- --compile` compiles each run's model (about 5 GB a process on the
GPU instead of 7.5, and twice the steps per second: twelve runs of 1,500 steps fit one device call).

With --luminav-after FILE the runs of torch's optimizers and Adam-mini start while the package is
built beside them (bench/gpu_suite.sh's phase build_async writes FILE), so the build's half minute
trains too.

OUT gets fresh.json and repeated.json (every run, in optim_llama_quality.py's format, for
bench/plot_llama_quality.py), summary.json and summary.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ANCHOR = "adamw_fused"


def jobs(args):
    """Fresh regime first (the issue's target), then the repeated one; seed by seed."""
    out = []
    for regime in args.regimes:
        for seed in args.seeds:
            for kind in args.kinds:
                steps = args.fresh_steps if regime == "fresh" else args.distinct_batches * args.epochs
                out.append((regime, kind, seed, steps))
    return out


def launch(job, args):
    regime, kind, seed, steps = job
    path = Path(args.work) / f"{regime}_{kind}_seed{seed}.json"
    cmd = [sys.executable, str(HERE / "optim_llama_quality.py"), "--regime", regime, "--kinds", kind,
           "--seeds", str(seed), "--steps", str(steps), "--distinct-batches", str(args.distinct_batches),
           "--held-every", str(args.held_every), "--no-timing", "--json", str(path), *args.extra]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), TORCHINDUCTOR_COMPILE_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    log = open(Path(args.work) / f"{regime}_{kind}_seed{seed}.log", "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log


def progress_of(job, args):
    regime, kind, seed, _ = job
    try:
        run = json.loads((Path(args.work) / f"{regime}_{kind}_seed{seed}.json").read_text())["runs"]
        return next(iter(run.values()))["completed_steps"]
    except (OSError, ValueError, StopIteration, KeyError):
        return 0


def needs_build(job):
    return job[1].startswith("luminav")


def build_state(args):
    """None while the package's build (--luminav-after) runs, else its exit status."""
    if not args.luminav_after:
        return 0
    try:
        return int(Path(args.luminav_after).read_text().strip() or "1")
    except OSError:
        return None
    except ValueError:
        return 1


def run_all(args):
    Path(args.work).mkdir(parents=True, exist_ok=True)
    queue, running, t0, shown = jobs(args), [], time.time(), 0.0
    while queue or running:
        if time.time() - shown > 60:  # how far each running job got (its last held-out point)
            shown = time.time()
            print(f"{shown - t0:6.0f} s  running: " + ", ".join(
                f"{'/'.join(map(str, job[:3]))}@{progress_of(job, args)}" for job, *_ in running), flush=True)
        built = build_state(args)
        if built not in (None, 0) and any(needs_build(job) for job in queue):
            for job in [j for j in queue if needs_build(j)]:
                queue.remove(job)
                print(f"{time.time() - t0:6.0f} s  build failed (rc {built}): dropped {'/'.join(map(str, job[:3]))}",
                      flush=True)
        # the runs of torch's optimizers start at once; LuminaV's wait for the build
        while len(running) < args.parallel:
            job = next((j for j in queue if built == 0 or not needs_build(j)), None)
            if job is None:
                break
            queue.remove(job)
            running.append((job, *launch(job, args), time.time()))
            print(f"{time.time() - t0:6.0f} s  started {'/'.join(map(str, job[:3]))}", flush=True)
        time.sleep(2)
        for item in list(running):
            job, proc, log, started = item
            if proc.poll() is not None:
                running.remove(item)
                log.close()
                print(f"{time.time() - t0:6.0f} s  {'/'.join(map(str, job[:3]))} rc {proc.returncode} "
                      f"in {time.time() - started:.0f} s", flush=True)
        if time.time() - t0 > args.deadline_s:
            for job, proc, log, _ in running:
                proc.terminate()  # our own child; its JSON holds the last held-out point
                proc.wait()
                log.close()
                print(f"deadline: stopped {'/'.join(map(str, job[:3]))}", flush=True)
            for job in queue:
                print(f"deadline: never started {'/'.join(map(str, job[:3]))}", flush=True)
            return


def stats(values):
    return {"median": statistics.median(values), "mean": statistics.mean(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values)}


# Note [late escape]: on the bigram chain every run sits on a loss plateau (~8.76 nats) for its first
# ~130 steps and then falls to ~1.3. Most runs leave it by step ~200; a run still above 3.0 nats anywhere
# in steps 280-320 left it late, and at 1,500 steps is typically 2-5% behind the runs that did not. Those
# late escapes, not the steady state, decide a median of three seeds (docs/benchmarks.md, row T3j).
LATE_WINDOW = (280, 320)
CURVE_STRIDE = 10  # optim_llama_quality.py keeps every 10th step's training loss


def late_escape(run, threshold):
    """True when the run's training loss is above `threshold` somewhere in LATE_WINDOW, None when its
    curve does not reach the window's end."""
    first, last = (step // CURVE_STRIDE for step in LATE_WINDOW)
    curve = run["curve"]
    if len(curve) <= last:
        return None
    return any(loss > threshold for loss in curve[first:last + 1])


def summarize(args):
    merged, summary, lines = {}, {}, []
    # the per-run files, or merged ones written by an earlier summary (the same format)
    for path in sorted(p for p in Path(args.work).glob("*.json") if p.name != "summary.json"):
        d = json.loads(path.read_text())
        regime = d["regime"]
        keys = ("steps", "lr", "regime", "model", "machine", "versions", "compiled_model")
        m = merged.setdefault(regime, {k: d.get(k) for k in keys})
        m.setdefault("runs", {}).update(d["runs"])
    for log in sorted(Path(args.work).glob("*_seed*.log")):  # runs that failed before their first JSON
        text = log.read_text(errors="replace")
        if "Traceback" in text:
            summary.setdefault("failures", {})[log.stem] = text[-1500:]
    for regime, m in merged.items():
        metric = "held_out" if regime == "fresh" else "final_train"
        table = summary.setdefault(regime, {"metric": metric, "kinds": {}})
        kinds = sorted({k.split("/")[0] for k in m["runs"]}, key=lambda k: (k != ANCHOR, k))
        for kind in kinds:
            runs = {k.split("seed")[1]: r for k, r in m["runs"].items() if k.split("/")[0] == kind}
            anchor = {k.split("seed")[1]: r for k, r in m["runs"].items() if k.split("/")[0] == ANCHOR}
            row = {"per_seed": {s: {"held_out": r["held_out"], "final_train": r["final_train"],
                                    "completed_steps": r["completed_steps"]} for s, r in sorted(runs.items())},
                   "state_bytes_per_param": statistics.median(r["state_bytes_per_param"] for r in runs.values())}
            late = [late_escape(r, args.late_escape_loss) for r in runs.values()]
            row["late_escapes"] = {"count": sum(x is True for x in late), "of": sum(x is not None for x in late)}
            # a ratio only between runs that stopped at the same step (a deadline can cut them apart)
            like = {s for s, r in runs.items() if s in anchor and anchor[s]["completed_steps"] == r["completed_steps"]}
            for key in ("held_out", "final_train"):
                row[key] = stats([r[key] for r in runs.values()])
                paired = [r[key] / anchor[s][key] - 1 for s, r in sorted(runs.items()) if s in like]
                row[f"{key}_vs_adamw_per_seed"] = paired
                if paired:
                    row[f"{key}_vs_adamw_median_ratio"] = stats([runs[s][key] for s in like])["median"] / stats(
                        [anchor[s][key] for s in like])["median"] - 1
            table["kinds"][kind] = row
        lines += [f"### {regime} ({m['steps']} steps; metric: {metric.replace('_', ' ')}; {m['machine']})", "",
                  "| optimizer | B/param | late escapes | per seed | median | mean +- sd | median vs AdamW "
                  "| per-seed vs AdamW |", "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
        for kind, row in table["kinds"].items():
            per = ", ".join(f"{v[metric]:.4f}" + ("" if v["completed_steps"] == m["steps"] else
                                                  f" (at {v['completed_steps']})") for v in row["per_seed"].values())
            vs = row.get(f"{metric}_vs_adamw_median_ratio")
            late = row["late_escapes"]
            lines.append(f"| {kind} | {row['state_bytes_per_param']:.3f} | {late['count']} of {late['of']} | "
                         f"{per} | {row[metric]['median']:.4f} | "
                         f"{row[metric]['mean']:.4f} +- {row[metric]['stdev']:.4f} | "
                         f"{'n/a (other steps)' if vs is None else f'{100 * vs:+.2f}%'} | "
                         + ", ".join(f"{100 * x:+.2f}%" for x in row[f"{metric}_vs_adamw_per_seed"]) + " |")
        # the same comparison at the last held-out point that every run of the regime reached
        common = min(max(step for step, _ in r["held_curve"]) for r in m["runs"].values())
        if common < m["steps"]:
            at = {k: dict(r["held_curve"]).get(common) for k, r in m["runs"].items()}
            anchor = statistics.median(v for k, v in at.items() if k.startswith(ANCHOR + "/"))
            table["at_common_step"] = {"step": common, "kinds": {}}
            lines += ["", f"Held-out loss at step {common}, the last point every run reached:", "",
                      "| optimizer | per seed | median | mean +- sd | median vs AdamW |", "| --- | --- | ---: | ---: | ---: |"]
            for kind in table["kinds"]:
                vals = [v for k, v in sorted(at.items()) if k.split("/")[0] == kind]
                table["at_common_step"]["kinds"][kind] = dict(stats(vals), per_seed=vals,
                                                              median_vs_adamw=statistics.median(vals) / anchor - 1)
                lines.append(f"| {kind} | {', '.join(f'{v:.4f}' for v in vals)} | {statistics.median(vals):.4f} | "
                             f"{statistics.mean(vals):.4f} +- {stats(vals)['stdev']:.4f} | "
                             f"{100 * (statistics.median(vals) / anchor - 1):+.2f}% |")
        lines.append("")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for regime, m in merged.items():
        (out / f"{regime}.json").write_text(json.dumps(m, indent=1))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for name, text in summary.get("failures", {}).items():
        print(f"FAILED {name}:\n{text}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="per-run JSON and logs")
    ap.add_argument("--out", required=True, help="the merged JSON and the summary")
    ap.add_argument("--kinds", nargs="*", default=[ANCHOR, "luminav_tdclm", "adam_mini", "adamw8bit"])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--regimes", nargs="*", default=["fresh", "repeated"], choices=("fresh", "repeated"))
    ap.add_argument("--fresh-steps", type=int, default=1500)
    ap.add_argument("--distinct-batches", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--held-every", type=int, default=250)
    ap.add_argument("--parallel", type=int, default=12, help="processes at once")
    ap.add_argument("--threads", type=int, default=1, help="OMP threads per process")
    ap.add_argument("--luminav-after", metavar="FILE",
                    help="start the LuminaV runs once FILE holds the package build's exit status 0 "
                         "(the others start at once; a nonzero status drops the LuminaV runs)")
    ap.add_argument("--deadline-s", type=float, default=1e9, help="stop what still runs after this many seconds")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--late-escape-loss", type=float, default=3.0,
                    help="a run whose training loss is above this at steps 280-320 left the plateau late "
                         "(Note [late escape]; 3.0 fits the bigram chain, not --text)")
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="after --: passed to every optim_llama_quality.py")
    args = ap.parse_args()
    args.extra = [a for a in args.extra if a != "--"]
    if not args.summarize_only:
        run_all(args)
    summarize(args)


if __name__ == "__main__":
    main()
