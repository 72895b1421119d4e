"""A replayed Triton step as one CUDA graph (Note [Triton step graphs]).

Note [Triton step graphs]: a recorded step (Note [replayed launches]) still costs the host about
14 us per launch in Triton 3.6's launcher. A TD-CLM step once launched four kernels per factored
tensor: 349 launches and ~5 ms of host time a step for the 98M Llama model of
bench/optim_training_loop.py, more than the GPU work (issue 18, session 7; the factored tables,
Note [factored tables], have since cut the launches to about a dozen). The
nvcc backend replays a cached graph of its step (Note [cached step graph] in
src/optim/cuda/step_graph_cache.h); this is the same for the Triton plan: the recorded launches,
captured once per set of slot values (the gradients launched as arguments, GradScaler's
tensors), then replayed by one host call. Every other argument a graph holds is the plan's own
device memory (the step constants, the tables the batched gradients are read from, the scratch),
which the kernels read when they run, so a replay computes exactly what the launches would.

A graph is captured only for slot values seen at an earlier step (values met once, such as a new
found_inf tensor every step, are launched as a record replay), at most MAX_GRAPHS per plan, the
oldest dropped first. Capture uses the plan's own stream and thread-local capture mode, through
CUDAGraph.capture_begin/capture_end rather than torch.cuda.graph (whose context synchronises the
device); the GPU test checks the replayed steps for host synchronisation, not the capturing one. While the caller is itself capturing (a user's torch.cuda.graph around
opt.step()), the launches are replayed into the caller's capture instead.
LUMINAV_TRITON_GRAPHS=0 turns graphs off (A/B).
"""
from __future__ import annotations

import os
from collections import OrderedDict
from typing import Callable

import torch

GRAPHS = os.environ.get("LUMINAV_TRITON_GRAPHS", "1") != "0"
MAX_GRAPHS = 4


class StepGraphs:
    """The CUDA graphs of one plan's recorded step, keyed by the slot values they were captured with."""

    def __init__(self, device: torch.device):
        self.device = device
        self.enabled = GRAPHS and device.type == "cuda"
        self._graphs: OrderedDict[tuple, torch.cuda.CUDAGraph] = OrderedDict()
        self._seen: OrderedDict[tuple, None] = OrderedDict()  # slot values met once
        self._stream: torch.cuda.Stream | None = None
        self.replays = 0  # steps run as a graph replay (for tests and benchmarks)

    def clear(self) -> None:
        """The record changed: its graphs hold launches that are no longer the step's."""
        self._graphs.clear()
        self._seen.clear()

    def run(self, fills: dict, launch: Callable[[int], None], current_stream: Callable[[], int]) -> None:
        """One step: a graph replay when one was captured for `fills`, else `launch(stream)` (the
        record's replay) directly or, the second time these slot values are met, under capture."""
        if not self.enabled or torch.cuda.is_current_stream_capturing():
            launch(current_stream())
            return
        key = tuple(fills.items())  # the caller fills its slots in one order on every step
        graph = self._graphs.get(key)
        if graph is None:
            if key not in self._seen:
                self._seen[key] = None
                while len(self._seen) > 4 * MAX_GRAPHS:
                    self._seen.popitem(last=False)
                launch(current_stream())
                return
            graph = self._capture(launch)
            self._graphs[key] = graph
            while len(self._graphs) > MAX_GRAPHS:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        graph.replay()  # on the current stream, after what the step queued before it
        self.replays += 1

    def _capture(self, launch: Callable[[int], None]) -> torch.cuda.CUDAGraph:
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        graph = torch.cuda.CUDAGraph()
        # Capturing records the launches without running them; the caller's stream is not involved.
        with torch.cuda.stream(self._stream):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                launch(self._stream.cuda_stream)
            finally:
                graph.capture_end()
        return graph
