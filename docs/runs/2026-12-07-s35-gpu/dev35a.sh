#!/bin/bash
# Session 35, call 1 (issues 13, 14, 18): issue 18's whole benchmark in one run on main (AOT set build/aot_s35m,
# built here from main's kernels), on whichever card comes: session 33's dev33b.sh, that is every case at 2^28 for
# nvcc / Triton JIT / Triton AOT / torch fused AdamW, eager and replayed, with the JIT's first-step compile time (the
# TD-CLM tensor rows measure the JIT finalize mend, 517621d), then the Llama 98M loop (torch fused, TD-CLM on nvcc,
# the Triton JIT and the Triton AOT kernels). Carry .gpu_bundle, build/aot_s35m.
AOT=build/aot_s35m exec bash docs/runs/2026-12-07-s33-gpu/dev33b.sh
