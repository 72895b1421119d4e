"""luminamoon under a free-threaded CPython (PEP 703): the GIL stays off, threads give the serial results.

The checks live in free_threaded_checks.py (plain functions: the free-threaded
environment has no pytest); this file runs them once under the free-threaded
build of scripts/build_free_threaded_package.sh (`make free-threaded`) and
reports each as a test. The thread-safety checks that matter with a GIL too
(shared dedup objects, the StepPlan refusal) also run here, in this interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FT_VENV_PYTHON = Path(os.environ.get("LUMINA_FT_VENV", REPO / "build" / "free-threaded" / "venv")) / "bin" / "python"
FT_INTERPRETER = Path(os.environ.get("LUMINA_FT_PREFIX", "/var/cache/luminamoon/python3.13t")) / "bin" / "python3.13t"
CHECKS = ["gil_disabled", "optim_threads", "data_stages_threads", "shared_dedup", "shared_lsh", "stress",
          "step_plan_refusal"]


def _skip_reason() -> str | None:
    if not FT_INTERPRETER.exists():
        return (f"no free-threaded CPython at {FT_INTERPRETER}: `make free-threaded` builds it from Debian's "
                "python3.13 source once per machine (~10 min on the 2-core VM, more than this suite's budget)")
    if not FT_VENV_PYTHON.exists():
        return f"luminamoon is not built for it ({FT_VENV_PYTHON} missing): scripts/build_free_threaded_package.sh"
    return None


@pytest.fixture(scope="module")
def free_threaded_results() -> dict:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    env = dict(os.environ, PYTHONPATH="")  # nothing of this interpreter's site-packages
    proc = subprocess.run([str(FT_VENV_PYTHON), str(HERE / "free_threaded_checks.py"), *CHECKS],
                          capture_output=True, text=True, timeout=900, env=env, cwd=str(REPO))
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["check"]] = r
    assert results, f"the checks printed nothing (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return results


@pytest.mark.parametrize("check", CHECKS)
def test_under_the_free_threaded_interpreter(free_threaded_results, check):
    r = free_threaded_results.get(check)
    assert r is not None, f"{check} did not report"
    assert r["ok"], f"{check} under Python {r['python']}: {r['detail']}"


def test_the_interpreter_really_is_free_threaded(free_threaded_results):
    r = free_threaded_results["gil_disabled"]
    assert "False" in r["detail"], r["detail"]  # a GIL build would say "not a free-threaded-capable interpreter"


# ---- the same invariants in this interpreter (GIL build: threads overlap inside native calls)

sys.path.insert(0, str(HERE))
import free_threaded_checks as checks  # noqa: E402


def test_shared_deduplicator_from_threads_keeps_each_text_once():
    ok, detail = checks.check_shared_dedup(unique=1500, copies=3, batch=23)
    assert ok, detail


def test_shared_minhash_lsh_from_threads_keeps_each_text_once():
    ok, detail = checks.check_shared_lsh(unique=600, copies=3, batch=17)
    assert ok, detail


def test_step_plan_refuses_a_second_thread():
    ok, detail = checks.check_step_plan_refuses_second_thread()
    assert ok, detail
