"""`luminamoon data`: did-you-mean (Damerau-Levenshtein) for options, formats,
schemes and config keys with exit code 2, remote schemes named as
unsupported, exit codes, the progress bar on a terminal and log lines
otherwise, config files, and the demo."""
from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from luminamoon.data.pipeline import EXIT_CODES, damerau_levenshtein, did_you_mean
from test_pipeline_support import long_text, run_cli, write_jsonl


def _reference_osa(a: str, b: str) -> int:
    """Optimal string alignment distance, memoized recursion (independent of the DP)."""
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def d(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        best = min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))
        if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
            best = min(best, d(i - 2, j - 2) + 1)
        return best
    return d(len(a), len(b))


def test_damerau_levenshtein_against_reference():
    import random
    rng = random.Random(0)
    for _ in range(300):
        a = "".join(rng.choice("abcd") for _ in range(rng.randint(0, 7)))
        b = "".join(rng.choice("abcd") for _ in range(rng.randint(0, 7)))
        assert damerau_levenshtein(a, b) == _reference_osa(a, b)
    assert damerau_levenshtein("fiel", "file") == 1  # one transposition
    assert did_you_mean("--dedupe", ["--dedup", "--no-dedup", "--config"]) == "--dedup"
    assert did_you_mean("--zzzzzz", ["--dedup"]) is None


