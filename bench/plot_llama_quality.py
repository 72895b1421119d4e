"""Loss curves of bench/optim_llama_quality.py runs, one panel per run, as a PNG.

    python bench/plot_llama_quality.py RUN.json [RUN.json ...] --png docs/optim_quality_llama.png

Each curve is the training loss every 10th step (the JSON's "curve"), one colour per optimizer and
one line style per seed; dots are the held-out points; the legend gives each run's last held-out loss.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


COLORS = {"adamw_fused": "tab:blue", "luminav_clm": "tab:orange", "luminav_tdclm": "tab:green",
          "reference_tdclm": "tab:red", "adam_mini": "tab:purple", "adamw8bit": "tab:brown",
          "luminav_tdclm_tau0.5": "tab:olive", "luminav_tdclm_tau1": "tab:cyan",
          "luminav_tdclm_cautious": "tab:red", "luminav_tdclm_tau0.5_cautious": "tab:pink",
          "luminav_tdclm_tau0.5_cautious_until400": "tab:green", "luminav_tdclm_cautious_until400": "tab:olive",
          "luminav_tdclm_tau0.5_cautious_until200": "tab:cyan"}  # one per optimizer
SEED_STYLES = ("-", "--", ":", "-.")  # one line style per seed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--png", required=True)
    ap.add_argument("--labels", nargs="*", help="one title per run (default: the file name)")
    args = ap.parse_args()
    fig, axes = plt.subplots(1, len(args.runs), figsize=(max(8, 6 * len(args.runs)), 4.6), squeeze=False)
    runs = [json.loads(Path(path).read_text()) for path in args.runs]
    for i, (path, run, ax) in enumerate(zip(args.runs, runs, axes[0])):
        for name, r in sorted(run["runs"].items()):
            kind, _, seed = name.partition("/seed")
            steps = [10 * k for k in range(len(r["curve"]))]
            stopped = "" if r.get("completed_steps", run["steps"]) == run["steps"] else f" (at {r['completed_steps']})"
            color = COLORS.get(kind)
            ax.plot(steps, r["curve"], label=f"{name}: held-out {r['held_out']:.3f}{stopped}", linewidth=1.0,
                    color=color, linestyle=SEED_STYLES[int(seed or 0) % len(SEED_STYLES)])
            if r.get("held_curve"):  # the held-out points
                ax.plot(*zip(*r["held_curve"]), "o", color=color, markersize=3)
        ax.set_title(args.labels[i] if args.labels else Path(path).parent.name or Path(path).stem, fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.set_ylim(top=min(ax.get_ylim()[1], 4.0))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6 if len(run["runs"]) > 6 else 8)
    regimes = " and ".join(dict.fromkeys(r.get("regime", "fresh") for r in runs))
    fig.suptitle(f"Llama, {regimes} batches, lr {run['lr']}, {run.get('machine', '')}; "
                 "lines: training loss, dots: held-out", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
