"""A Triton step's launches recorded once and replayed (Note [replayed launches]).

Note [replayed launches]: ``kernel[grid](*args)`` costs tens of microseconds of Python per launch
in Triton 3.6 (the binder specializes every argument, the kernel cache is looked up, each tensor
argument is asked for its address and checked), and the step's launches take the same arguments
on every step while no address changes. A recorded step keeps, per launch, the compiled kernel the
JIT returned and its arguments with every tensor replaced by its address (so nothing of a step,
a gradient least of all, is kept alive: the caching allocator may hand the same block to the next
step's gradient, which is what lets the record be reused); replaying calls the compiled kernel's
launcher directly with those values, on the current stream. GradScaler's scale and found_inf
tensors may be new objects on every step: their positions are slots filled in per replay. So are
the gradients launched as arguments (a factored TD-CLM tensor's, or a tensor outside every batch):
after zero_grad(set_to_none=True) the caching allocator may put a step's gradient elsewhere, and a
record keyed on their addresses had to be made again whenever one of them moved. Such an argument
is recognised by its address when the launch is recorded.

The record is only valid for the addresses of its other arguments (the plan's own memory) and for
slot values of the same 16-byte alignment; the caller keys it on those (triton_step.TritonStepPlan). Interpreted kernels (TRITON_INTERPRET=1) return no compiled kernel
and are never recorded. This relies on CompiledKernel.run / function / packed_metadata and
launch_metadata, Triton 3.3-3.6's launch path (runtime/jit.py: JITFunction.run); a Triton without
them records nothing, and every step launches through the JIT as before.
"""
from __future__ import annotations

from typing import Any

try:  # absent from Tritons without the knobs module: no replay there
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover
    _knobs = None

GRAD_SCALE, FOUND_INF = "grad_scale", "found_inf"


def _replayable(compiled: Any) -> bool:
    return (_knobs is not None and compiled is not None and callable(getattr(compiled, "run", None))
            and hasattr(compiled, "function") and hasattr(compiled, "packed_metadata")
            and hasattr(compiled, "launch_metadata"))


class LaunchRecord:
    """The launches of one step in order: (compiled kernel, grid, argument values, slots)."""

    def __init__(self, key: tuple):
        self.key = key
        self.launches: list[tuple[Any, tuple[int, int, int], list, tuple[tuple[int, str], ...]]] = []
        self.complete = True  # False once a launch could not be recorded

    def launch(self, kernel, grid: tuple, args: tuple, kwargs: dict, slots: dict,
               address_slots: dict | None = None) -> None:
        """Launch through the JIT and record it; `slots` maps an id() of an argument to its slot name,
        `address_slots` the address of a tensor argument (any view of it) to its slot name."""
        compiled = kernel[grid](*args, **kwargs)
        if not self.complete:
            return
        if not _replayable(compiled):
            self.complete = False
            return
        names = kernel.arg_names
        values = list(args) + [kwargs[n] for n in names[len(args):]]
        filled = []
        for i, value in enumerate(values):
            slot = slots.get(id(value))
            if hasattr(value, "data_ptr"):
                values[i] = value.data_ptr()
                if slot is None and address_slots:
                    slot = address_slots.get(values[i])
            if slot is not None:
                filled.append((i, slot))
        grid3 = (tuple(grid) + (1, 1))[:3]
        self.launches.append((compiled, grid3, values, tuple(filled)))

    def replay(self, stream: int, fills: dict) -> None:
        """Every recorded launch again, on `stream`; `fills` gives each slot's address for this step."""
        enter, leave = _knobs.runtime.launch_enter_hook, _knobs.runtime.launch_exit_hook
        for compiled, grid, values, filled in self.launches:
            for i, slot in filled:
                values[i] = fills[slot]
            metadata = None if enter is None else compiled.launch_metadata(grid, stream, *values)
            compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata, metadata,
                         enter, leave, *values)
