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
            target = f" (Highway target {b['target']})" if b.get("target") else ""
            print(f"  {b['name']:<8} available{target}")
        else:
            print(f"  {b['name']:<8} unavailable: {b['why_not']}")
        for device in b.get("devices", []):
            print(f"    device   {device}")
    print("Versions")
    for name, version in info["versions"].items():
        print(f"  {name:<11} {version}")
    print(f"libluminav     {info['library']}")
    return 0
