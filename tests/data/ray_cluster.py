"""A real two-node Ray cluster on this machine, inside a network namespace
that holds only loopback (tests must never talk beyond it).

enter_loopback_netns() moves this process's main thread (and so every process
and thread it starts afterwards: ray start, the driver's threads) into a new
network namespace with only `lo` up; leave() returns to the original one.
Cluster starts `ray start --head --block` and a second `ray start --address
... --block` (its own raylet), one CPU each, each in its own process group,
and stops them by that group's id (never `ray stop`, which would stop every
Ray on the machine).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

CLONE_NEWNET = 0x40000000


class LoopbackNetns:
    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._original = os.open("/proc/self/ns/net", os.O_RDONLY)
        if self._libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            os.close(self._original)
            raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)} (needs root / CAP_SYS_ADMIN)")
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

    def leave(self) -> None:
        if self._libc.setns(self._original, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back to the original network namespace")
        os.close(self._original)


def interfaces() -> list[str]:
    """The network interfaces this thread sees (/sys/class/net shows sysfs's namespace, not ours)."""
    with open("/proc/thread-self/net/dev", encoding="ascii") as f:
        return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])


_handed_out: set[int] = set()  # every port free_ports has returned in this process


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that are free now, none handed out before in this process.

    The sockets stay bound until all are chosen: a port closed at once may come back from the next
    bind, and a CI run once gave Ray's runtime-env agent and dashboard agent the same port (`ray start`
    refuses that). Ray binds them a moment later, so a port handed out once is never handed out again."""
    socks, ports = [], []
    try:
        while len(ports) < count:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


def free_port() -> int:
    return free_ports(1)[0]


def node_ports() -> list[str]:
    """Ports that are fixed by default and would collide between two nodes of one host."""
    names = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "runtime-env-agent-port", "metrics-export-port")
    return [f"--{name}={port}" for name, port in zip(names, free_ports(len(names)))]


def connect(address: str, **kwargs) -> None:
    """ray.init as a driver of the cluster; this host's address in the namespace is loopback."""
    import ray
    ray.init(address=address, logging_level="ERROR", log_to_driver=False, _node_ip_address="127.0.0.1", **kwargs)


def ray_cli() -> list[str]:
    exe = shutil.which("ray", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]


class RayNode:
    def __init__(self, args: list[str], log_path: str) -> None:
        self.log = open(log_path, "ab")
        # A HOME of its own: a ~/.ray/auth_token left by another Ray user of
        # this machine would switch the nodes to token authentication.
        home = os.path.join(os.path.dirname(log_path), "home")
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", HOME=home, RAY_AUTH_MODE="disabled")
        # The node stops with the test process even when that process dies
        # without its teardown (a crash): `ray start --block` gets SIGTERM from
        # the kernel when its parent exits, and stops the node's processes.
        orphan_guard = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
        self.proc = subprocess.Popen(orphan_guard + ray_cli() + ["start", "--block", "--disable-usage-stats"] + args,
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=timeout)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:  # whatever of the group outlived its leader
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


class Cluster:
    def __init__(self, work: str) -> None:
        self.work = work
        os.makedirs(work, exist_ok=True)
        # Ray's socket paths must stay under 108 bytes: a short root of its own
        self.ray_tmp = tempfile.mkdtemp(prefix="lmray-", dir="/tmp")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.head = RayNode(["--head", "--node-ip-address=127.0.0.1", f"--port={self.port}", "--num-cpus=1",
                             "--include-dashboard=false", f"--temp-dir={self.ray_tmp}"] + node_ports(), f"{work}/head.log")
        self.worker = None
        try:
            self.wait_nodes(1)
            self.start_worker()
        except BaseException:
            self.stop()
            raise

    def start_worker(self) -> None:
        self.worker = RayNode([f"--address={self.address}", "--node-ip-address=127.0.0.1", "--num-cpus=1"]
                              + node_ports(), f"{self.work}/worker.log")
        self.wait_nodes(2)

    def stop_worker(self, sig: int = signal.SIGKILL) -> None:
        if self.worker is not None:
            self.worker.stop(sig)
            self.worker = None

    def alive_nodes(self) -> int:
        import ray
        return sum(1 for n in ray.nodes() if n.get("Alive"))

    def wait_nodes(self, count: int, timeout: float = 180.0) -> None:
        import ray
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()  # GCS up?
                connect(self.address)
                try:
                    if self.alive_nodes() >= count:
                        return
                finally:
                    ray.shutdown()
            except Exception as e:  # noqa: BLE001 (not up yet)
                last = e
            for node in (self.head, self.worker):
                if node is not None and node.proc.poll() is not None:
                    raise RuntimeError(f"ray start exited with {node.proc.returncode}: see {node.log.name}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Ray cluster did not reach {count} nodes ({last!r}); see {self.work}/*.log")
            time.sleep(0.5)

    def stop(self) -> None:
        self.stop_worker(signal.SIGTERM)
        self.head.stop(signal.SIGTERM)
        shutil.rmtree(self.ray_tmp, ignore_errors=True)
