"""How torch's intra-op threads and the simd backend's oneTBB threads share the cores.

A training-loop shape: a torch op that uses torch's OpenMP pool (a matmul), then
at once a LuminaV step (simd backend, CLM fp32) of N elements, repeated. The
step's time right after the torch op is compared with its time after the pool
has gone idle (a 20 ms pause), and the torch op's time right after a step
against its time after a pause, under OMP_WAIT_POLICY unset (libgomp's default:
workers spin for a while after each parallel region) and PASSIVE (they sleep at
once), and with luminav's thread count equal to torch's or forced to 1. Each
configuration runs in a fresh process (the OpenMP settings are read at start).

    .venvs/simd/bin/python bench/optim_simd_torch_threads.py [--n-log2 18] [--reps 200]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time
import torch
sys.path.insert(0, {bench!r})
from optim_simd_throughput import LuminaVCase
from luminamoon import _native
n, reps, lv_threads = {n}, {reps}, {lv_threads}
if lv_threads:
    _native.set_num_threads(lv_threads)
case = LuminaVCase("clm_f32", n, "simd")
a = torch.randn(512, 512); b = torch.randn(512, 512)
for _ in range(20):
    a @ b; case.step()
after_op, after_idle, op_after_step, op_after_idle = [], [], [], []
for _ in range(reps):
    a @ b
    t = time.perf_counter(); case.step(); after_op.append(time.perf_counter() - t)
    t = time.perf_counter(); a @ b; op_after_step.append(time.perf_counter() - t)
    time.sleep(0.02)
    t = time.perf_counter(); case.step(); after_idle.append(time.perf_counter() - t)
    time.sleep(0.02)
    t = time.perf_counter(); a @ b; op_after_idle.append(time.perf_counter() - t)
med = lambda xs: 1e6 * statistics.median(xs)
print(json.dumps({{"after_op_us": med(after_op), "after_idle_us": med(after_idle),
                  "op_after_step_us": med(op_after_step), "op_after_idle_us": med(op_after_idle),
                  "torch_threads": torch.get_num_threads(), "luminav_threads": _native.get_num_threads()}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-log2", type=int, default=18)
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    bench = os.path.dirname(os.path.abspath(__file__))
    print("| OMP_WAIT_POLICY | torch threads | luminav threads | step right after a torch op (us) "
          "| step after 20 ms idle (us) | torch op right after a step (us) | torch op after 20 ms idle (us) |")
    print("|---|---|---|---|---|---|---|")
    for policy in (None, "PASSIVE"):
        for lv_threads in (0, 1):
            env = dict(os.environ)
            env.pop("OMP_WAIT_POLICY", None)
            if policy:
                env["OMP_WAIT_POLICY"] = policy
            code = CHILD.format(bench=bench, n=1 << args.n_log2, reps=args.reps, lv_threads=lv_threads)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                 check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f"| {policy or 'unset'} | {r['torch_threads']} | {r['luminav_threads']} "
                  f"| {r['after_op_us']:.0f} | {r['after_idle_us']:.0f} "
                  f"| {r['op_after_step_us']:.0f} | {r['op_after_idle_us']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
