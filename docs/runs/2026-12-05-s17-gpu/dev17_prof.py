"""session 17: which Triton kernel makes the bf16 + masters factored step slow on this GPU (torch.profiler)"""
import sys, os, torch
sys.path.insert(0, "bench")
from triton_step_bench import CASES, optimizer, TD_FACTOR
from torch.profiler import profile, ProfilerActivity
for name in sys.argv[1:]:
    shape, dtype, mode, per = CASES[name]
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(shape, device="cuda").to(dtype))
    p.grad = (0.01 * torch.randn(shape, device="cuda")).to(dtype)
    opt = optimizer("luminav_triton", p, mode, TD_FACTOR.get(name, "factored"))
    for _ in range(5): opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20): opt.step()
        torch.cuda.synchronize()
    print(f"== {name} (block={os.environ.get('LUMINAV_TRITON_APPLY_BLOCK','default')} warps={os.environ.get('LUMINAV_TRITON_NUM_WARPS','default')})")
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:8]:
        print(f"  {e.key[:70]:70s} calls {e.count:4d}  avg {e.device_time_total / max(e.count,1) / 1000:8.3f} ms")
    del opt, p; torch.cuda.empty_cache()
