"""Where the triton-aot step's GPU time goes in the 98M Llama (111 tensors), beside the cuda backend's and the
Triton JIT's: opt.step() x 5 under torch.profiler, the kernels grouped by name (count, total and mean GPU time).
Run from the repository root with bench/ on PYTHONPATH (dev30b.sh)."""
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "bench")
from optim_training_loop import llama, make_optimizer  # noqa: E402

cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
for kind in sys.argv[1:] or ["luminav_tdclm", "luminav_tdclm_triton", "luminav_tdclm_triton_aot"]:
    model = llama("cuda", **cfg)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, device="cuda", generator=gen) * 1e-3
    opt = make_optimizer(kind, model)
    for _ in range(3):
        opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            opt.step()
        torch.cuda.synchronize()
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            by_name[e.name][0] += 1
            by_name[e.name][1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    total = sum(t for _, t in by_name.values())
    print(f"{kind}: {sum(c for c, _ in by_name.values()) / 5:.0f} kernels a step, {total / 5 / 1e3:.3f} ms of kernel "
          "time a step (busy, not wall)")
    for name, (count, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"  {name[:60]:60s} {count / 5:6.0f} a step  {t / 5 / 1e3:7.3f} ms  {t / count:7.2f} us each")
    del opt, model
    torch.cuda.empty_cache()
