"""luminamoon.data: the data engine's Python API (batch stages, dedup, pipeline).

Each area lives in its own module; this one gathers their public names.
"""
from .data_batch import *  # noqa: F401,F403
from .data_dedup import *  # noqa: F401,F403
from .data_pipeline import *  # noqa: F401,F403
