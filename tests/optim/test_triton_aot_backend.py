"""The triton-aot backend on the CPU machine: registered, chosen by name and by LUMINAV_FORCE_BACKEND,
and every way it cannot run (no kernels, kernels of another build, no GPU) a clear error, never a crash.

Each case runs in a fresh process: the library probes a backend once per process.
Cost: six interpreter starts, ~4 s in all.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

STEP = """
import numpy as np
from luminamoon import optim
x = np.ones((8, 8), np.float32); g = np.full((8, 8), 0.1, np.float32)
m = np.zeros((8, 8), np.float32)
mode = {mode!r}
v = np.zeros(64 if mode == 2 else 16, np.float32)  # CLM: N; TD-CLM factored: R + C
before = x.copy()
try:
    optim.step(x, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1,
               backend={backend!r}, buffer_mode=mode)
    print("OK", optim.last_backend())
except Exception as e:
    print("ERROR", type(e).__name__, e)
assert (x == before).all() and (m == 0).all() and (v == 0).all(), "a refused step wrote"
reason = dict((n, r) for n, a, r in optim.backends())
print("REASON", reason.get("triton-aot", "not compiled in"))
"""


def _run(backend: str, mode: int = 2, **env) -> tuple[str, str]:
    full = dict(os.environ, **env)
    out = subprocess.run([sys.executable, "-c", STEP.format(backend=backend, mode=mode)], capture_output=True, text=True,
                         env=full, timeout=120)
    assert out.returncode == 0, out.stderr
    first, _, rest = out.stdout.partition("\n")
    return first, rest.strip()


def _triton_aot_compiled() -> bool:
    from luminamoon import optim
    return any(name == "triton-aot" for name, _, _ in optim.backends())


pytestmark = pytest.mark.skipif(not _triton_aot_compiled(), reason="libluminav built without the CUDA host side")


def test_forced_without_kernels_names_the_directory(tmp_path):
    result, reason = _run("auto", LUMINAV_FORCE_BACKEND="triton-aot", LUMINAV_TRITON_AOT_DIR=str(tmp_path))
    assert result.startswith("ERROR BackendUnavailableError"), result
    assert f"backend 'triton-aot' is unavailable: Triton AOT kernels in {tmp_path}/cuda" in result
    assert "LUMINA_TRITON_AOT" in result
    assert reason.startswith("REASON Triton AOT kernels in"), reason


def test_kernels_of_another_build_are_refused_by_signature(tmp_path):
    """A manifest whose apply kernel takes other arguments than the launcher packs (stale kernels)."""
    kernels = []
    for name in ("luminav_triton_prepare", "luminav_triton_reduce_gf32", "luminav_triton_reduce_gbf16",
                 "luminav_triton_finalize", "luminav_triton_apply_pf32_gf32", "luminav_triton_apply_pbf16_gbf16",
                 "luminav_triton_commit", "luminav_triton_advance"):
        kernels.append({"name": name, "signature": "(x_ptr:*fp32)", "num_trailing_scratch_ptrs": 2,
                        "block_size": 128, "shared_mem_bytes": 0, "elements_per_program": 1024})
    artifacts = [{"arch": "sm_90", "kind": "cubin", "file": f"{k['name']}.cubin", "size": 1, "sha256": "0" * 64,
                  "kernel": k["name"], "symbol": k["name"]} for k in kernels]
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "manifest.json").write_text(json.dumps(
        {"platform": "cuda", "triton_version": "3.6.0", "artifacts": artifacts, "kernels": kernels}))
    result, _ = _run("triton-aot", LUMINAV_TRITON_AOT_DIR=str(tmp_path))
    assert result.startswith("ERROR BackendUnavailableError"), result
    assert "kernel luminav_triton_prepare has signature \"(x_ptr:*fp32)\", this library packs" in result


def test_host_memory_is_not_served(tmp_path):
    """With the build's kernels (or none), host arrays never reach the backend: unavailable here
    (no GPU), or on a GPU machine the wrong memory."""
    result, reason = _run("triton-aot")
    assert result.startswith("ERROR"), result
    assert ("is unavailable" in result) or ("works on CUDA memory but device_type is CPU" in result), result


def test_info_reports_triton_aot_once_with_its_reason():
    from luminamoon.info import collect
    entries = [b for b in collect()["backends"] if b["name"] == "triton-aot"]
    assert len(entries) == 1, entries
    if not entries[0]["available"]:
        assert entries[0]["why_not"], entries


@pytest.mark.parametrize("backend", ["auto", "triton-aot"])
def test_tdclm_routes_to_triton_aot_when_forced(backend):
    """TD-CLM (factored) forced onto triton-aot reaches the backend (no TD-CLM refusal any more) and
    fails as any step does where it cannot run here (no GPU): the backend's reason, nothing written.
    On a GPU machine with the kernels the step would run (tests/optim/test_gpu_triton_aot.py)."""
    env = {"LUMINAV_FORCE_BACKEND": "triton-aot"} if backend == "auto" else {}
    result, reason = _run(backend, mode=1, **env)
    if result.startswith("OK"):
        pytest.skip("triton-aot runs here (a GPU): the GPU tests cover it")
    assert result.startswith("ERROR"), result
    assert "CLM steps only" not in result, result
    assert ("backend 'triton-aot' is unavailable" in result) or ("works on CUDA memory" in result), result
