import sys, time, os, glob, resource
import numpy as np
from luminamoon.data.pipeline import PipelineConfig, _backend
shards = sorted(glob.glob("/tmp/s16real/*.jsonl"))
cfg = PipelineConfig(format="ndjson").to_native(); cfg["num_threads"] = 1
tasks = _backend()._ShardTasks(cfg, shards)
def run(s, label):
    r0 = resource.getrusage(resource.RUSAGE_SELF); a = time.perf_counter()
    m = tasks.map_shard(s, save_batches=True)
    b = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{label} shard {s}: map {b-a:.3f} s user {r1.ru_utime-r0.ru_utime:.3f} sys {r1.ru_stime-r0.ru_stime:.3f} minflt {r1.ru_minflt-r0.ru_minflt}", flush=True)
    return m
for i in range(3): m = run(i, "back-to-back"); del m
for gap in (4, 8):
    time.sleep(gap); m = run(3, f"after {gap} s idle"); del m
