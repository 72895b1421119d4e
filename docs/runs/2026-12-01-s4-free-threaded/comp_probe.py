import sys, threading, time, os, statistics
import numpy as np
from luminamoon import _native, optim
from luminamoon.optim import functional
_native.set_num_threads(1)
n = int(os.environ.get("N", 4096)); calls = int(os.environ.get("CALLS", 20000))
HP = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)
def pyfunc(param, grad, exp_avg, exp_avg_sq=None, master=None, *, lr, beta1, beta2, eps, weight_decay, tau=0.0, lam=0.0,
         buffer_mode=2, cautious=False, bound_mode=0, bound_ratio=0.0, step, seed=0, check_finite=True,
         stochastic_rounding=True, backend="auto", td_factor="factored", rows=None, grad_scale=1.0):
    return None
def mk():
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32); g = rng.standard_normal(n).astype(np.float32)*0.01
    m = np.zeros(n, np.float32); v = np.zeros(n, np.float32)
    hp = functional.make_hyperparams(**HP, tau=0.0, lam=0.0, buffer_mode=2, cautious=False, bound_mode=0,
                                     bound_ratio=0.0, step=1, check_finite=True, stochastic_rounding=True)
    desc = _native.TensorDesc(x.ctypes.data, g.ctypes.data, m.ctypes.data, v.ctypes.data, 0, n, 0, 0,
                              _native.DTYPE_F32, _native.DTYPE_F32, n, _native.TD_FACTORED)
    options = _native.RunOptions("auto", _native.DEVICE_CPU, 0, 0)
    return x, g, m, v, hp, desc, options
def w_step(s, c):
    x, g, m, v, *_ = s
    for t in range(1, c + 1):
        optim.step(x, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=t)
def w_pyfunc(s, c):
    x, g, m, v, *_ = s
    for t in range(1, c + 1):
        pyfunc(x, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=t)
def w_native(s, c):
    x, g, m, v, *_ = s
    f = _native.functional_step; H = functional._NATIVE_HOOKS
    for t in range(1, c + 1):
        f(x, g, m, v, None, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.0, 0.0, 2, False, 0, 0.0, t, 0, True, True, "auto", "factored", None, 1.0, H)
def w_bare(s, c):
    *_, hp, desc, options = s
    f = _native.step_multi; L = [desc]
    for t in range(1, c + 1):
        f(hp, L, options)
W = dict(step=w_step, pyfunc=w_pyfunc, native=w_native, bare=w_bare)
def timed(work, T):
    states = [mk() for _ in range(T)]
    b = threading.Barrier(T + 1); cpu = [0.0] * T
    def body(i):
        b.wait(); c0 = time.thread_time(); work(states[i], calls // T); cpu[i] = time.thread_time() - c0
    ths = [threading.Thread(target=body, args=(i,)) for i in range(T)]
    [t.start() for t in ths]; b.wait(); w0 = time.perf_counter(); [t.join() for t in ths]
    return time.perf_counter() - w0, sum(cpu)
names = sys.argv[1:] or list(W)
print("load", os.getloadavg())
for name in names:
    timed(W[name], 2)
    r = {1: [], 2: []}
    for _ in range(int(os.environ.get("REPS", 7))):
        for T in (1, 2): r[T].append(timed(W[name], T))
    w1 = statistics.median(a for a, _ in r[1]); w2 = statistics.median(a for a, _ in r[2])
    c1 = statistics.median(b for _, b in r[1]); c2 = statistics.median(b for _, b in r[2])
    print(f"{name:8} wall/call 1thr {w1/calls*1e6:6.2f} us 2thr {w2/calls*1e6:6.2f} us speedup {w1/w2:4.2f}x | CPU/call 1thr {c1/calls*1e6:6.2f} 2thr {c2/calls*1e6:6.2f} us (x{c2/c1:4.2f})")
