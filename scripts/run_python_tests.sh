#!/usr/bin/env bash
# The Python test suite (make test-py): PYTHON -m pytest -q [ARGS, default tests], and if the test process dies of a
# signal and left a core file (tests/conftest.py allows one for its exit only: Note [the exit segfault]), a native
# backtrace of every thread from gdb, then the core is removed. The exit status is pytest's.
set -u
PY=${1:?usage: run_python_tests.sh PYTHON [pytest args]}
shift
rm -f core core.[0-9]*
"$PY" -m pytest -q "${@:-tests}"
rc=$?
if [ "$rc" -gt 128 ]; then
  echo "run_python_tests: the test process died of signal $((rc - 128))" >&2
  for core in core core.[0-9]*; do
    [ -f "$core" ] || continue
    if command -v gdb > /dev/null; then
      gdb -batch -ex "thread apply all bt 40" "$(readlink -f "$PY")" "$core" 2>&1 \
        | grep -v "^\[New LWP" | tail -600 >&2
    else
      echo "run_python_tests: gdb is not installed; no backtrace of $core" >&2
    fi
    rm -f "$core"
  done
fi
exit "$rc"
