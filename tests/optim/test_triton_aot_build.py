"""build_triton_aot.py's manifests on the CPU machine: each platform's kernel entry launches with the
dynamic shared memory its own target needs (Note [shared memory per platform]).

The case that faulted on the H200 in session 2: the bf16 apply kernel with the 16-byte hints needs
shared memory on sm_90 and none on gfx942, and the manifest had given the CUDA launch the gfx942
figure. The reference is Triton's own metadata for each target, compiled here independently of
the build function (the second compile of a target hits Triton's cache).
Cost: one kernel for two targets, ~10-20 s on the 2-core VM.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

BUILD_PY = Path(__file__).resolve().parents[2] / "src" / "optim" / "triton" / "build_triton_aot.py"
KERNEL = "luminav_triton_apply_pbf16_gbf16_a16"


def _build_module():
    spec = importlib.util.spec_from_file_location("luminav_build_triton_aot", BUILD_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Triton's own metadata.shared of KERNEL for each target, in a process without TRITON_INTERPRET (the
# suite's interpreter mode is process-wide, and interpreted kernels cannot be compiled).
SHARED_OF = """
import importlib.util, json, sys
import triton
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("b", sys.argv[1]); b = importlib.util.module_from_spec(spec)
spec.loader.exec_module(b)
fn_name, constexprs, _ = b.VARIANTS[sys.argv[2]]
fn = getattr(b.load_kernels(), fn_name)
sig, _ = b.signature_of(fn, constexprs)
attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in b.ALIGNED_ARGS if a in sig}
print(json.dumps({arch: int(triton.compile(ASTSource(fn, sig, constexprs=constexprs, attrs=attrs),
                                           target=b.target_of(arch),
                                           options=dict(num_warps=b.NUM_WARPS, enable_fp_fusion=False)
                                           ).metadata.shared) for arch in ("sm_90", "gfx942")}))
"""


def test_each_platform_manifest_gives_its_own_targets_shared_memory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(BUILD_PY), "--out", str(out), "--targets", "sm_90,gfx942", "--kernels",
                    KERNEL], check=True, env=env, timeout=300, capture_output=True)
    probe = subprocess.run([sys.executable, "-c", SHARED_OF, str(BUILD_PY), KERNEL], check=True, env=env,
                           timeout=300, capture_output=True, text=True)
    shared = json.loads(probe.stdout)
    need = {"cuda": shared["sm_90"], "rocm": shared["gfx942"]}
    assert need["cuda"] > need["rocm"], need  # the layouts differ: the case this test is about
    for platform, expected in need.items():
        manifest = json.loads((out / platform / "manifest.json").read_text())
        (entry,) = [k for k in manifest["kernels"] if k["name"] == KERNEL]
        assert entry["shared_mem_bytes"] == expected, (platform, entry)
        (artifact,) = manifest["artifacts"]
        assert artifact["shared_mem_bytes"] == expected


def test_the_largest_need_of_a_platform_wins():
    b = _build_module()
    artifacts = [{"kernel": "k", "shared_mem_bytes": 0}, {"kernel": "k", "shared_mem_bytes": 4096},
                 {"kernel": "other", "shared_mem_bytes": 8192}]
    assert b.shared_mem_bytes(artifacts, "k") == 4096
    assert b.shared_mem_bytes(artifacts, "missing") == 0
