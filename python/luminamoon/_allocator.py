"""The memory allocator of the `data run` command (Note [the CLI's allocator]).

Note [the CLI's allocator]
A pipeline run allocates and frees batch-sized buffers (0.8-1.3 MB: each
stage's compacted and rewritten texts, the reader's batch, Arrow's page and
zstd buffers) on every thread, many times a second. glibc's allocator keeps
the free space of each arena's worst moment: at 2 GB of input its arenas
held 28-38 MB free beside 22-27 MB in use, and the command's peak resident
set rose 10-20% from 0.1 GB to 2 GB of input, however its tunables were set
(mmap and trim thresholds, one arena, periodic malloc_trim) or the engine's
own text buffers were pooled. Under jemalloc the same runs peaked at
117.5 / 122.6 / 125.1 MB at 0.1 / 0.4 / 2 GB (+6.5%, against 116.2 / 125.3 /
139.4 MB under glibc's), with the same CPU at 2 GB (docs/benchmarks.md, row
P4h).

So `data run`, started as a program (`luminamoon data run`, `python -m
luminamoon.cli data run`, `python -m luminamoon.data.cli run`), replaces
itself before any work (execve: the same process id, arguments and limits)
with the same command under jemalloc, preloaded, where the system has it
(Debian: libjemalloc2; LUMINAMOON_JEMALLOC names another library file).
LUMINAMOON_ALLOCATOR=system keeps glibc's. The replaced process puts
LD_PRELOAD back as it was, so the processes it starts (Ray's daemons, a
tokenizer's workers) are unaffected. A library caller (FusedPipeline.run in
the user's own process) never is: choosing the allocator of someone else's
process is not a library's business. Where jemalloc is missing or cannot be
preloaded (ld.so then says so on stderr), the run goes on with glibc's.
"""
from __future__ import annotations

import os
import sys

ALLOCATOR_ENV = "LUMINAMOON_ALLOCATOR"  # "jemalloc" (the default) or "system"
LIBRARY_ENV = "LUMINAMOON_JEMALLOC"  # the library file to preload, if not the system's libjemalloc
# Set only in the replaced process: LD_PRELOAD as the user had it ("" for none).
_PRELOAD_BEFORE_ENV = "LUMINAMOON_ALLOCATOR_PRELOAD_BEFORE"


def active_allocator() -> str:
    """"jemalloc" when this process runs on jemalloc, else "system"."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return "jemalloc" if "libjemalloc" in f.read() else "system"
    except OSError:
        return "system"


# Note [finding jemalloc cheaply]: everything the process does before it is
# replaced is a cost on top of the run. ctypes.util.find_library imports
# ctypes, subprocess and tempfile and runs `ldconfig -p`; the loader's cache,
# which that command prints, is read here instead (docs/benchmarks.md, row
# P2e), and find_library kept for a system without the cache.
_LOADER_CACHE = "/etc/ld.so.cache"


def find_jemalloc() -> str | None:
    """The system's libjemalloc as the dynamic loader would find it, or None."""
    try:
        with open(_LOADER_CACHE, "rb") as f:
            cache = f.read()
    except OSError:
        import ctypes.util
        return ctypes.util.find_library("jemalloc")
    # The cache's string table holds each library's path, NUL-terminated.
    at = cache.find(b"/libjemalloc.so.")
    while at >= 0:
        start = cache.rfind(b"\x00", 0, at) + 1
        end = cache.find(b"\x00", at)
        path = os.fsdecode(cache[start:end])
        if path.startswith("/") and os.path.exists(path):
            return path
        at = cache.find(b"/libjemalloc.so.", at + 1)
    return None


def run_under_jemalloc() -> None:
    """Replaces this process with the same command under jemalloc where that is
    wanted, not done yet and possible; returns otherwise (also on any failure)."""
    if _PRELOAD_BEFORE_ENV in os.environ:  # the replaced process (or a failed preload): never twice
        before = os.environ.pop(_PRELOAD_BEFORE_ENV)
        if before:
            os.environ["LD_PRELOAD"] = before
        else:
            os.environ.pop("LD_PRELOAD", None)
        return
    if not sys.platform.startswith("linux") or os.environ.get(ALLOCATOR_ENV, "jemalloc") != "jemalloc":
        return
    argv = getattr(sys, "orig_argv", None)
    if not argv or not sys.executable or active_allocator() == "jemalloc":
        return
    library = os.environ.get(LIBRARY_ENV) or find_jemalloc()
    if not library:
        return
    before = os.environ.get("LD_PRELOAD", "")
    env = dict(os.environ, LD_PRELOAD=f"{library} {before}".strip(), **{_PRELOAD_BEFORE_ENV: before})
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, argv, env)
    except OSError:
        return
