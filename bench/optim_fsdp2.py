"""LuminaV under FSDP2 (fully_shard) against torch's AdamW, one process per GPU (issues 13 and 23).

The Llama-style model of bench/optim_training_loop.py (about 100M parameters), bf16 parameters
sharded by FSDP2 (Shard(0) DTensors), synthetic tokens, every optimizer under the same setup in one
run: torch.optim.AdamW fused and foreach (on the bf16 parameters, torch's own state in bf16), and
LuminaV CLM and TD-CLM (fp32 masters, stochastic rounding; the sharded step all-reduces one float64
exchange tensor per exchange, Note [sharded step] in luminamoon/optim/torch_optimizer.py). For each:
the whole training step (zero_grad, forward, backward with FSDP2's reduce-scatter, step; median of
windows, no sync inside a window) and the GPU time of opt.step() (CUDA events around the call), the
optimizer's share of the step, and LuminaV's per-rank exchange.

NVLink multicast stays off in every process (the GPU machines' instructions): NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 are set here before torch.distributed
starts and should be set for torchrun too:

  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
    torchrun --standalone --nproc-per-node 8 bench/optim_fsdp2.py --json out.json
  torchrun --standalone --nproc-per-node 2 bench/optim_fsdp2.py --device cpu --small   # gloo smoke run
"""
from __future__ import annotations

import os

for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_key] = _value  # before torch.distributed or NCCL read them

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optim_training_loop import llama  # noqa: E402

from luminamoon.optim import LuminaV  # noqa: E402

KINDS = ("torch_fused", "torch_foreach", "luminav_clm", "luminav_tdclm")


def make_optimizer(kind, model, td_factor):
    common = dict(lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    if kind == "torch_fused":
        return torch.optim.AdamW(model.parameters(), fused=True, **common)
    if kind == "torch_foreach":
        return torch.optim.AdamW(model.parameters(), foreach=True, **common)
    if kind == "luminav_clm":
        return LuminaV(model.parameters(), **common)
    if kind == "luminav_tdclm":
        return LuminaV(model.parameters(), mode="tdclm", td_factor=td_factor, **common)
    raise ValueError(kind)


def sharded_model(cfg, device):
    from torch.distributed.fsdp import fully_shard
    model = llama(device, **cfg).to(torch.bfloat16)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


class Loop:
    def __init__(self, model, opt, batch, seq, vocab, device):
        self.model, self.opt, self.device = model, opt, device
        gen = torch.Generator().manual_seed(1 + dist.get_rank())
        self.batches = [torch.randint(0, vocab, (batch, seq + 1), generator=gen).to(device) for _ in range(4)]
        self.i = 0

    def forward_backward(self):
        tokens = self.batches[self.i % len(self.batches)]
        self.i += 1
        logits = self.model(input_ids=tokens[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                 tokens[:, 1:].reshape(-1))
        loss.backward()
        return loss

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.forward_backward()
        self.opt.step()
        return loss


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def whole_step_ms(loop, steps, windows):
    out = []
    for _ in range(windows):
        sync(loop.device)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            loop.step()
        sync(loop.device)
        out.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(out)


def opt_step_ms(loop, reps):
    """GPU time of opt.step() (CUDA events); on the CPU its wall time."""
    times = []
    for _ in range(reps):
        loop.opt.zero_grad(set_to_none=True)
        loop.forward_backward()
        sync(loop.device)
        if loop.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loop.opt.step()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            loop.opt.step()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--small", action="store_true", help="a small model (smoke runs)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--td-factor", default="factored")
    parser.add_argument("--json")
    args = parser.parse_args()

    device = args.device
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = (dict(hidden=128, layers=2, heads=4, mlp=256, vocab=1024, seq=64) if args.small else
           dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512))
    results = {"world_size": world, "device": device, "model": cfg, "batch_per_rank": args.batch,
               "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                       "NVSHMEM_DISABLE_NVLS")},
               "torch": torch.__version__, "host": platform.node(), "kinds": {}}
    if device == "cuda":
        results["gpu"] = torch.cuda.get_device_name()
    for kind in args.kinds.split(","):
        model = sharded_model(cfg, device)
        params = sum(p.numel() for p in model.parameters())
        opt = None
        try:
            opt = make_optimizer(kind, model, args.td_factor)
            loop = Loop(model, opt, args.batch, cfg["seq"], cfg["vocab"], device)
            for _ in range(3):
                loss = loop.step()  # warm-up: state, plans, NCCL communicators
            sync(device)
            whole = whole_step_ms(loop, args.steps, args.windows)
            step = opt_step_ms(loop, max(5, args.steps))
            row = {"whole_step_ms": whole, "opt_step_ms": step, "opt_share": step / whole,
                   "final_loss": float(loss.detach()), "params": params}
            if isinstance(opt, LuminaV):
                plans = opt._plans or []
                row["exchange_doubles"] = [int(p.exchange.numel()) for p in plans if p.exchange is not None]
                row["exchanges_per_step"] = [p.exchanges for p in plans if p.exchange is not None]
                row["native_calls"] = opt.last_native_calls
            if device == "cuda":
                row["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        except Exception as error:  # one kind's failure is a result, not the end of the run
            row = {"error": f"{type(error).__name__}: {error}"}
        results["kinds"][kind] = row
        if rank == 0:
            print(kind, json.dumps(row), flush=True)
        del model, opt
        if device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
