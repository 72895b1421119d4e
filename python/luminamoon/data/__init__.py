"""luminamoon.data: the data engine's Python API.

- batch.py: StringTensor and the batch stages (clean, quality, PII).
- dedup.py: exact (StreamDeduplicator) and near (MinHashLSH) deduplication.
- pipeline.py: FusedPipeline, its config and errors.
- state.py: StateTracker (the .meta checkpoint) for a user's own loop.
- tokenization.py: the tokenization stage (Hugging Face tokenizers -> token shards, Megatron .bin/.idx).
- token_shards.py: reading token shards; token_loader.py: TokenLoader (packed, resumable batches).
- cli.py: ``luminamoon data ...``.
- ray_executor.py: the pipeline on Ray (``FusedPipeline.run(..., executor="ray")``), with
  global_dedup.py, the exact and near-duplicate decisions across shards (docs/ray.md).
"""
from .batch import *  # noqa: F401,F403
from .dedup import *  # noqa: F401,F403
from .pipeline import *  # noqa: F401,F403
from .state import *  # noqa: F401,F403
from .token_shards import *  # noqa: F401,F403
from .tokenization import *  # noqa: F401,F403
from .token_loader import *  # noqa: F401,F403


def __getattr__(name: str):
    if name == "PackedTokenDataset":  # a torch IterableDataset: importing it imports torch
        from .token_dataset import PackedTokenDataset
        return PackedTokenDataset
    raise AttributeError(f"module 'luminamoon.data' has no attribute {name!r}")
