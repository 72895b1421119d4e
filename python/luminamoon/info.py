"""`luminamoon info`: the CPU features, each LuminaV backend and whether it can run here, and versions."""
from __future__ import annotations

import importlib
import platform
from pathlib import Path

import numpy as np

from . import __version__, c_library_path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _simd_target() -> str | None:
    """The Highway target the simd backend dispatches to (from a one-element step)."""
    from . import optim
    one = np.zeros(1, np.float32)
    try:
        optim.step(one.copy(), np.full(1, 0.5, np.float32), one.copy(), one.copy(), lr=1e-3, beta1=0.9,
                   beta2=0.999, eps=1e-8, weight_decay=0.0, step=1, backend="simd")
    except (RuntimeError, ValueError):
        return None
    label = optim.last_backend()
    return label.split(":", 1)[1] if ":" in label else None


def _version_of(module: str) -> str:
    try:
        return getattr(importlib.import_module(module), "__version__", "installed")
    except ImportError:
        return "not installed"


def _triton_backends(listed: set[str]) -> list[dict]:
    """backend="triton" (the JIT kernels through torch) and the Triton AOT kernels built with the library
    that the library's own registry (`listed`) does not report: the ROCm ones, and the CUDA ones of a
    build without the triton-aot backend."""
    import importlib.util
    import json
    out = []
    if importlib.util.find_spec("triton") is None:
        out.append({"name": "triton", "available": False,
                    "why_not": "the triton package is not installed (pip install triton)"})
    else:
        out.append({"name": "triton", "available": True, "why_not": "",
                    "target": "JIT: LuminaV(backend='triton') on a CUDA or ROCm torch device; on the CPU only "
                              "under TRITON_INTERPRET=1"})
    kernels = Path(c_library_path()).parent / "luminav_triton_kernels"
    for platform_name in ("cuda", "rocm"):
        manifest = kernels / platform_name / "manifest.json"
        name = "triton-aot" if platform_name == "cuda" else "triton-aot-rocm"
        if name in listed:
            continue
        try:
            m = json.loads(manifest.read_text())
        except (OSError, ValueError):
            out.append({"name": name, "available": False,
                        "why_not": f"built without Triton AOT kernels (no {manifest})"})
            continue
        archs = sorted({a["arch"] for a in m["artifacts"]})
        if platform_name == "rocm":
            note = (f"Triton {m['triton_version']} kernels built for {', '.join(archs)}; the C++ loader "
                    "(src/optim/triton) launches them through hipModuleLaunchKernel, but no AMD GPU is reachable "
                    "from this project's machines: the HIP launch has never run")
        else:
            note = (f"Triton {m['triton_version']} kernels built for {', '.join(archs)}, but this build of "
                    "libluminav has no triton-aot backend to run them")
        out.append({"name": name, "available": False, "why_not": note})
    return out


def collect() -> dict:
    """Everything `luminamoon info` prints, as data."""
    from . import _native
    backends = []
    for index, (name, available, why_not) in enumerate(_native.backends()):
        entry = {"name": name, "available": bool(available), "why_not": why_not}
        if name == "simd" and available:
            entry["target"] = _simd_target()
        # e.g. every Vulkan device, its type and why the backend does or does not use it
        devices = _native.backend_devices(index)
        if devices:
            entry["devices"] = devices.splitlines()
        backends.append(entry)
    backends.extend(_triton_backends({b["name"] for b in backends}))
    return {
        "cpu": {"model": _cpu_model(), "machine": platform.machine(), "features": _native.cpu_features().split(","),
                "luminav_threads": _native.get_num_threads()},
        "backends": backends,
        "versions": {"luminamoon": __version__, "libluminav": _native.version(),
                     "python": platform.python_version(), "numpy": np.__version__,
                     "torch": _version_of("torch"), "pyarrow": _version_of("pyarrow")},
        "library": c_library_path(),
    }


def main() -> int:
    info = collect()
    cpu = info["cpu"]
    print(f"CPU            {cpu['model']} ({cpu['machine']})")
    print(f"CPU features   {', '.join(cpu['features'])}")
    print(f"CPU threads    {cpu['luminav_threads']} (LuminaV; LUMINAV_NUM_THREADS overrides)")
    print("Backends")
    for b in info["backends"]:
        if b["available"]:
            target = b.get("target") or ""
            target = f" (Highway target {target})" if b["name"] == "simd" and target else f" ({target})" if target else ""
            print(f"  {b['name']:<8} available{target}")
        else:
            print(f"  {b['name']:<8} unavailable: {b['why_not']}")
        for device in b.get("devices", []):
            # The vulkan backend's last line says what its asynchronous step covers, not a device.
            label = "note" if device.startswith("asynchronous step") else "device"
            print(f"    {label:<8} {device}")
    print("Versions")
    for name, version in info["versions"].items():
        print(f"  {name:<11} {version}")
    print(f"libluminav     {info['library']}")
    return 0
