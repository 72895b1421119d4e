"""bench/optim_llama_evidence.py's summary of issue 14's runs: the per-seed ratios to AdamW, the ratio of
medians, and the count of late plateau escapes (Note [late escape]), on hand-made run files whose
expected figures are worked out here by hand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "optim_llama_evidence.py"


def curve(plateau_until, steps=1500, stride=10):
    """Training loss every `stride` steps: 8.76 on the plateau, then 1.5."""
    return [8.76 if step < plateau_until else 1.5 for step in range(0, steps, stride)]


def run_file(work, kind, seed, held_out, loss_curve, completed=1500):
    d = {"steps": 1500, "lr": 1e-3, "regime": "fresh", "model": {}, "machine": "test", "versions": {},
         "compiled_model": True,
         "runs": {f"{kind}/seed{seed}": {"held_out": held_out, "final_train": held_out, "completed_steps": completed,
                                          "state_bytes_per_param": 8.0 if kind == "adamw_fused" else 4.009,
                                          "held_curve": [[completed, held_out]], "curve": loss_curve}}}
    (work / f"fresh_{kind}_seed{seed}.json").write_text(json.dumps(d))


def summarize(work, out, *extra):
    subprocess.run([sys.executable, str(SCRIPT), "--work", str(work), "--out", str(out), "--summarize-only", *extra],
                   check=True, capture_output=True, text=True)
    return json.loads((out / "summary.json").read_text())


@pytest.fixture
def runs(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    run_file(work, "adamw_fused", 0, 1.0, curve(150))
    run_file(work, "adamw_fused", 1, 2.0, curve(200))
    run_file(work, "adamw_fused", 2, 1.2, curve(290))  # on the plateau at step 280: a late escape
    run_file(work, "luminav_tdclm", 0, 1.1, curve(330))  # late: above 3 at steps 280-320
    run_file(work, "luminav_tdclm", 1, 1.8, curve(150))
    run_file(work, "luminav_tdclm", 2, 1.2, curve(150)[:30])  # its curve ends before step 320: not counted
    return work


def test_ratios_to_adamw_per_seed_and_of_the_medians(runs, tmp_path):
    row = summarize(runs, tmp_path / "out")["fresh"]["kinds"]["luminav_tdclm"]
    assert row["held_out_vs_adamw_per_seed"] == pytest.approx([0.1, -0.1, 0.0])
    # median(1.1, 1.8, 1.2) / median(1.0, 2.0, 1.2) - 1
    assert row["held_out_vs_adamw_median_ratio"] == pytest.approx(1.2 / 1.2 - 1)
    assert row["held_out"]["median"] == pytest.approx(1.2)
    assert row["state_bytes_per_param"] == pytest.approx(4.009)


def test_late_escapes_are_counted_over_the_runs_that_reached_step_320(runs, tmp_path):
    kinds = summarize(runs, tmp_path / "out")["fresh"]["kinds"]
    assert kinds["adamw_fused"]["late_escapes"] == {"count": 1, "of": 3}
    assert kinds["luminav_tdclm"]["late_escapes"] == {"count": 1, "of": 2}
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "| luminav_tdclm | 4.009 | 1 of 2 |" in md


def test_the_threshold_is_an_argument(runs, tmp_path):
    # at 9.0 no run is "above the threshold", the plateau's 8.76 included
    kinds = summarize(runs, tmp_path / "out", "--late-escape-loss", "9.0")["fresh"]["kinds"]
    assert kinds["adamw_fused"]["late_escapes"] == {"count": 0, "of": 3}
    assert kinds["luminav_tdclm"]["late_escapes"] == {"count": 0, "of": 2}


def test_the_merged_runs_record_whether_the_model_was_compiled(runs, tmp_path):
    summarize(runs, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "fresh.json").read_text())["compiled_model"] is True
