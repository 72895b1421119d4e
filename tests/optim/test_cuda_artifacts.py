"""The CUDA backend without a GPU: installed kernel artifacts, link-time independence
from CUDA, and the fallback reasons when no driver can be loaded.

The artifacts are checked with independent readers (json, hashlib, struct on the
ELF header), not with the library's own manifest code.
"""
from __future__ import annotations

import ctypes as C
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import luminamoon

LIB = Path(luminamoon.c_library_path())
KERNEL_DIR = LIB.parent / "luminav_cuda_kernels"


def backends_in_subprocess(env_changes: dict) -> dict:
    """name -> (available, reason) from a fresh process (drivers are probed once per process)."""
    code = (
        "import ctypes as C, json, sys\n"
        "l = C.CDLL(sys.argv[1])\n"
        "l.luminav_backend_name.restype = C.c_char_p\n"
        "l.luminav_backend_unavailable_reason.restype = C.c_char_p\n"
        "print(json.dumps({l.luminav_backend_name(i).decode(): [l.luminav_backend_available(i),"
        " l.luminav_backend_unavailable_reason(i).decode()] for i in range(l.luminav_backend_count())}))\n"
    )
    env = dict(os.environ, **env_changes)
    out = subprocess.run([sys.executable, "-c", code, str(LIB)], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)


def machine_has_cuda_driver() -> bool:
    try:
        C.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_library_links_neither_libcuda_nor_libcudart():
    readelf = shutil.which("readelf")
    if readelf:
        needed = subprocess.run([readelf, "-d", str(LIB)], capture_output=True, text=True, check=True).stdout
        assert "NEEDED" in needed
        assert "libcuda" not in needed and "libcudart" not in needed and "amdhip" not in needed, needed
    ldd = subprocess.run(["ldd", str(LIB)], capture_output=True, text=True, check=True).stdout
    assert "libcuda" not in ldd and "libcudart" not in ldd, ldd


@pytest.mark.skipif(machine_has_cuda_driver(), reason="this machine has a CUDA driver")
def test_without_a_driver_cuda_is_unavailable_and_says_why():
    info = backends_in_subprocess({})
    assert "cuda" in info, info
    available, reason = info["cuda"]
    assert not available
    assert reason.startswith("no CUDA driver: dlopen(libcuda.so.1) failed"), reason
    assert info["scalar"][0]  # the fallback is there


def test_a_library_that_is_not_a_driver_is_refused_by_entry_point():
    info = backends_in_subprocess({"LUMINAV_CUDA_DRIVER": "libc.so.6"})
    available, reason = info["cuda"]
    assert not available
    assert reason == "no CUDA driver: libc.so.6 lacks the entry point cuInit", reason


def test_forcing_cuda_without_a_driver_fails_cleanly_with_the_reason():
    code = (
        "import ctypes as C, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "import test_gpu_cuda as t\n"
        "lib = t.load_library()\n"
        "import numpy as np\n"
        "x = np.ones(16, np.float32); g = np.full(16, 0.1, np.float32); m = np.zeros(16, np.float32)\n"
        "v = np.zeros(16, np.float32)\n"
        "p = lambda a: a.ctypes.data\n"
        "tensor = t.Tensor(p(x), p(g), p(m), p(v), None, 16, 0, 0, 0, 0)\n"
        "hp = t.hyperparams(lib)\n"
        "opts = t.Options(backend=b'cuda', device_type=1)\n"
        "rc = lib.luminav_step_multi(C.byref(hp), (t.Tensor * 1)(tensor), 1, C.byref(opts))\n"
        "print(rc, lib.luminav_last_error_message().decode())\n"
        "assert (x == 1).all() and (m == 0).all()\n"
    )
    env = dict(os.environ, LUMINAV_CUDA_DRIVER="libc.so.6", LUMINAV_LIBRARY=str(LIB))
    out = subprocess.run([sys.executable, "-c", code, str(LIB), str(Path(__file__).resolve().parent.parent)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rc, message = out.stdout.strip().split(" ", 1)
    assert int(rc) == 3  # LUMINAV_STATUS_BACKEND_UNAVAILABLE
    assert "cuda" in message and "lacks the entry point cuInit" in message, message


def test_rocm_probe_names_both_libraries_it_tried():
    info = backends_in_subprocess({})
    if "hip" not in info:
        pytest.skip("built without the ROCm probe")
    available, reason = info["hip"]
    if available:
        pytest.skip("a ROCm device is present")
    if reason.startswith("no ROCm driver"):
        assert "libamdhip64.so.7" in reason and "libamdhip64.so.6" in reason
        assert reason.index("libamdhip64.so.7") < reason.index("libamdhip64.so.6")


def test_luminamoon_info_reports_the_gpu_backends_and_why():
    out = subprocess.run([sys.executable, "-m", "luminamoon.cli", "info"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [line.strip() for line in out.stdout.splitlines()]
    cuda = [line for line in lines if line.startswith("cuda ")]
    assert cuda, out.stdout
    if not machine_has_cuda_driver():
        assert "unavailable: no CUDA driver" in cuda[0]


needs_kernels = pytest.mark.skipif(not (KERNEL_DIR / "manifest.json").is_file(),
                                   reason="built without nvcc (no kernel artifacts)")


@needs_kernels
def test_manifest_lists_every_kernel_and_artifact_with_the_right_fields():
    manifest = json.loads((KERNEL_DIR / "manifest.json").read_text())
    assert manifest["platform"] == "cuda"
    kinds = {a["kind"] for a in manifest["artifacts"]}
    assert kinds == {"cubin", "ptx"}
    archs = [a["arch"] for a in manifest["artifacts"] if a["kind"] == "cubin"]
    assert "sm_90" in archs  # CI builds at least sm_90 and PTX
    names = {k["name"] for k in manifest["kernels"]}
    for p in ("f32", "bf16", "f16"):
        for g in ("f32", "bf16", "f16"):
            assert f"luminav_apply_p{p}_g{g}" in names and f"luminav_reduce_p{p}_g{g}" in names
    assert {"luminav_combine_partials", "luminav_gather_scalars"} <= names
    for k in manifest["kernels"]:
        assert set(k) >= {"name", "signature", "num_trailing_scratch_ptrs", "block_size", "shared_mem_bytes"}
        assert k["num_trailing_scratch_ptrs"] == 0 and k["block_size"] == 256


@needs_kernels
def test_every_artifact_matches_its_size_and_sha256_and_format():
    manifest = json.loads((KERNEL_DIR / "manifest.json").read_text())
    names = [k["name"].encode() for k in manifest["kernels"]]
    library_bytes = LIB.read_bytes()
    for a in manifest["artifacts"]:
        data = (KERNEL_DIR / a["file"]).read_bytes()
        assert len(data) == a["size"], a["file"]
        assert hashlib.sha256(data).hexdigest() == a["sha256"], a["file"]
        if a["kind"] == "cubin":
            ident, machine = data[:16], struct.unpack_from("<H", data, 18)[0]
            assert ident[:4] == b"\x7fELF" and ident[4] == 2 and ident[5] == 1  # ELF64, little-endian
            assert machine == 190  # EM_CUDA
            cc = int(a["arch"][3:])
            assert f"sm_{cc}".encode() in data  # the cubin names its target
        else:
            text = data.decode("ascii")
            assert ".version" in text and f".target {a['arch'].replace('compute_', 'sm_')}" in text
        for name in names:  # every kernel of the manifest is in every artifact
            assert name in data, (a["file"], name)
        # ... and the library carries this very artifact (embedded at build time).
        assert data in library_bytes, a["file"]
