"""Note [replayed launches] (triton_launch_cache.py) on the CPU: what a record keeps and how a replay
launches, with a stand-in for a JIT kernel and its compiled kernel (the real launch path runs on the
GPU: test_gpu_triton.py's replay test). Cost: well under a second."""
from __future__ import annotations

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from luminamoon.optim import triton_launch_cache as cache  # noqa: E402


class FakeCompiled:
    """The attributes of a Triton 3.6 CompiledKernel that a replay uses; run() logs its arguments."""

    def __init__(self, log):
        self.log, self.function, self.packed_metadata = log, "fn", "packed"

    def launch_metadata(self, grid, stream, *args):
        return None

    def run(self, gx, gy, gz, stream, function, packed, metadata, enter, leave, *args):
        self.log.append(((gx, gy, gz), stream, function, packed, args))


class FakeKernel:
    """A JIT kernel: kernel[grid](*args, **kwargs) launches and returns its compiled kernel."""

    arg_names = ["x_ptr", "n", "scale_ptr", "BLOCK"]

    def __init__(self, compiled):
        self.compiled, self.calls = compiled, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.calls.append(grid)  # (not the arguments: the test checks what the record keeps alive)
            return self.compiled
        return launch


def test_a_record_keeps_addresses_not_tensors_and_fills_its_slots_per_replay():
    log = []
    kernel = FakeKernel(FakeCompiled(log))
    x = torch.zeros(8)
    scale = torch.ones(1)
    record = cache.LaunchRecord(key=("k",))
    record.launch(kernel, (3,), (x, 8), dict(scale_ptr=scale, BLOCK=4, num_warps=4), {id(scale): cache.GRAD_SCALE})
    assert record.complete and len(kernel.calls) == 1  # the first launch went through the JIT
    x_address = x.data_ptr()
    alive = weakref.ref(scale)
    del scale
    gc.collect()
    assert alive() is None, "the record must not keep a step's tensors alive"
    record.replay(stream=77, fills={cache.GRAD_SCALE: 1234, cache.FOUND_INF: 0})
    record.replay(stream=78, fills={cache.GRAD_SCALE: 5678, cache.FOUND_INF: 0})
    assert len(kernel.calls) == 1, "a replay does not go through the JIT"
    # arguments in the kernel's order, tensors as addresses, constexprs as given, num_warps not an argument
    assert log == [((3, 1, 1), 77, "fn", "packed", (x_address, 8, 1234, 4)),
                   ((3, 1, 1), 78, "fn", "packed", (x_address, 8, 5678, 4))]


def test_a_gradient_launched_as_an_argument_is_a_slot_found_by_its_address():
    """A view of the gradient (the kernels take 16-bit data as int16 views) is recognised by its
    address; each replay launches with the address this step's gradient has, the other tensors as
    recorded."""
    log = []
    kernel = FakeKernel(FakeCompiled(log))
    grad, scale = torch.zeros(8, dtype=torch.bfloat16), torch.ones(1)
    record = cache.LaunchRecord(key=("k",))
    record.launch(kernel, (2,), (grad.view(torch.int16), 8), dict(scale_ptr=scale, BLOCK=4), {},
                  {grad.data_ptr(): 0})
    record.replay(stream=5, fills={0: 4096})
    record.replay(stream=5, fills={0: 8192})
    assert [entry[4] for entry in log] == [(4096, 8, scale.data_ptr(), 4), (8192, 8, scale.data_ptr(), 4)]


def test_a_launch_without_a_compiled_kernel_leaves_the_record_incomplete():
    """TRITON_INTERPRET=1 returns nothing to replay: the step is launched, the record is not used."""
    kernel = FakeKernel(None)
    record = cache.LaunchRecord(key=())
    record.launch(kernel, (1,), (torch.zeros(1), 1), dict(scale_ptr=torch.zeros(1), BLOCK=1), {})
    assert len(kernel.calls) == 1
    assert not record.complete
