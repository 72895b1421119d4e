import sys, time, os, glob, resource
import numpy as np
from luminamoon.data.pipeline import PipelineConfig, _backend
shards = sorted(glob.glob("/tmp/s16real/*.jsonl"))
cfg = PipelineConfig(format="ndjson").to_native()
cfg["num_threads"] = 1
t0 = time.perf_counter(); tasks = _backend()._ShardTasks(cfg, shards); t1 = time.perf_counter()
print(f"construct {t1-t0:.3f}", flush=True)
which = [int(x) for x in sys.argv[1].split(",")]
for s in which:
    r0 = resource.getrusage(resource.RUSAGE_SELF); a = time.perf_counter()
    m = tasks.map_shard(s, save_batches=True)
    b = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_SELF)
    out = f"/tmp/p17/fin-{os.getpid()}-{s}"
    import shutil; shutil.rmtree(out, ignore_errors=True)
    e = np.empty(0, np.int64)
    tasks.finish_shard(s, out, e, np.empty(0, np.uint8), e, m["batches"])
    c = time.perf_counter(); r2 = resource.getrusage(resource.RUSAGE_SELF)
    print(f"shard {s}: map {b-a:.3f} s (user {r1.ru_utime-r0.ru_utime:.3f} sys {r1.ru_stime-r0.ru_stime:.3f}) finish {c-b:.3f} s (user {r2.ru_utime-r1.ru_utime:.3f} sys {r2.ru_stime-r1.ru_stime:.3f})", flush=True)
    pass
