"""Y2 (Ray 2 nodes against 1 node) by paired rounds: both clusters up at
once, each with its own warm driver process, and every round times one run
on each, alternating which goes first. bench/pipeline_ray.py times all the
1-node rounds, then restarts the cluster with 2 nodes and times those: a
change in this machine's speed between the two phases moves its Y2 (by up
to 0.08 on the 2-core VM of docs/benchmarks.md, issue 17, session 27). Here
each round gives its own ratio, and the median of those ratios does not
carry that drift.

    PYTHONPATH=bench:tests/data python bench/pipeline_ray_paired.py [--size-mb 400 | --corpus DIR] [--rounds 9]

The two clusters are `ray start` nodes of one CPU each on this machine
(tests/data/ray_cluster.py, inside a loopback-only network namespace when
run as root): one head alone, one head and a worker. A driver joins a
cluster once (a Ray job's worker processes are its own: a new connection
each round would time their start), runs one untimed warm-up, and then runs
the pipeline when told to, reporting the wall time. Every Ray output is
checked equal to the local run's (1 thread, once). Prints the walls, the
ratio of the medians and the median of the per-round ratios; --json writes
them.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "data"))


def serve(address: str, nodes: int, inputs: list[str], out: str) -> None:
    """A warm driver: joins the cluster, waits for its nodes, then runs the
    pipeline once per 'run' line on stdin and prints {"wall_s": ...}."""
    import ray
    from pipeline_ray import wait_alive_nodes
    from ray_cluster import connect
    from luminamoon.data import FusedPipeline

    connect(address)
    wait_alive_nodes(nodes)
    pipeline = FusedPipeline(format="ndjson")
    for line in sys.stdin:
        if line.strip() != "run":
            break
        shutil.rmtree(out, ignore_errors=True)  # each run starts on an empty output directory, untimed
        start = time.perf_counter()
        pipeline.run(inputs, out, resume=False, executor="ray")
        print(json.dumps({"wall_s": time.perf_counter() - start}), flush=True)
    ray.shutdown()


class Driver:
    def __init__(self, address: str, nodes: int, inputs: list[str], out: str, log: str) -> None:
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", address, str(nodes), out, *inputs],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.out = out

    def run(self) -> dict:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the driver exited ({self.proc.poll()}): see {self.log.name}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        address, nodes, out, *inputs = sys.argv[2:]
        serve(address, int(nodes), inputs, out)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=400)
    ap.add_argument("--corpus", help="a directory of *.jsonl[.gz] shards instead of the generated corpus")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--work", default="/tmp/luminamoon-ray-paired")
    ap.add_argument("--json")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    # A HOME of our own: another Ray user's ~/.ray/auth_token would turn on token auth
    os.environ["HOME"] = os.path.join(args.work, "home")
    os.makedirs(os.environ["HOME"], exist_ok=True)
    from harness import machine
    from pipeline_bench import corpus
    from pipeline_ray import kept_rows
    from ray_cluster import Cluster, LoopbackNetns
    from luminamoon.data import FusedPipeline

    if args.corpus:
        shards = sorted(glob.glob(os.path.join(args.corpus, "*.jsonl")) +
                        glob.glob(os.path.join(args.corpus, "*.jsonl.gz")))
    else:
        shards = corpus(os.path.join(args.work, "corpus"), args.size_mb)
    size = sum(os.path.getsize(s) for s in shards)
    local_out = os.path.join(args.work, "out-local")
    FusedPipeline(format="ndjson", num_threads=1).run(shards, local_out, resume=False)
    try:
        netns = LoopbackNetns()
    except OSError as e:
        print(f"(no network namespace: {e}; Ray binds this machine's address)")
        netns = None
    print(f"machine: {machine()}", file=sys.stderr, flush=True)
    one = Cluster(os.path.join(args.work, "cluster-1"))
    one.stop_worker(signal.SIGTERM)
    two = Cluster(os.path.join(args.work, "cluster-2"))
    names = {1: "ray, 1 node (1 CPU)", 2: "ray, 2 nodes (1 CPU each)"}
    drivers: dict = {}
    walls: dict = {1: [], 2: []}
    try:
        for nodes, cluster in ((1, one), (2, two)):
            drivers[nodes] = Driver(cluster.address, nodes, shards, os.path.join(args.work, f"out-{nodes}"),
                                    os.path.join(args.work, f"driver-{nodes}.log"))
            drivers[nodes].run()  # warm-up: the job's workers start, the functions are exported
        for r in range(args.rounds):
            for nodes in ((1, 2) if r % 2 == 0 else (2, 1)):
                walls[nodes].append(drivers[nodes].run()["wall_s"])
    finally:
        for d in drivers.values():
            d.close()
        one.stop()
        two.stop()
        if netns:
            netns.leave()
    local = kept_rows(local_out)
    equal = {n: kept_rows(os.path.join(args.work, f"out-{n}")) == local for n in (1, 2)}
    ratios = [a / b for a, b in zip(walls[1], walls[2])]
    med = {n: statistics.median(w) for n, w in walls.items()}
    print(f"corpus: {size / 1e6:.1f} MB in {len(shards)} shards; {os.cpu_count()} cores; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {args.rounds} paired rounds")
    for n in (1, 2):
        print(f"{names[n]}: median {med[n]:.3f} s; equal to local: {'yes' if equal[n] else 'NO'}; "
              f"walls {', '.join(f'{w:.2f}' for w in walls[n])}")
    print(f"Y2: ratio of the medians {med[1] / med[2]:.3f}x; median of the per-round ratios "
          f"{statistics.median(ratios):.3f}x (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "bytes": size, "walls": walls, "ratios": ratios, "equal": equal}, f)
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
