"""What the wheel must do on a bare Debian (run inside the root by test_bare_debian_wheel.py).

Only the wheel, NumPy's wheel and this folder are there: no compiler, no
Debian library of ours, no pyarrow, no network. Prints one line per check;
exits non-zero on the first failure.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # luminav_reference.py, copied beside

from luminav_reference import Hyper, assert_within_forward_error, reference_step  # noqa: E402


def check_optimizer_step() -> str:
    """One functional step over NumPy arrays, within the spec's error bound of a float64 reference."""
    from luminamoon import optim
    rng = np.random.default_rng(22)
    n = 10_000
    x = rng.standard_normal(n).astype(np.float32)
    m = (0.1 * rng.standard_normal(n)).astype(np.float32)
    v = np.abs(0.01 * rng.standard_normal(n)).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    hp = Hyper(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)
    ref = reference_step(hp, x, m, v, g, 3)
    optim.step(x, g, m, v, lr=hp.lr, beta1=hp.beta1, beta2=hp.beta2, eps=hp.eps,
               weight_decay=hp.weight_decay, step=3)
    assert_within_forward_error("exp_avg", m, ref.m, ref.scale_m)
    assert_within_forward_error("exp_avg_sq", v, ref.v, ref.scale_v)
    assert_within_forward_error("param", x, ref.x, ref.scale_x)
    return f"optim.step over {n} floats on backend {optim.last_backend()}: within the spec bound"


def check_data_pipeline() -> str:
    """JSONL in, NDJSON out: an exact duplicate dropped, an email masked, blanks trimmed."""
    from luminamoon import data
    words = "the quick brown fox jumps over a lazy dog near the quiet river bank".split()
    docs = []
    for i in range(40):
        text = " ".join(words[(i + k) % len(words)] for k in range(12)) + f" document {i}"
        docs.append({"id": f"d{i}", "text": text})
    docs.append({"id": "dup", "text": docs[5]["text"]})
    docs.append({"id": "mail", "text": "  please write to jane.doe@example.org about the quiet river bank  "})
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_text("".join(json.dumps(d) + "\n" for d in docs))
        out = Path(tmp) / "out"
        summary = data.FusedPipeline(format="ndjson", quality=False, minhash=False).run([str(src)], str(out))
        rows = [json.loads(line) for p in sorted(out.glob("part-*.ndjson")) for line in p.read_text().splitlines()]
    ids = [r["id"] for r in rows]
    assert "dup" not in ids and len(ids) == 41, f"expected the 41 distinct documents, got {len(ids)}: {ids[-3:]}"
    mail = next(r for r in rows if r["id"] == "mail")
    assert "jane.doe@example.org" not in mail["text"], mail
    assert mail["text"] == mail["text"].strip(), mail
    return f"pipeline: 42 documents in, {len(rows)} written (duplicate dropped, email masked); {summary.get('parts')} part(s)"


def check_gil_release_paths() -> str:
    """The batch stages and dedup objects load and run without pyarrow."""
    from luminamoon import data
    cleaned = data.clean_batch(["  a b c  ", "x"])
    d = data.StreamDeduplicator()
    keep = d.add(["same text", "same text", "other"])
    assert cleaned.to_pylist() == ["a b c", "x"] and keep.tolist() == [True, False, True]
    return "clean_batch and StreamDeduplicator: ok"


def main() -> int:
    import luminamoon
    print(f"luminamoon {luminamoon.__version__} from {Path(luminamoon.__file__).parent}")
    for check in (check_optimizer_step, check_data_pipeline, check_gil_release_paths):
        print(check())
    return 0


if __name__ == "__main__":
    sys.exit(main())
