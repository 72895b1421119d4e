"""Session 38, for a later call: where a TD-CLM step's GPU time goes at 2^28 (16384 x 16384), kernel by kernel
(torch.profiler), for the nvcc kernels and the Triton JIT. Row G6 found pass 2 of the nvcc factored bf16 + masters
step at about copy speed on an H100 (Nsight Compute) and 0.45 ms of the 2.32 ms step outside it, of which the factor
sums' read of the gradient needs about 0.18 ms at copy speed: this lists the rest. From the repository root:
  PYTHONPATH=<site>:bench python3 dev38b_kernels.py [case ...]"""
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "bench")
from triton_step_bench import CASES, TD_FACTOR, copy_gbs, optimizer  # noqa: E402


def steps_by_gaps(events, gap_us: float = 40.0) -> list[list]:
    """The kernels of each step: a gap above gap_us (a sync and a host call lie between) starts the next."""
    events = sorted(events, key=lambda e: e.time_range.start)
    groups, current = [], []
    for e in events:
        if current and e.time_range.start - max(x.time_range.end for x in current) > gap_us:
            groups.append(current)
            current = []
        current.append(e)
    if current:
        groups.append(current)
    return groups


def profile_case(name: str, kind: str, steps: int = 6) -> None:
    shape, dtype, mode, bytes_per = CASES[name]
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(shape, device="cuda").to(dtype))
    p.grad = (0.01 * torch.randn(shape, device="cuda")).to(dtype)
    opt = optimizer(kind, p, mode, TD_FACTOR.get(name, "factored"))
    for _ in range(3):
        opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            opt.step()
            torch.cuda.synchronize()
    groups = steps_by_gaps([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA])
    spans = [g[-1].time_range.end - g[0].time_range.start for g in groups]
    busy = [sum(e.time_range.end - e.time_range.start for e in g) for g in groups]
    print(f"== {name} {kind}: {len(groups)} steps, {len(groups[-1])} kernels a step; span median "
          f"{statistics.median(spans):.1f} us, kernels busy {statistics.median(busy):.1f} us", flush=True)
    per: dict[tuple[int, str], list[float]] = {}
    for g in groups[1:]:
        for i, e in enumerate(g):
            per.setdefault((i, e.name[:80]), []).append(e.time_range.end - e.time_range.start)
    g = groups[len(groups) // 2]
    for i, e in enumerate(g):
        gap = e.time_range.start - (g[i - 1].time_range.end if i else e.time_range.start)
        d = statistics.median(per.get((i, e.name[:80]), [e.time_range.end - e.time_range.start]))
        print(f"  {i:3d} gap {gap:6.1f} us  dur {d:8.1f} us  {e.name[:90]}", flush=True)
    del opt, p
    torch.cuda.empty_cache()


if __name__ == "__main__":
    print(f"{torch.cuda.get_device_name()}: device copy {copy_gbs(1 << 28):.0f} GB/s", flush=True)
    for case in sys.argv[1:] or ["tdclm_factored_bf16_master", "tdclm_factored_f32"]:
        for kind in ("luminav_nvcc", "luminav_triton"):
            profile_case(case, kind)
