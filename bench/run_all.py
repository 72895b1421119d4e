"""`make bench`: the headline benchmarks in a few minutes, printed as the table
of docs/benchmarks.md.

    python bench/run_all.py            # CPU rows (fits the 2-core machine in a few minutes)
    python bench/run_all.py --gpu      # GPU rows, on a machine with a CUDA GPU and transformers
    python bench/run_all.py --quick    # smaller sizes (a smoke run)

Each row is timed side by side with its anchor in the same run (bench/harness.py).
Peers are used where they are installed (torch always; DeepSpeed's CPU Adam,
datatrove, rensa and datasketch when importable) and their rows say so when not.
The full-size, single-topic benchmarks stay in their own scripts (bench/*.py);
this suite is the quick answer to "how fast against the anchor, here and now".
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Row, measure, measure_side_by_side, table, target_note  # noqa: E402

HYPER = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def _ratio(ours_s: float, anchor_s: float) -> str:
    return f"{anchor_s / ours_s:.2f}x faster" if ours_s <= anchor_s else f"{ours_s / anchor_s:.2f}x slower"


def copy_bandwidth(n: int) -> float:
    """Bytes read + written per second of one core's memcpy (np.copyto) of n floats."""
    src = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    dst = np.empty_like(src)
    t = measure(lambda: np.copyto(dst, src), 5, min_time=0.2)
    return 2 * src.nbytes / t.wall_s


