"""Run by test_vulkan_backend.py in a fresh process, so that LUMINAV_VULKAN_INT64 (read
when the Vulkan context is created) applies: identity steps (lr = 0, no decay) of bf16
and f16 parameters with fp32 masters on the vulkan backend through the C API, so that
each 16-bit result is the stochastic rounding of its master by the spec's hash. The
seed, step and index offset have bits in both 32-bit halves, and the indices cross
2^32. Prints the vulkan device line, saves the masters and the 16-bit bits to argv[1]."""
from __future__ import annotations

import ctypes as C
import sys

import numpy as np

from luminamoon import _native, optim
from luminav_ctypes import Options, Tensor, hyperparams, load_library

N = 6000
SEED = 0xF0E1D2C3B4A59687
STEP = (1 << 35) + 3
OFFSET = (1 << 32) - 3000  # indices 2^32 - 3000 .. 2^32 + 2999: a carry into the high word
DTYPES = {"bf16": 1, "f16": 2}  # LUMINAV_DTYPE_*


def main() -> int:
    names = [name for name, _, _ in optim.backends()]
    print(_native.backend_devices(names.index("vulkan")))
    lib = load_library()
    rng = np.random.default_rng(11)
    # Every binade of both formats, subnormals and values beyond f16's range included.
    master = (rng.standard_normal(N) * np.exp2(rng.uniform(-30, 18, N))).astype(np.float32)
    hp = hyperparams(lib, lr=0.0, weight_decay=0.0, stochastic_rounding=1, step=STEP)
    out = {"master": master.copy()}
    for name, code in DTYPES.items():
        param = np.zeros(N, np.uint16)
        w = master.copy()
        zeros = [np.zeros(N, np.float32) for _ in range(3)]
        t = Tensor(param.ctypes.data, zeros[0].ctypes.data, zeros[1].ctypes.data, zeros[2].ctypes.data,
                   w.ctypes.data, N, OFFSET, SEED, code, 0, 0, 0)
        if lib.luminav_step(C.byref(hp), C.byref(t), C.byref(Options(backend=b"vulkan"))) != 0:
            print(lib.luminav_last_error_message().decode(), file=sys.stderr)
            return 1
        if lib.luminav_last_backend().decode().split(":")[0] != "vulkan":
            print("ran on", lib.luminav_last_backend().decode(), file=sys.stderr)
            return 1
        out[name] = param
    np.savez(sys.argv[1], **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
