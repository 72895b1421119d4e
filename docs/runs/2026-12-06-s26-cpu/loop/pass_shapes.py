import torch, sys, re, os, statistics, subprocess
from luminamoon.optim import LuminaV
torch.set_num_threads(2)
shapes = {"big": [(4096, 1024)] * 7, "mlp": [(1024, 384)] * 70, "attn": [(384, 384)] * 190,
          "embed": [(8192, 384)] * 9, "wide": [(384, 1024)] * 70}[sys.argv[1]]
ps=[torch.nn.Parameter(torch.randn(s)) for s in shapes]
for p in ps: p.grad=torch.randn_like(p)*0.01
o=LuminaV(ps,lr=1e-3,mode="tdclm")
for r in range(12): o.step()
