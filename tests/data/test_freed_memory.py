"""A Ray worker's allocator keeps what a shard task frees for the next task
(Note [freed memory kept]): a block freed and allocated again faults no new
page once the task wrapper has run, and faults every page again without it
(LUMINAMOON_KEEP_FREED_MEMORY=0) or in a plain process. Measured in child
processes, by their minor page faults (getrusage)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's")

BLOCK = 64 << 20  # above glibc's largest dynamic mmap threshold (32 MiB)
PAGES = BLOCK // os.sysconf("SC_PAGESIZE")

CHILD = f"""
import resource, sys
from luminamoon.data import ray_executor
if sys.argv[1] == "task":
    ray_executor._as_task(lambda: None)()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
counts = []
for _ in range(3):
    before = faults()
    block = bytearray({BLOCK})  # zero-filled: every page touched
    del block
    counts.append(faults() - before)
print(*counts)
"""


def faults_per_round(mode: str, keep: str | None = None) -> list[int]:
    env = dict(os.environ)
    env.pop("LUMINAMOON_KEEP_FREED_MEMORY", None)
    if keep is not None:
        env["LUMINAMOON_KEEP_FREED_MEMORY"] = keep
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def test_a_task_worker_reuses_freed_memory():
    first, *again = faults_per_round("task")
    assert first >= PAGES // 2  # the first block is new memory
    assert all(n < PAGES // 50 for n in again), again


@pytest.mark.parametrize("mode, keep", [("plain", None), ("task", "0")])
def test_without_the_setting_freed_memory_is_faulted_in_again(mode, keep):
    counts = faults_per_round(mode, keep)
    assert all(n >= PAGES // 2 for n in counts), counts

