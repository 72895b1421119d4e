"""session 17: the factor sums' tile and warps on this GPU (kernel time by torch.profiler, step by CUDA events)"""
import sys, os, itertools, torch
sys.path.insert(0, "bench")
import luminamoon.optim.triton_step as ts
import luminamoon.optim.triton_kernels as tk
from triton_step_bench import CASES, optimizer
from harness import cuda_event_median
from torch.profiler import profile, ProfilerActivity

def measure(name, cols, load_rows, warps):
    tk.FACTOR_WIDE_COLS_2B = cols if CASES[name][1] != torch.float32 else tk.FACTOR_WIDE_COLS_2B
    key = cols
    ts.FACTOR_LOAD_ROWS[key] = load_rows
    ts.FACTOR_WARPS[key] = warps
    shape, dtype, mode, per = CASES[name]
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(shape, device="cuda").to(dtype))
    p.grad = (0.01 * torch.randn(shape, device="cuda")).to(dtype)
    opt = optimizer("luminav_triton", p, mode, "factored")
    for _ in range(3): opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10): opt.step()
        torch.cuda.synchronize()
    sums = [e for e in prof.key_averages() if "factor_sums" in e.key]
    sums_ms = sums[0].device_time_total / sums[0].count / 1000 if sums else float("nan")
    step_ms = cuda_event_median(opt.step, 3, 20)[0]
    from optim_training_loop import graphed_step
    replay_ms = cuda_event_median(graphed_step(opt), 3, 20)[0]
    n = p.numel()
    gbytes = n * p.grad.element_size()
    print(f"{name:28s} cols {cols:3d} load_rows {load_rows:3d} warps {warps:2d}: sums {sums_ms:6.3f} ms "
          f"({gbytes / (sums_ms * 1e-3) / 1e9:5.0f} GB/s)  step {step_ms:6.3f} ms  ({per * n / (step_ms * 1e-3) / 1e9:5.0f} GB/s)  replay {replay_ms:6.3f} ms ({per * n / (replay_ms * 1e-3) / 1e9:5.0f} GB/s)", flush=True)
    del opt, p; torch.cuda.empty_cache()

for rnd in range(2):
    for lr, w in [(128, 4), (128, 8)]:
        measure("tdclm_factored_bf16_master", 256, lr, w)
