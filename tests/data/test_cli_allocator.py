"""`data run` started as a program runs under jemalloc where the system has it
(Note [the CLI's allocator] in luminamoon/_allocator.py): the same output as
under glibc's allocator, the same process id, the user's LD_PRELOAD for the
processes it starts; LUMINAMOON_ALLOCATOR=system keeps glibc's; a library
that cannot be preloaded leaves the run on glibc's; a caller's main([...])
in its own process is never replaced."""
from __future__ import annotations

import ctypes.util
import glob
import os
import subprocess
import sys
import textwrap

import pytest

from luminamoon.data.cli import generate_corpus

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD and /proc are Linux's")
JEMALLOC = ctypes.util.find_library("jemalloc")
needs_jemalloc = pytest.mark.skipif(not JEMALLOC, reason="no libjemalloc on this system (Debian: libjemalloc2)")
MARKERS = ("LUMINAMOON_ALLOCATOR", "LUMINAMOON_JEMALLOC", "LUMINAMOON_ALLOCATOR_PRELOAD_BEFORE", "LD_PRELOAD")


def environment(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in MARKERS}
    env.update(extra)
    return env


def data_run(command: list[str], corpus: str, out: str, **env: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, *command, corpus, "-o", out, "--format", "ndjson", "--progress", "none"],
                       env=environment(**env), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def parts(out: str) -> list[bytes]:
    found = []
    for path in sorted(glob.glob(os.path.join(out, "part-*.ndjson"))):
        with open(path, "rb") as f:
            found.append(f.read())
    return found


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("corpus"))
    generate_corpus(d, shards=2, docs_per_shard=300, seed=5)
    return d


@needs_jemalloc
@pytest.mark.parametrize("command", [["-m", "luminamoon.cli", "data", "run"], ["-m", "luminamoon.data.cli", "run"]])
def test_the_run_command_runs_under_jemalloc_with_the_same_output(corpus, tmp_path, command):
    fast = data_run(command, corpus, str(tmp_path / "jemalloc"))
    plain = data_run(command, corpus, str(tmp_path / "system"), LUMINAMOON_ALLOCATOR="system")
    assert "memory allocator: jemalloc" in fast.stdout
    assert "memory allocator: system" in plain.stdout
    assert parts(str(tmp_path / "jemalloc")) and parts(str(tmp_path / "jemalloc")) == parts(str(tmp_path / "system"))


def replacement_report(tmp_path, **env: str) -> list[str]:
    """What a program calling run_under_jemalloc() sees before and after it."""
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent("""\
        import os, sys
        from luminamoon._allocator import active_allocator, run_under_jemalloc
        print("pid", os.getpid(), flush=True)  # printed again by the replaced process
        run_under_jemalloc()
        print("allocator", active_allocator())
        print("LD_PRELOAD for children", os.environ.get("LD_PRELOAD", "<unset>"))
        print("marker left", "LUMINAMOON_ALLOCATOR_PRELOAD_BEFORE" in os.environ)
    """))
    r = subprocess.run([sys.executable, str(script)], env=environment(**env), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@needs_jemalloc
@pytest.mark.parametrize("user_preload", [None, "libm.so.6"])
def test_the_replaced_process_keeps_its_pid_and_gives_children_the_users_preload(tmp_path, user_preload):
    lines = replacement_report(tmp_path, **({"LD_PRELOAD": user_preload} if user_preload else {}))
    pids = [line for line in lines if line.startswith("pid ")]
    assert len(pids) == 2 and pids[0] == pids[1], lines  # replaced once, in place
    assert "allocator jemalloc" in lines
    assert f"LD_PRELOAD for children {user_preload or '<unset>'}" in lines
    assert "marker left False" in lines


def test_system_keeps_glibc_and_a_library_that_cannot_be_preloaded_is_ignored(tmp_path):
    kept = replacement_report(tmp_path, LUMINAMOON_ALLOCATOR="system")
    assert len([line for line in kept if line.startswith("pid ")]) == 1 and "allocator system" in kept
    missing = replacement_report(tmp_path, LUMINAMOON_JEMALLOC=str(tmp_path / "no-such-libjemalloc.so.2"))
    # ld.so ignores the preload (and says so on stderr); the program goes on once, on glibc's allocator
    assert len([line for line in missing if line.startswith("pid ")]) == 2, missing
    assert "allocator system" in missing and "LD_PRELOAD for children <unset>" in missing


def test_a_callers_main_is_never_replaced(corpus, tmp_path):
    script = textwrap.dedent(f"""\
        import os, sys
        from luminamoon import cli
        from luminamoon._allocator import active_allocator
        sys.argv = ["luminamoon", "data", "run", "ignored"]  # a caller's argv, not the command
        code = cli.main(["data", "run", {corpus!r}, "-o", {str(tmp_path / "out")!r}, "--format", "ndjson",
                         "--progress", "none"])
        print("returned", code, "allocator", active_allocator())
    """)
    r = subprocess.run([sys.executable, "-c", script], env=environment(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "returned 0 allocator system" in r.stdout
    assert parts(str(tmp_path / "out"))


# ---------------------------------------------------------------- finding the library (Note [finding jemalloc cheaply])
@needs_jemalloc
def test_the_loader_cache_gives_the_library_find_library_names():
    from luminamoon import _allocator

    found = _allocator.find_jemalloc()
    assert found is not None and os.path.isabs(found) and os.path.exists(found)
    assert os.path.basename(found) == JEMALLOC  # ctypes.util.find_library answers with the soname


def test_the_cache_is_searched_for_an_existing_file(tmp_path, monkeypatch):
    from luminamoon import _allocator

    real = tmp_path / "lib" / "libjemalloc.so.2"
    real.parent.mkdir()
    real.write_bytes(b"")
    gone = tmp_path / "gone" / "libjemalloc.so.2"
    cache = tmp_path / "ld.so.cache"
    # a cache's string table: other libraries, a listed file that is gone, then the one that exists
    cache.write_bytes(b"glibc-ld.so.cache1.1\x00\x07libc.so.6\x00/lib/libc.so.6\x00libjemalloc.so.2\x00"
                      + os.fsencode(gone) + b"\x00" + os.fsencode(real) + b"\x00/lib/libm.so.6\x00")
    monkeypatch.setattr(_allocator, "_LOADER_CACHE", str(cache))
    assert _allocator.find_jemalloc() == str(real)
    cache.write_bytes(b"glibc-ld.so.cache1.1\x00/lib/libc.so.6\x00" + os.fsencode(gone) + b"\x00")
    assert _allocator.find_jemalloc() is None
    # no cache at all: the slow path's answer (the soname, or None)
    monkeypatch.setattr(_allocator, "_LOADER_CACHE", str(tmp_path / "no-cache"))
    assert _allocator.find_jemalloc() == JEMALLOC