@pytest.fixture()
def corpus(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", [{"id": f"d{i}", "text": long_text(i)} for i in range(30)])
    return str(tmp_path / "in.jsonl")


@pytest.mark.parametrize("args, message", [
    (["run", "IN", "-o", "OUT", "--dedupe"], "did you mean '--dedup'?"),
    (["run", "IN", "-o", "OUT", "--formt", "ndjson"], "did you mean '--format'?"),
    (["run", "IN", "-o", "OUT", "--no-resum"], "did you mean '--no-resume'?"),
    (["run", "IN", "-o", "OUT", "--format", "parqet"], "did you mean 'parquet'?"),
    (["run", "IN", "-o", "OUT", "--format", "ndjosn"], "did you mean 'ndjson'?"),
    (["run", "fiel://IN", "-o", "OUT"], "did you mean 'file://'?"),
    (["run", "flie://IN", "-o", "OUT"], "did you mean 'file://'?"),
    (["run", "IN", "-o", "OUT", "--txt-mode", "paragrph"], "did you mean 'paragraph'?"),
    (["rnu", "IN"], "did you mean 'run'?"),
])
def test_misspellings_get_a_suggestion_and_exit_2(corpus, tmp_path, args, message):
    args = [a.replace("IN", corpus).replace("OUT", str(tmp_path / "out")) for a in args]
    r = run_cli(args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr


@pytest.mark.parametrize("scheme", ["s3", "hf", "gs"])
def test_remote_schemes_are_named_as_unsupported(tmp_path, scheme):
    r = run_cli(["run", f"{scheme}://bucket/data.jsonl", "-o", str(tmp_path / "o")])
    assert r.returncode == 2
    assert f"{scheme}:// inputs are not supported yet" in r.stderr
    assert "did you mean" not in r.stderr


def test_config_file_toml_and_misspelled_key(corpus, tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('[reader]\nbatch_docs = 5\n[output]\nformat = "ndjson"\npart_rows = 5\nwrite_dropped = true\n'
                    '[quality]\nenabled = true\n[quality.thresholds]\nmin_words = 10\n'
                    '[minhash]\nenabled = false\n')
    r = run_cli(["run", corpus, "-o", str(tmp_path / "out"), "--config", str(good), "--progress", "none"])
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out" / "summary.json") as f:
        summary = json.load(f)
    assert summary["documents_kept"] == 30 and summary["stages"] == ["clean", "quality", "dedup", "pii"]
    assert len([p for p in os.listdir(tmp_path / "out") if p.startswith("part-")]) == 6  # 30 docs / 5
    assert os.path.isdir(tmp_path / "out" / "dropped")
    bad = tmp_path / "bad.toml"
    bad.write_text('[output]\nfromat = "ndjson"\n')
    r = run_cli(["run", corpus, "-o", str(tmp_path / "out2"), "--config", str(bad)])
    assert r.returncode == 2 and "did you mean 'format'?" in r.stderr
    bad.write_text('[dedupe]\nenabled = true\n')
    r = run_cli(["run", corpus, "-o", str(tmp_path / "out2"), "--config", str(bad)])
    assert r.returncode == 2 and "did you mean 'dedup'?" in r.stderr


def test_exit_codes_are_documented_and_used(tmp_path):
    r = run_cli(["--help"])
    assert r.returncode == 0
    for code in (0, 2, 3, 4, 5, 6, 7, 130):
        assert code in EXIT_CODES and f"{code:3d}  " in r.stdout
    r = run_cli(["run", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o")])
    assert r.returncode == 3 and "not found" in r.stderr
    (tmp_path / "x.csv").write_text("a,b\n")
    r = run_cli(["run", str(tmp_path / "x.csv"), "-o", str(tmp_path / "o")])
    assert r.returncode == 2 and "unsupported input format" in r.stderr


def test_plain_log_lines_when_not_on_a_terminal(corpus, tmp_path):
    r = run_cli(["run", corpus, "-o", str(tmp_path / "out"), "--format", "ndjson"])
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "\033[" not in r.stderr
    assert "documents in 30" in r.stdout and "summary:" in r.stdout


def test_progress_bar_on_a_terminal(corpus, tmp_path):
    # The child's stderr is a pseudo-terminal, as in an interactive shell.
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "LUMINAMOON_TEST_CRASH_AT"}
    proc = subprocess.Popen([sys.executable, "-m", "luminamoon.data.cli", "run", corpus, "-o",
                             str(tmp_path / "out"), "--format", "ndjson"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    screen = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "\r[" in screen and "docs/s" in screen and "MB/s" in screen and "kept" in screen


def test_demo_runs_and_prints_the_summary(tmp_path):
    r = run_cli(["demo", "-o", str(tmp_path / "demo")], timeout=300)
    assert r.returncode == 0, r.stderr
    assert "exact_duplicate" in r.stdout and "near_duplicate" in r.stdout
    assert "pii.email" in r.stdout and "malformed records" in r.stdout


def test_shipped_demo_corpus_is_the_generator_output(tmp_path):
    """The corpus shipped for `luminamoon demo` is exactly what the documented
    generator command writes (so it can be regenerated and reviewed)."""
    import pathlib

    import luminamoon
    from luminamoon.data.cli import generate_corpus

    shipped = pathlib.Path(luminamoon.__file__).parent / "demo_corpus"
    fresh = generate_corpus(str(tmp_path), shards=3, docs_per_shard=400, seed=7, compress="gz")
    assert sorted(p.name for p in shipped.glob("*.jsonl.gz")) == [pathlib.Path(p).name for p in fresh]
    for path in fresh:
        assert (shipped / pathlib.Path(path).name).read_bytes() == pathlib.Path(path).read_bytes()


def _openblas_threads_seen_by_the_data_command(preset: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = ("import os, sys, luminamoon.cli\n"
            "try:\n    luminamoon.cli.main(['data', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stderr.strip().splitlines()[-1]


def test_the_data_command_keeps_openblas_to_one_thread_unless_the_user_says_otherwise():
    """`luminamoon data` may import numpy (the Ray executor, tokenization; OpenBLAS's threads spin
    ~0.1 CPU-s each) and does no linear algebra: it sets OPENBLAS_NUM_THREADS=1 before any such
    import, and leaves a user's value."""
    assert _openblas_threads_seen_by_the_data_command(None) == "1"
    assert _openblas_threads_seen_by_the_data_command("3") == "3"
