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


def test_the_factor_kernels_take_the_jits_warps():
    """Note [Triton factor tiles]: every AOT factor kernel launches with the warps the JIT gives the same
    launch (the sums by tile and alignment, the factor kernels at FACTOR_FORM_WARPS), so that the AOT
    step measures what the JIT's did (session 32: at 2 warps the AOT sums only matched the JIT's once
    their hints did)."""
    from luminamoon.optim import triton_kernels as tk
    from luminamoon.optim import triton_step as ts
    b = _build_module()
    warps = {name: (v[3] if len(v) > 3 else b.NUM_WARPS) for name, v in b.VARIANTS.items()}
    sums = [n for n in warps if "factor_sums_" in n or "factored_sums_" in n]
    assert len(sums) == 16  # 2 gradient dtypes x 2 tiles, one-tensor and multi-tensor, each with and without _a16
    for name in sums:
        tile = b.VARIANTS[name][1]["BLOCK_C"]
        one_tensor_aligned = name.startswith("luminav_triton_factor_sums_") and name.endswith("_a16")
        expected = (ts.FACTOR_WARPS_ONE_ALIGNED if one_tensor_aligned else ts.FACTOR_WARPS)[tile]
        assert warps[name] == expected, name
    assert tk.FACTOR_WARPS_ONE_ALIGNED[tk.FACTOR_WIDE_COLS] == 2 and tk.FACTOR_WARPS[tk.FACTOR_WIDE_COLS] == 4
    forms = [n for n in warps if n.endswith(("factor_rows", "factor_cols", "factored_rows", "factored_cols"))]
    assert len(forms) == 4
    assert all(warps[n] == ts.FACTOR_FORM_WARPS == 8 for n in forms), {n: warps[n] for n in forms}
