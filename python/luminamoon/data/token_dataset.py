"""PackedTokenDataset: one rank's batches of packed sequences as a torch IterableDataset.

Imports torch (luminamoon.data does not: it loads this module on first use of
the name). The order and the sharding are Note [global sample order] in
token_loader.py; TokenLoader wraps this dataset in a DataLoader.
"""
from __future__ import annotations

from typing import Iterator, Optional

import torch

from .pipeline import DataError
from .token_loader import PackedSequenceOrder

__all__ = ["PackedTokenDataset"]


class PackedTokenDataset(torch.utils.data.IterableDataset):
    """Batches of rank `rank` of `world_size` from global sample `start`.

    Worker w of W builds the rank's batches w, w + W, ...; use it with
    ``DataLoader(dataset, batch_size=None, num_workers=W)``, or torchdata's
    StatefulDataLoader, whose state_dict()/load_state_dict() this supports for
    an unchanged worker count (TokenLoader resumes across any)."""

    def __init__(self, order: PackedSequenceOrder, batch_size: int, *, rank: int = 0, world_size: int = 1,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__()
        if int(batch_size) < 1:
            raise DataError(f"batch_size must be at least 1, not {batch_size}", 2)
        if not 0 <= int(rank) < int(world_size):
            raise DataError(f"rank {rank} is outside world_size {world_size}", 2)
        self.order, self.batch_size = order, int(batch_size)
        self.rank, self.world_size = int(rank), int(world_size)
        self.start, self.end = int(start), end
        self._batches_done: dict[int, int] = {}  # per worker, for StatefulDataLoader
        self._worker = 0

    def batch_samples(self, b: int) -> list[int]:
        """Global samples of this rank's batch b (fewer at the end, none past it)."""
        R = self.world_size
        first = self.start + self.rank + b * self.batch_size * R
        out = [first + j * R for j in range(self.batch_size)]
        return [a for a in out if self.end is None or a < self.end]

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        w, W = (info.id, info.num_workers) if info is not None else (0, 1)
        self._worker = w
        done = self._batches_done.get(w, 0)
        b = w + done * W
        while True:
            samples = self.batch_samples(b)
            if not samples:
                return
            arrays = self.order.batch(samples)
            self._batches_done[w] = done = done + 1
            yield {k: torch.from_numpy(v) for k, v in arrays.items()}
            b += W

    # torchdata's Stateful protocol (called in each worker process).
    def state_dict(self) -> dict:
        return {"start": self.start, "batches_done": self._batches_done.get(self._worker, 0),
                "fingerprint": self.order.fingerprint()}

    def load_state_dict(self, state: dict) -> None:
        if state.get("fingerprint") != self.order.fingerprint():
            raise DataError("the checkpoint was taken over other sources or settings", 5)
        self.start = int(state["start"])
        info = torch.utils.data.get_worker_info()
        self._batches_done = {info.id if info is not None else 0: int(state["batches_done"])}
