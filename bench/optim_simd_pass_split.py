"""Where the time of one fp32 step goes at large N: pass 1 (the finite check's read of the
gradient; a whole CLM step's pass 1 is the check alone, while luminav_reduce and TD-CLM's
step also sum g^2) and pass 2 (the apply pass) timed apart, for CLM and TD-CLM, against
torch's fused AdamW (bare, and behind GradScaler's finite check: the guarantee our default
step gives) and a plain read of the gradient (torch's sum), all on the same memory (torch's
own parameter, gradient and state tensors), for 1 and 2 threads on both sides.

    .venv/bin/python bench/optim_simd_pass_split.py --log2-n 26 --threads 1 2 --rounds 5
    .venv/bin/python bench/optim_simd_pass_split.py --log2-n 26 --threads 2 --bf16-master

Each figure is the median over rounds of the median of 5 timed calls (after a warm-up call);
the cases of one round run back to back, so a change of load hits them alike.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from luminamoon import _native
from harness import measure
from optim_simd_throughput import torch_checked_step  # the same anchor in both benches


def ok(result) -> None:
    """Raises unless a native call returned status 0."""
    code = result[0] if isinstance(result, tuple) else result
    if code != 0:
        raise RuntimeError(result)


def hyperparams(mode: int, check: int, rounding: int = 1):
    hp = _native.Hyperparams()
    hp.buffer_mode, hp.step, hp.check_finite, hp.stochastic_rounding = mode, 1, check, rounding
    return hp


def cases(n: int) -> dict:
    p = torch.nn.Parameter(torch.randn(n))
    p.grad = torch.randn(n) * 1e-2
    opt = torch.optim.AdamW([p], fused=True)
    opt.step()  # creates exp_avg / exp_avg_sq: our step uses the same tensors
    st = opt.state[p]
    desc = _native.TensorDesc(p.data_ptr(), p.grad.data_ptr(), st["exp_avg"].data_ptr(),
                              st["exp_avg_sq"].data_ptr(), 0, n, 0, 1, _native.DTYPE_F32, _native.DTYPE_F32)
    s = torch.full((1,), 1e-4)  # TD-CLM's scalar; its m is torch's exp_avg as well
    td_desc = _native.TensorDesc(p.data_ptr(), p.grad.data_ptr(), st["exp_avg"].data_ptr(),
                                 s.data_ptr(), 0, n, 0, 1, _native.DTYPE_F32, _native.DTYPE_F32)
    options = _native.RunOptions("simd")

    checked, unchecked = hyperparams(2, 1), hyperparams(2, 0)
    td_checked, td_unchecked = hyperparams(1, 1), hyperparams(1, 0)
    no_globals = _native.Globals()
    td_globals = _native.Globals()
    td_globals.second_moment = 1e-4

    return {
        "luminav_reduce round 0 (finite check + sum g^2, the pass-split API)": lambda: ok(_native.reduce(checked, desc, 0, no_globals, options)),
        "pass 2 (apply)": lambda: ok(_native.apply(unchecked, desc, no_globals, options)),
        "step, finite check on (pass 1 + 2)": lambda: ok(_native.step_multi(checked, [desc], options)),
        "step, finite check off (pass 2 only)": lambda: ok(_native.step_multi(unchecked, [desc], options)),
        "TD-CLM pass 1 (finite check + sum g^2)": lambda: ok(_native.reduce(td_checked, td_desc, 0, no_globals, options)),
        "TD-CLM pass 2 (apply)": lambda: ok(_native.apply(td_unchecked, td_desc, td_globals, options)),
        "TD-CLM step, finite check on": lambda: ok(_native.step_multi(td_checked, [td_desc], options)),
        "torch AdamW fused step": opt.step,
        "torch AdamW fused step behind GradScaler's finite check": torch_checked_step(opt, [p.grad]),
        "torch sum of the gradient (a plain read)": lambda: p.grad.sum(),
    }, (p, opt, s)


def bf16_master_cases(n: int) -> dict:
    """bf16 parameters and gradients with fp32 master weights: CLM and TD-CLM steps and
    passes, with and without stochastic rounding (no torch anchor: torch's fused AdamW has
    no master-weight mode)."""
    master = torch.randn(n)
    param, grad = master.to(torch.bfloat16), (torch.randn(n) * 1e-2).to(torch.bfloat16)
    m, v, s = torch.zeros(n), torch.full((n,), 1e-6), torch.full((1,), 1e-4)
    bf16 = _native.DTYPE_BF16

    def desc(second):
        return _native.TensorDesc(param.data_ptr(), grad.data_ptr(), m.data_ptr(), second.data_ptr(),
                                  master.data_ptr(), n, 0, 7, bf16, bf16)
    clm, td = desc(v), desc(s)
    options = _native.RunOptions("simd")

    td_globals = _native.Globals()
    td_globals.second_moment = 1e-4

    return {
        "CLM step (finite check, stochastic rounding)": lambda: ok(_native.step_multi(hyperparams(2, 1, 1), [clm], options)),
        "CLM step, round to nearest": lambda: ok(_native.step_multi(hyperparams(2, 1, 0), [clm], options)),
        "CLM pass 2 (apply)": lambda: ok(_native.apply(hyperparams(2, 0, 1), clm, _native.Globals(), options)),
        "TD-CLM step (finite check, stochastic rounding)": lambda: ok(_native.step_multi(hyperparams(1, 1, 1), [td], options)),
        "TD-CLM step, round to nearest": lambda: ok(_native.step_multi(hyperparams(1, 1, 0), [td], options)),
        "TD-CLM pass 1 (finite check + sum g^2)": lambda: ok(_native.reduce(hyperparams(1, 1, 1), td, 0, _native.Globals(), options)),
        "TD-CLM pass 2 (apply)": lambda: ok(_native.apply(hyperparams(1, 0, 1), td, td_globals, options)),
        "TD-CLM pass 2 (apply), round to nearest": lambda: ok(_native.apply(hyperparams(1, 0, 0), td, td_globals, options)),
        "torch sum of the gradient (a plain read)": lambda: grad.sum(),
    }, (master, param, grad, m, v, s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log2-n", type=int, default=26)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bf16-master", action="store_true",
                    help="bf16 parameters/gradients with fp32 master weights instead of fp32")
    args = ap.parse_args()
    n = 1 << args.log2_n
    run, keep = (bf16_master_cases if args.bf16_master else cases)(n)
    dtype = "bf16 + fp32 master" if args.bf16_master else "fp32"
    print(f"N = 2^{args.log2_n}, {dtype}, {_native.last_backend() or 'simd'}; ms per call, median of {args.rounds} rounds")
    print()
    print("| case | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}, ms" for t in args.threads) + " |")
    print("|---" * (len(args.threads) + 1) + "|")
    results = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        _native.set_num_threads(threads)
        samples = {k: [] for k in run}
        for _ in range(args.rounds):
            for k, f in run.items():
                samples[k].append(measure(f, 5).wall_s)
        results[threads] = {k: statistics.median(v) for k, v in samples.items()}
    for k in run:
        print(f"| {k} | " + " | ".join(f"{results[t][k] * 1e3:.3g}" for t in args.threads) + " |")
    print()
    if args.bf16_master:
        for t in args.threads:
            r = results[t]
            print(f"{t} thread(s): TD-CLM / CLM {r['CLM step (finite check, stochastic rounding)'] / r['TD-CLM step (finite check, stochastic rounding)']:.2f}x")
        del keep
        return 0
    for t in args.threads:
        r = results[t]
        clm_on, clm_off = r["step, finite check on (pass 1 + 2)"], r["step, finite check off (pass 2 only)"]
        torch_bare = r["torch AdamW fused step"]
        torch_checked = r["torch AdamW fused step behind GradScaler's finite check"]
        plain_read = r["torch sum of the gradient (a plain read)"]
        print(f"{t} thread(s): our speed / torch fused's: finite check on {torch_bare / clm_on:.2f}x, "
              f"off {torch_bare / clm_off:.2f}x; both checked (torch behind GradScaler's check) "
              f"{torch_checked / clm_on:.2f}x; the step's own pass 1 (check on minus check off: the "
              f"finite check alone) / plain read time {(clm_on - clm_off) / plain_read:.2f}; "
              f"TD-CLM / CLM {clm_on / r['TD-CLM step, finite check on']:.2f}x; TD-CLM pass 1 / plain "
              f"read time {r['TD-CLM pass 1 (finite check + sum g^2)'] / plain_read:.2f}")
    del keep
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
