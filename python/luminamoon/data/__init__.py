"""luminamoon.data: the data engine's Python API.

- batch.py: StringTensor and the batch stages (clean, quality, PII).
- dedup.py: exact (StreamDeduplicator) and near (MinHashLSH) deduplication.
- pipeline.py: FusedPipeline, its config and errors.
- cli.py: ``luminamoon data ...``.
"""
from .batch import *  # noqa: F401,F403
from .dedup import *  # noqa: F401,F403
from .pipeline import *  # noqa: F401,F403
