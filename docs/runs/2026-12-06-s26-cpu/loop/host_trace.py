import torch, time, statistics, sys, os
sys.path.insert(0, "bench")
from llama_model import llama
from luminamoon.optim import LuminaV
torch.set_num_threads(2)
cfg=dict(hidden=384, layers=12, heads=6, mlp=1024, vocab=8192, seq=64)
m=llama("cpu", **cfg)
kind=sys.argv[1]
o = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True) if kind=="torch" else LuminaV(m.parameters(), lr=1e-3, mode=kind, check_finite=os.environ.get("CHECK","1")=="1")
tok=torch.randint(0,8192,(16,65))
ts=[]
for r in range(8):
    o.zero_grad(set_to_none=True)
    loss=torch.nn.functional.cross_entropy(m(input_ids=tok[:,:-1]).logits.reshape(-1,8192), tok[:,1:].reshape(-1))
    loss.backward()
    t0=time.perf_counter(); o.step(); ts.append((time.perf_counter()-t0)*1e3)
    if os.environ.get("HOT")=="0" : pass
print(kind, [round(x,2) for x in ts[2:]])
