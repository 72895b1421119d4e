"""The benchmarks' one timing harness: medians of wall and CPU time, the machine
and its load, and the headline table every suite prints.

Conventions (docs/benchmarks.md): the machines are shared and noisy, so a
figure is a median over repeats, each comparison is timed side by side in the
same run (ours and the anchor interleaved), and a result is reported as a
ratio to that anchor or as a fraction of a floor measured in the same run.
"""
from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Timing:
    """Medians over the repeats of one measured callable."""

    wall_s: float           # seconds of wall time per call
    cpu_s: float            # seconds of process CPU time (all threads) per call
    samples: list[float] = field(default_factory=list)  # wall seconds per call, one per repeat
    result: object = None   # what the last call returned

    @property
    def wall_and_cpu(self) -> tuple[float, float]:
        return self.wall_s, self.cpu_s

    @property
    def spread(self) -> float:
        """(max - min) / median of the wall samples: how noisy the repeats were."""
        if len(self.samples) < 2 or self.wall_s == 0:
            return 0.0
        return (max(self.samples) - min(self.samples)) / self.wall_s


def calls_per_repeat(fn: Callable[[], object], min_time: float) -> int:
    """How often to call `fn` so that one repeat lasts about `min_time` seconds (judged from one call)."""
    if min_time <= 0:
        return 1
    start = time.perf_counter()
    fn()
    return max(1, int(min_time / max(time.perf_counter() - start, 1e-7)))


def _timed_calls(fn: Callable[[], object], calls: int) -> tuple[float, float, object]:
    """(wall, CPU) seconds per call over `calls` back-to-back calls, and the last result."""
    result = None
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        result = fn()
    return (time.perf_counter() - w0) / calls, (time.process_time() - c0) / calls, result


def measure(fn: Callable[[], object], repeats: int = 5, *, min_time: float = 0.0,
            warmup: int = 1) -> Timing:
    """Times `fn` `repeats` times after `warmup` calls.

    With `min_time`, each repeat calls `fn` as often as fits in about that many
    seconds and reports the mean per call: short calls are then not dominated
    by the timer.
    """
    for _ in range(warmup):
        fn()
    calls = calls_per_repeat(fn, min_time)
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        wall, cpu, result = _timed_calls(fn, calls)
        walls.append(wall)
        cpus.append(cpu)
    return Timing(statistics.median(walls), statistics.median(cpus), walls, result)


def measure_side_by_side(fns: dict[str, Callable[[], object]], rounds: int = 5, *,
                         min_time: float = 0.0, warmup: int = 1,
                         before: Callable[[str], object] | None = None) -> dict[str, Timing]:
    """Round-robin: every round times each callable of `fns` once, so that a change
    of the machine's load during the run hits all of them alike; medians over rounds.
    `before(name)`, when given, runs ahead of each of name's timed repeats, outside the
    timing (e.g. removing what the previous call wrote)."""
    calls = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        calls[name] = calls_per_repeat(fn, min_time)
    walls: dict[str, list[float]] = {name: [] for name in fns}
    cpus: dict[str, list[float]] = {name: [] for name in fns}
    results: dict[str, object] = {}
    for _ in range(rounds):
        for name, fn in fns.items():
            if before is not None:
                before(name)
            wall, cpu, results[name] = _timed_calls(fn, calls[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {name: Timing(statistics.median(walls[name]), statistics.median(cpus[name]), walls[name],
                         results[name]) for name in fns}


def cuda_event_median(fn: Callable[[], object], warmup: int, reps: int) -> tuple[float, list[float]]:
    """Median milliseconds of fn() between CUDA events on the current stream, and every sample."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), times


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def machine() -> str:
    """One line: CPU (and GPU), cores, load averages and the UTC time."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    gpu = gpu_model()
    now = datetime.datetime.now(datetime.timezone.utc)
    return (f"{cpu_model()}, {os.cpu_count()} cores" + (f", {gpu}" if gpu else "")
            + f"; load {load}; {now:%Y-%m-%d %H:%M} UTC")


@dataclass
class Row:
    """One line of the headline table."""

    what: str           # what is measured, with its size
    ours: str           # our figure, with its unit
    anchor: str         # the anchor's name and figure ("" where the row is against a floor)
    ratio: str          # ours / anchor (or % of the floor), as the row defines it
    target: str = ""    # the target, and whether it is met


def table(rows: list[Row], title: str) -> str:
    """The headline table as Markdown, with the machine line under its title."""
    lines = [f"## {title}", "", f"machine: {machine()}", "",
             "| what | ours | anchor | ratio | target |", "|---|---|---|---|---|"]
    lines += [f"| {r.what} | {r.ours} | {r.anchor} | {r.ratio} | {r.target} |" for r in rows]
    return "\n".join(lines)


def target_note(value: float, target: float, *, higher_is_better: bool) -> str:
    """'met' or 'missed' against a target, with the target written out."""
    met = value >= target if higher_is_better else value <= target
    sign = ">=" if higher_is_better else "<="
    return f"{sign} {target:g}: {'met' if met else 'missed'}"
