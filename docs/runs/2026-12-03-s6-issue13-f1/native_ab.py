# native_ab.py BEFORE_LIB AFTER_LIB [CALLS]: the library's part of the F1 step, both builds in one
# process. Each libluminav copy is loaded with ctypes (RTLD_LOCAL, by path: two files are two copies,
# each with its own thread-local memos; one path given twice is one copy); each steps its own 1,000
# tensors of 4 floats (numpy buffers) through
# luminav_step_multi (validation, work lists, backend, reduce, apply: luminav_step_groups' path for
# one group), with the gradients switched between two sets before every call (every pointer moves,
# as after zero_grad(set_to_none=True)); the two libraries alternate call by call. Prints the median
# thread CPU of a call per library in us per tensor, and the median of the per-pair ratios.
import ctypes, statistics, sys, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from luminav_ctypes import Hyperparams as Hyper, Tensor  # noqa: E402  (the tests' mirrors of luminav.h)

n, calls = 1000, int(sys.argv[3]) if len(sys.argv) > 3 else 400
libs = [ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL) for path in sys.argv[1:3]]
keep = []
def buf(value):
    a = np.full(4, value, dtype=np.float32); keep.append(a); return a.ctypes.data
arrays = []
for lib in libs:  # each library steps its own copy of the tensors
    sets = []
    for g in range(2):
        ts = (Tensor * n)()
        arrays.append(ts)
        sets.append(ts)
    for i in range(n):
        p, m, v = buf(1.0), buf(0.0), buf(0.0)
        for g in range(2):
            t = sets[g][i]
            t.param, t.exp_avg, t.exp_avg_sq, t.grad, t.num_elements = p, m, v, buf(0.01), 4
    lib.sets = sets
    lib.hp = Hyper()
    lib.luminav_hyperparams_init(ctypes.byref(lib.hp))
    lib.luminav_step_multi.argtypes = [ctypes.POINTER(Hyper), ctypes.POINTER(Tensor), ctypes.c_size_t, ctypes.c_void_p]
cpu = [[], []]
for c in range(calls + 20):
    for k, lib in enumerate(libs):
        ts = lib.sets[c & 1]
        t0 = time.thread_time()
        status = lib.luminav_step_multi(ctypes.byref(lib.hp), ts, n, None)
        t1 = time.thread_time()
        assert status == 0, status
        if c >= 20:
            cpu[k].append((t1 - t0) * 1e6 / n)
ratios = [a / b for b, a in zip(*cpu) if b > 0]
print(f"before {statistics.median(cpu[0]):.3f} us/tensor | after {statistics.median(cpu[1]):.3f} us/tensor | "
      f"after/before per pair median {statistics.median(ratios):.3f} | calls {calls}")
