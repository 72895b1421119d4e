"""Issue 17, session 27: two executors side by side on one Ray cluster of this
machine, 1 node then 2 nodes (one CPU each), round-robin, medians: main's
ray_executor (installed beside the new one as luminamoon.data.ray_executor_old,
`git show <rev>:python/luminamoon/data/ray_executor.py`) against the working
tree's. Y2 = wall(1 node) / wall(2 nodes), per executor.

    PYTHONPATH=bench:tests/data python docs/runs/2026-12-06-s27-data/ray_ab.py [--rounds 9] [--size-mb 400]
"""
import argparse, json, os, shutil, statistics, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=9)
ap.add_argument("--size-mb", type=int, default=400)
ap.add_argument("--work", default="/tmp/luminamoon-ray-bench")
args = ap.parse_args()
os.environ["HOME"] = os.path.join(args.work, "home")
import ray
from harness import measure_side_by_side
from pipeline_bench import corpus
from pipeline_ray import wait_alive_nodes
from ray_cluster import Cluster, LoopbackNetns, connect
from luminamoon.data import ray_executor as new, ray_executor_old as old
from luminamoon.data.pipeline import PipelineConfig

shards = corpus(os.path.join(args.work, "corpus"), args.size_mb)
netns = LoopbackNetns()
config = PipelineConfig(format="ndjson")
outs = {"main": os.path.join(args.work, "ab", "main"), "change": os.path.join(args.work, "ab", "change")}
mods = {"main": old, "change": new}
fns = {k: (lambda k=k: mods[k].run_on_ray(config, shards, outs[k], resume=False)) for k in mods}
clear = lambda name: shutil.rmtree(outs[name], ignore_errors=True)
result = {}
cluster = Cluster(os.path.join(args.work, "cluster"))
try:
    cluster.stop_worker()
    connect(cluster.address)
    wait_alive_nodes(1)
    t1 = measure_side_by_side(fns, rounds=args.rounds, before=clear)
    ray.shutdown()
    cluster.start_worker()
    connect(cluster.address)
    wait_alive_nodes(2)
    t2 = measure_side_by_side(fns, rounds=args.rounds, before=clear)
    ray.shutdown()
finally:
    if ray.is_initialized():
        ray.shutdown()
    cluster.stop()
for k in mods:
    result[k] = {"1 node": t1[k].samples, "2 nodes": t2[k].samples,
                 "median 1": t1[k].wall_s, "median 2": t2[k].wall_s, "Y2": t1[k].wall_s / t2[k].wall_s}
    print(f"{k}: 1 node {t1[k].wall_s:.3f} s, 2 nodes {t2[k].wall_s:.3f} s, Y2 {t1[k].wall_s / t2[k].wall_s:.3f}x; "
          f"walls 1: {', '.join(f'{w:.2f}' for w in t1[k].samples)}; 2: {', '.join(f'{w:.2f}' for w in t2[k].samples)}")
print(json.dumps(result))
