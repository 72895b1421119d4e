"""Loss curves of bench/optim_llama_quality.py runs, one panel per run, as a PNG.

    python bench/plot_llama_quality.py RUN.json [RUN.json ...] --png docs/optim_quality_llama.png

Each curve is the training loss every 10th step (the JSON's "curve"); the legend gives
each optimizer's held-out loss at the end.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


COLORS = {"adamw_fused": "tab:blue", "luminav_clm": "tab:orange", "luminav_tdclm": "tab:green",
          "reference_tdclm": "tab:red"}  # one colour per optimizer in every panel


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--png", required=True)
    ap.add_argument("--labels", nargs="*", help="one title per run (default: the file name)")
    args = ap.parse_args()
    fig, axes = plt.subplots(1, len(args.runs), figsize=(6 * len(args.runs), 4.2), squeeze=False)
    for i, (path, ax) in enumerate(zip(args.runs, axes[0])):
        run = json.loads(Path(path).read_text())
        for name, r in sorted(run["runs"].items()):
            steps = [10 * k for k in range(len(r["curve"]))]
            ax.plot(steps, r["curve"], label=f"{name}: held-out {r['held_out']:.3f}", linewidth=1.2,
                    color=COLORS.get(name.split("/")[0]))
        ax.set_title(args.labels[i] if args.labels else Path(path).parent.name or Path(path).stem, fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.set_ylim(top=min(ax.get_ylim()[1], 4.0))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Llama 98M, fresh bigram-chain batches, lr {run['lr']}, {run.get('machine', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
