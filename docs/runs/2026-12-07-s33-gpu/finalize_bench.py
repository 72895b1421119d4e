"""finalize_kernel alone at 65,536 partials (a 2^28-element tensor's; TD-CLM tensor round 0 and the
CLM finite check's finalize), from the kernels file of PYTHONPATH's luminamoon: CUDA-event median of
200 launches, and the s it forms (to compare the bits of two kernels files)."""
import sys
import torch
import triton
from luminamoon.optim import triton_kernels as tk

programs = int(sys.argv[1]) if len(sys.argv) > 1 else 65536
gen = torch.Generator(device="cuda").manual_seed(1)
partials = torch.rand(5 * programs, dtype=torch.float64, device="cuda", generator=gen)
partials[:programs] = 0.0  # no non-finite gradient
words = torch.tensor([0, tk.NO_BAD, 0, 0], dtype=torch.int32, device="cuda")
gl = torch.zeros(4, device="cuda")
v = torch.full((1,), 0.5, device="cuda")
k = torch.ones(4, device="cuda")
for kind in (1, 0):
    def launch():
        tk.finalize_kernel[(1,)](partials, programs, gl, words, k, v, v, v, v, 1 << 28, 1, 1 << 28, 1, 0, 0.999,
                                 0.001, 0.0, ROUND_GRAD=True, ROUND_UPDATE=False, CHECK_FINITE=True, KIND=kind,
                                 CAUTIOUS=False, BOUND_TENSOR=False, BLOCK=tk.FINALIZE_BLOCK, num_warps=tk.NUM_WARPS,
                                 enable_fp_fusion=False)
    for _ in range(5):
        launch()
    times = []
    for _ in range(200):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); launch(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    print(f"finalize kind {kind} partials {programs}: median {times[100]:.1f} us (p10 {times[20]:.1f}, p90 "
          f"{times[180]:.1f}); s {gl[0].item()!r} bits {gl[0].view(torch.int32).item():#x}")
