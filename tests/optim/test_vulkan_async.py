"""luminav_step_groups_enqueue on the vulkan backend (lavapipe in CI; Note [Vulkan asynchronous
step] in src/optim/vulkan/vulkan_async.cc): bit-identical to the synchronous path with imported
host arrays and with staging buffers over many chunks, under the validation layer, with the step
counters and found_inf read and written on the device, TD-CLM's second moment formed on the device;
a NaN reported by the next call and nothing written; the call returning before the step ran; the process exiting
with steps in flight. Each case runs vulkan_async_child.py in a fresh process, so that the
environment read when the Vulkan context is made applies."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_vulkan_backend import vulkan_state

CHILD = Path(__file__).with_name("vulkan_async_child.py")


AVAILABLE, WHY_NOT = vulkan_state()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"vulkan unavailable: {WHY_NOT}")


def _child(env: dict, *args) -> subprocess.CompletedProcess:
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join([str(CHILD.parents[1]), full.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, env=full,
                          timeout=600)


@pytest.mark.parametrize("env", [
    {},
    {"LUMINAV_VULKAN_IMPORT": "0", "LUMINAV_VULKAN_MAX_RANGE": "65536"},  # staging, many chunks
], ids=["imported", "staged-chunked"])
def test_enqueued_steps_equal_the_synchronous_path_and_report_a_nan_later(env):
    # The tensor of more than 256 tiles (~1 s a step on lavapipe) in the first run only.
    out = _child(env, "checks", *(["--timing"] if not env else ["--quick"]))
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["bit_identical_cases"] == 5
    assert result["device_word_cases"] == 4  # step counters, lr, found_inf (Note [device step counter])
    assert result["tdclm_cases"] == 4  # factored, row, tensor, one column: the second moment on the device
    assert result["many_tensors"] == 150  # one step over 3 batches of 64: one verdict, a NaN in the last writes nothing
    if not env:
        timing = result["timing"]
        print(f"enqueue {timing['enqueue_s'] * 1e3:.2f} ms of a {timing['step_s']:.3f} s step (N = {timing['n']})")


@pytest.mark.parametrize("limit, mode", [("2000", ()), ("1200", ("--expect-sync",))],
                         ids=["one-step-in-flight", "synchronous-fallback"])
def test_the_allocation_budget_bounds_the_steps_in_flight_and_the_call(limit, mode):
    # 150 tensors: async_step_allocations ~800; the budget is half the limit: 1000 holds one step
    # (the next waits for it), 600 none (the call runs synchronously). The same bits either way.
    out = _child({"LUMINAV_VULKAN_MAX_ALLOCATIONS": limit}, "many", *mode)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["many_tensors"] == 150


def test_validation_layer_reports_no_error_on_the_asynchronous_step():
    out = _child({"LUMINAV_VULKAN_VALIDATION": "1", "LUMINAV_VULKAN_MAX_RANGE": "65536"}, "checks", "--quick")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "luminav-vulkan-validation: on" in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("luminav-vulkan-validation: error")]
    assert not errors, "\n".join(errors[:5])


def test_process_exits_cleanly_with_steps_in_flight():
    out = _child({}, "exit-in-flight")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "enqueued" in out.stdout
