"""session 20's host probes: the Llama 98M loop of bench/optim_training_loop.py with one optimizer, warmed up.
(As they ran on the device, each probe had these lines inline; they are shared here.)"""
import sys
import torch

sys.path.insert(0, "bench")  # run from the repository root, as the dev20*.sh scripts do
from optim_training_loop import make_optimizer, Loop, llama  # noqa: E402

CFG = dict(hidden=768, layers=12, heads=12, mlp=2048, vocab=8192, seq=512)


def warm_loop(kind):
    """(optimizer, loop at batch 16) after four whole steps, the device idle."""
    model = llama("cuda", **CFG)
    opt = make_optimizer(kind, model)
    loop = Loop(model, opt, 16, CFG["seq"], CFG["vocab"], "cuda")
    for _ in range(4):
        loop.step()
    torch.cuda.synchronize()
    return opt, loop