def optimizer_rows(log2n: int) -> list[Row]:
    """One fp32 tensor: LuminaV CLM / TD-CLM against torch's AdamW, and the memory floor."""
    import torch

    from luminamoon.optim import LuminaV
    rows = []
    n = 1 << log2n
    side = 1 << (log2n // 2)
    threads = torch.get_num_threads()
    bandwidth = copy_bandwidth(n)

    def make(kind):
        p = torch.nn.Parameter(torch.randn(side, n // side))
        p.grad = torch.randn_like(p) * 1e-2
        if kind == "torch_fused":
            return torch.optim.AdamW([p], **HYPER, fused=True)
        if kind == "torch_foreach":
            return torch.optim.AdamW([p], **HYPER, foreach=True)
        if kind == "deepspeed":
            from deepspeed.ops.adam import DeepSpeedCPUAdam
            return DeepSpeedCPUAdam([p], lr=HYPER["lr"], betas=HYPER["betas"], eps=HYPER["eps"],
                                    weight_decay=HYPER["weight_decay"], adamw_mode=True)
        mode = "tdclm" if kind == "luminav_tdclm" else "clm"
        return LuminaV([p], **HYPER, mode=mode)

    kinds = ["luminav", "luminav_tdclm", "torch_fused", "torch_foreach"]
    try:
        import deepspeed.ops.adam  # noqa: F401
        kinds.append("deepspeed")
    except Exception:  # noqa: BLE001 - optional peer (ImportError or its op build failing)
        pass
    opts = {k: make(k) for k in kinds}
    times = measure_side_by_side({k: o.step for k, o in opts.items()}, rounds=5, min_time=0.3)
    fused = times["torch_fused"].wall_s
    # CLM fp32 reads p, g, m, v and writes p, m, v: 28 bytes per element.
    floor_s = 28 * n / bandwidth
    clm = times["luminav"].wall_s
    rows.append(Row(f"CLM step, fp32, N=2^{log2n}, {threads} threads", f"{n / clm / 1e9:.2f} G elem/s",
                    f"torch AdamW fused {n / fused / 1e9:.2f} G elem/s",
                    _ratio(clm, fused) + f"; {floor_s / clm:.0%} of the 1-core copy floor"))
    td = times["luminav_tdclm"].wall_s
    rows.append(Row(f"TD-CLM v2 (factored) step, fp32, {side}x{n // side}", f"{n / td / 1e9:.2f} G elem/s",
                    f"torch AdamW fused {n / fused / 1e9:.2f} G elem/s", _ratio(td, fused)))
    foreach = times["torch_foreach"].wall_s
    rows.append(Row(f"CLM step vs torch foreach, N=2^{log2n}", f"{clm * 1e3:.2f} ms",
                    f"torch AdamW foreach {foreach * 1e3:.2f} ms", _ratio(clm, foreach)))
    if "deepspeed" in times:
        ds = times["deepspeed"].wall_s
        rows.append(Row(f"CLM step vs DeepSpeed CPU Adam, N=2^{log2n}", f"{clm * 1e3:.2f} ms",
                        f"DeepSpeedCPUAdam {ds * 1e3:.2f} ms", _ratio(clm, ds)))
    else:
        rows.append(Row("CLM step vs DeepSpeed CPU Adam", "-", "deepspeed not installed", "-"))
    return rows


def front_end_rows(tensors: int) -> list[Row]:
    """The torch front end's cost per parameter tensor: many small tensors, where the math is cheap."""
    import torch

    from luminamoon.optim import LuminaV

    def params():
        torch.manual_seed(0)
        ps = [torch.nn.Parameter(torch.randn(64, 64)) for _ in range(tensors)]
        for p in ps:
            p.grad = torch.randn_like(p) * 1e-2
        return ps
    ours, fused = LuminaV(params(), **HYPER), torch.optim.AdamW(params(), **HYPER, fused=True)
    times = measure_side_by_side({"ours": ours.step, "fused": fused.step}, rounds=7, min_time=0.2)
    o, f = times["ours"].wall_s, times["fused"].wall_s
    return [Row(f"optimizer.step() on {tensors} tensors of 64x64 (front-end cost)",
                f"{o / tensors * 1e6:.2f} us/tensor", f"torch AdamW fused {f / tensors * 1e6:.2f} us/tensor",
                _ratio(o, f))]


def text_corpus(megabytes: float) -> list[bytes]:
    from data_batch_bench import make_corpus
    return make_corpus(int(megabytes * 1e6))


def data_stage_rows(docs: list[bytes], anchor_docs: int) -> list[Row]:
    import luminamoon.data as data
    rows = []
    total = sum(map(len, docs))
    data.set_num_threads(1)
    tensor = data.StringTensor(docs)

    def chain():
        cleaned = data.clean_batch(tensor)
        data.filter_quality(cleaned)
        return data.mask_pii(cleaned)
    t = measure(chain, 3)
    rows.append(Row(f"clean + quality + PII, {total / 1e6:.0f} MB generated text, 1 thread",
                    f"{total / t.cpu_s / 1e6:.0f} MB/s per core", "", "-", "150 MB/s per core (issue 15)"))
    subset = docs[:anchor_docs]
    sub_bytes = sum(map(len, subset))
    try:
        from datatrove.data import Document
        from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
        from datatrove.pipeline.formatters import PIIFormatter
    except ImportError:
        rows.append(Row("quality + PII vs datatrove", "-", "datatrove not installed", "-"))
    else:
        texts = [d.decode() for d in subset]
        gq, gr, pii = GopherQualityFilter(), GopherRepetitionFilter(), PIIFormatter()
        gq.filter(Document(text=texts[0], id="warm"))  # its tokenizer loads outside the timing
        sub = data.StringTensor(subset)

        def theirs():
            for i, text in enumerate(texts):
                doc = Document(text=text, id=str(i))
                gr.filter(doc)
                gq.filter(doc)
                pii.format(text)

        def ours():
            data.filter_quality(sub)
            return data.mask_pii(sub)
        times = measure_side_by_side({"ours": ours, "theirs": theirs}, rounds=3)
        o, d = times["ours"].cpu_s, times["theirs"].cpu_s
        rows.append(Row(f"Gopher quality + repetition + PII, {len(subset)} docs, 1 thread",
                        f"{sub_bytes / o / 1e6:.1f} MB/s", f"datatrove {sub_bytes / d / 1e6:.2f} MB/s",
                        _ratio(o, d)))
    data.set_num_threads(0)
    return rows


def minhash_rows(docs: list[bytes]) -> list[Row]:
    import luminamoon.data as data
    total = sum(map(len, docs))
    lsh = data.MinHashLSH(num_perm=64)
    tensor = data.StringTensor(docs)
    t = measure(lambda: lsh.signatures(tensor, num_threads=1), 3)
    rows = [Row(f"MinHash oph signatures, 64 values, {len(docs)} docs, 1 thread",
                f"{total / t.cpu_s / 1e6:.0f} MB/s", "", "-", "600 MB/s (issue 15)")]
    texts = [d.decode() for d in docs]
    try:
        from rensa import RMinHash
    except ImportError:
        rows.append(Row("MinHash vs rensa", "-", "rensa not installed", "-"))
    else:
        shingles = [[" ".join(w[i:i + 5]) for i in range(max(1, len(w) - 4))]
                    for w in (s.lower().split() for s in texts)]

        def theirs():
            for sh in shingles:
                m = RMinHash(num_perm=64, seed=0)
                m.update(sh)
                m.digest()
        times = measure_side_by_side({"ours": lambda: lsh.signatures(tensor, num_threads=1), "theirs": theirs},
                                     rounds=3)
        o, r = times["ours"].cpu_s, times["theirs"].cpu_s
        rows.append(Row("MinHash signatures vs rensa (given its shingles)", f"{total / o / 1e6:.0f} MB/s",
                        f"rensa RMinHash {total / r / 1e6:.0f} MB/s", _ratio(o, r)))
    try:
        from datasketch import MinHash
    except ImportError:
        rows.append(Row("MinHash vs datasketch", "-", "datasketch not installed", "-"))
    else:
        few = texts[:500]
        few_bytes = sum(len(s.encode()) for s in few)
        few_tensor = data.StringTensor(few)
        enc = [[" ".join(w[i:i + 5]).encode() for i in range(max(1, len(w) - 4))]
               for w in (s.lower().split() for s in few)]

        def theirs():
            for sh in enc:
                m = MinHash(num_perm=64, seed=0)
                m.update_batch(sh)
        times = measure_side_by_side({"ours": lambda: lsh.signatures(few_tensor, num_threads=1),
                                      "theirs": theirs}, rounds=3)
        o, d = times["ours"].cpu_s, times["theirs"].cpu_s
        rows.append(Row(f"MinHash signatures vs datasketch, {len(few)} docs", f"{few_bytes / o / 1e6:.0f} MB/s",
                        f"datasketch {few_bytes / d / 1e6:.1f} MB/s", _ratio(o, d)))
    return rows


def pipeline_rows(docs_per_shard: int) -> list[Row]:
    from luminamoon.data.cli import generate_corpus
    from luminamoon.data.pipeline import FusedPipeline
    work = tempfile.mkdtemp(prefix="luminamoon-bench-")
    try:
        shards = generate_corpus(os.path.join(work, "in"), shards=4, docs_per_shard=docs_per_shard, seed=3)
        runs = []

        def run():
            out = os.path.join(work, f"out{len(runs)}")
            runs.append(FusedPipeline(format="parquet").run(shards, out, resume=False))
            shutil.rmtree(out)
        t = measure(run, 3, warmup=0)
        summary = runs[-1]
        mb = summary["bytes_in"] / 1e6
        return [Row(f"FusedPipeline (read..PII..Parquet), {summary['documents_in']} docs, {mb:.0f} MB generated",
                    f"{mb / t.cpu_s:.0f} MB/s per core ({mb / t.wall_s:.0f} MB/s wall)", "", "-",
                    "150 MB/s per core (issue 15)")]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def gpu_rows(reps: int) -> list[Row]:
    """The optimizer on the GPU: one large tensor and the Llama-98M training loop of issue 13."""
    import torch
    from optim_training_loop import Loop, copy_bandwidth_gbs, gpu_step_ms, host_step_ms, llama, make_optimizer

    from luminamoon.optim import LuminaV
    rows = []
    n = 1 << 26
    bandwidth = copy_bandwidth_gbs() * 1e9
    p1, p2 = (torch.nn.Parameter(torch.randn(n, device="cuda")) for _ in range(2))
    for p in (p1, p2):
        p.grad = torch.randn_like(p) * 1e-2
    ours, fused = LuminaV([p1], **HYPER), torch.optim.AdamW([p2], **HYPER, fused=True)

    def timed_on_device(opt):
        def run():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            opt.step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3
        return run
    per = {k: [] for k in ("ours", "fused")}
    for _ in range(reps):
        per["ours"].append(timed_on_device(ours)())
        per["fused"].append(timed_on_device(fused)())
    o, f = float(np.median(per["ours"])), float(np.median(per["fused"]))
    floor = 28 * n / bandwidth
    rows.append(Row("CLM step, fp32, N=2^26, one tensor (kernel)", f"{o * 1e3:.3f} ms",
                    f"torch AdamW fused {f * 1e3:.3f} ms", _ratio(o, f) + f"; {floor / o:.0%} of the copy floor"))
    cfg = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)
    sleep_cycles = int(0.1 * 1.98e9)
    step_ms = {}
    for kind in ("torch_fused", "luminav"):
        model = llama("cuda", **cfg)
        loop = Loop(model, make_optimizer(kind, model), 16, cfg["seq"], cfg["vocab"], "cuda")
        for _ in range(3):
            loop.step()
        torch.cuda.synchronize()
        step_ms[kind] = (gpu_step_ms(loop, reps), host_step_ms(loop, 5, sleep_cycles))
        del loop, model
        torch.cuda.empty_cache()
    (og, oh), (fg, fh) = step_ms["luminav"], step_ms["torch_fused"]
    rows.append(Row("Llama 98M (111 tensors) opt.step(): GPU time", f"{og:.2f} ms", f"torch fused {fg:.2f} ms",
                    f"{og / fg:.2f}x of torch", target_note(og / fg, 0.5, higher_is_better=False)))
    rows.append(Row("Llama 98M opt.step(): host time, GPU busy", f"{oh:.2f} ms", f"torch fused {fh:.2f} ms",
                    f"{oh / fh:.2f}x of torch", target_note(oh / fh, 0.5, higher_is_better=False)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="the GPU rows instead of the CPU rows")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run in well under a minute")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    if args.gpu:
        rows = gpu_rows(reps=5 if args.quick else 20)
        title = "LuminaMoon headline benchmarks: GPU"
    else:
        small = args.quick
        docs = text_corpus(2 if small else 20)
        rows = optimizer_rows(18 if small else 22)
        rows += front_end_rows(111)
        rows += data_stage_rows(docs, 200 if small else 2000)
        rows += minhash_rows(docs[: 2000 if small else 20000])
        rows += pipeline_rows(300 if small else 3000)
        title = "LuminaMoon headline benchmarks: CPU"
    print(table(rows, title))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
