"""Near-duplicate accuracy of luminamoon.MinHashLSH against datasketch's
MinHashLSH at the same number of permutations and bands; luminamoon with its
default oph scheme and with kperm (version 1's 64 permutations).

Pairs are planted at known exact Jaccard similarities of their word 5-gram
sets (0.50 to 0.95 in steps of 0.05, --pairs per step, |J - step| <= 0.01;
bench/dedup_corpus.py). All documents stream through each method in one
shuffled order (each pair's base before its variant). A pair is "flagged"
when its variant is dropped as a near duplicate of its own base (luminamoon
reports the matched document, and any other match counts as a miss) or, for
datasketch, when the query returns candidates. Ground truth at threshold t
(default 0.8): a pair is a duplicate when its exact J >= t. Per step the
flagged fraction is the recall (J >= t) or the false-positive rate (J < t);
precision and recall over all pairs are printed too, and a PNG plot.

    .venvs/dedup/bin/python bench/dedup_accuracy.py --out docs/dedup_near_dup_accuracy.png
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import dedup_corpus  # noqa: E402
import dedup_reference as ref  # noqa: E402

import luminamoon.data as data  # noqa: E402


def s_curve(j: float, bands: int, rows: int) -> float:
    """Probability that two documents of Jaccard j share at least one band."""
    return 1 - (1 - j**rows) ** bands


def p_estimate_at_least(j: float, num_perm: int, t: float) -> float:
    """P(Binomial(num_perm, j) / num_perm >= t): the verification step alone."""
    k0 = math.ceil(t * num_perm - 1e-9)
    return sum(math.comb(num_perm, k) * j**k * (1 - j) ** (num_perm - k) for k in range(k0, num_perm + 1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--num-perm", type=int, default=64)
    ap.add_argument("--bands", type=int, default=8)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--out", default="docs/dedup_near_dup_accuracy.png")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from datasketch import MinHash
    from datasketch import MinHashLSH as DatasketchLSH

    steps = [round(0.5 + 0.05 * i, 2) for i in range(10)]
    rng = random.Random(2026)
    t0 = time.perf_counter()
    pairs = []  # (step, exact J, base, variant)
    for s in steps:
        for _ in range(args.pairs):
            base, variant, j = dedup_corpus.planted_pair(rng, s)
            pairs.append((s, j, base, variant))
    order = list(range(len(pairs)))
    rng.shuffle(order)
    stream, owner = [], []  # the documents in stream order, and the pair each belongs to
    for p in order:
        stream += [pairs[p][2], pairs[p][3]]
        owner += [p, p]
    print(f"{len(pairs)} pairs planted in {time.perf_counter() - t0:.1f} s", flush=True)
    base_ref = {p: i for i, p in enumerate(owner) if i == 0 or owner[i - 1] != p}
    variant_at = {p: base_ref[p] + 1 for p in base_ref}

    # luminamoon: verified (threshold) and raw LSH (threshold 0: any band collision).
    flagged: dict[str, np.ndarray] = {}
    for name, thr, scheme in (("luminamoon", args.threshold, "oph"), ("luminamoon_kperm", args.threshold, "kperm"),
                              ("luminamoon_lsh_only", 0.0, "oph")):
        lsh = data.MinHashLSH(num_perm=args.num_perm, bands=args.bands, rows=args.rows, threshold=thr, scheme=scheme)
        keep, matched = lsh.add(stream)
        hit = np.zeros(len(pairs), dtype=bool)
        for p in range(len(pairs)):
            v = variant_at[p]
            hit[p] = (not keep[v]) and matched[v] == base_ref[p]
        flagged[name] = hit
        wrong = sum(1 for i in range(len(stream)) if not keep[i] and matched[i] != base_ref.get(owner[i], -2))
        print(f"{name}: {int(hit.sum())} pairs flagged, {wrong} drops matched to a wrong document")

    # datasketch, same shingles (luminamoon's normalization, word 5-grams), same 8 x 8 banding.
    ds = DatasketchLSH(num_perm=args.num_perm, params=(args.bands, args.rows))
    sketches = {}
    hit_raw = np.zeros(len(pairs), dtype=bool)
    hit_verified = np.zeros(len(pairs), dtype=bool)
    for i, text in enumerate(stream):
        m = MinHash(num_perm=args.num_perm, seed=1)
        m.update_batch(ref.shingles(text, 5))
        candidates = ds.query(m)
        p = owner[i]
        if i == variant_at[p]:
            hit_raw[p] = base_ref[p] in candidates
            hit_verified[p] = base_ref[p] in candidates and m.jaccard(sketches[base_ref[p]]) >= args.threshold
        verified_dup = any(m.jaccard(sketches[c]) >= args.threshold for c in candidates)
        if not candidates or not verified_dup:
            # keep: insert (the raw variant's decision is not used for the stream)
            ds.insert(i, m)
            sketches[i] = m
    flagged["datasketch_lsh"] = hit_raw
    flagged["datasketch_lsh_verified"] = hit_verified

    exact_j = np.array([p[1] for p in pairs])
    step_of = np.array([p[0] for p in pairs])
    truth = exact_j >= args.threshold
    rows = []
    for s in steps:
        sel = step_of == s
        row = {"step": s, "pairs": int(sel.sum()), "mean_exact_j": float(exact_j[sel].mean()),
               "s_curve": s_curve(s, args.bands, args.rows),
               "p_verify": p_estimate_at_least(s, args.num_perm, args.threshold)}
        for name, hit in flagged.items():
            row[name] = float(hit[sel].mean())
        rows.append(row)
    overall = {}
    for name, hit in flagged.items():
        tp = int((hit & truth).sum())
        fp = int((hit & ~truth).sum())
        fn = int((~hit & truth).sum())
        overall[name] = {"precision": tp / max(tp + fp, 1), "recall": tp / max(tp + fn, 1), "tp": tp, "fp": fp, "fn": fn}

    names = list(flagged)
    print("step  " + "  ".join(f"{n:>24s}" for n in names) + "   S-curve  P(est>=t)")
    for r in rows:
        print(f"{r['step']:.2f}  " + "  ".join(f"{r[n]:24.3f}" for n in names)
              + f"   {r['s_curve']:.3f}    {r['p_verify']:.3f}")
    for n, o in overall.items():
        print(f"{n:26s} precision {o['precision']:.3f} recall {o['recall']:.3f} (tp {o['tp']} fp {o['fp']} fn {o['fn']})")

    if args.json:
        Path(args.json).write_text(json.dumps({"steps": rows, "overall": overall}, indent=2))
    try:
        import matplotlib
    except ImportError:
        print("matplotlib missing: no plot")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    xs = np.array(steps)
    fine = np.linspace(0.45, 1.0, 200)
    ax.plot(fine, [s_curve(j, args.bands, args.rows) for j in fine], color="0.6", ls="--",
            label=f"theory: P(band collision), {args.bands}x{args.rows}")
    ax.plot(fine, [s_curve(j, args.bands, args.rows) * p_estimate_at_least(j, args.num_perm, args.threshold)
                   for j in fine], color="0.3", ls=":", label="theory: collision x P(estimate >= t) (approx.)")
    styles = {"luminamoon": ("C0", "o", "luminamoon MinHashLSH oph (verified, t=%.2f)" % args.threshold),
              "luminamoon_kperm": ("C2", "D", "luminamoon MinHashLSH kperm (verified)"),
              "luminamoon_lsh_only": ("C0", "x", "luminamoon, LSH only (threshold 0)"),
              "datasketch_lsh": ("C1", "s", "datasketch MinHashLSH (candidates)"),
              "datasketch_lsh_verified": ("C1", "^", "datasketch + jaccard() >= t")}
    for n in names:
        c, mk, label = styles[n]
        ax.plot(xs, [r[n] for r in rows], color=c, marker=mk, ls="-" if n == "luminamoon" else "-.", label=label)
    ax.axvline(args.threshold, color="red", lw=0.8)
    ax.set_xlabel("exact Jaccard of the planted pair (word 5-gram sets)")
    ax.set_ylabel("fraction of pairs flagged as near duplicates")
    ax.set_title(f"Near-duplicate detection, {args.num_perm} permutations, {args.bands} bands x {args.rows} rows, "
                 f"{args.pairs} pairs/step", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out)
    print("plot:", args.out)


if __name__ == "__main__":
    main()
