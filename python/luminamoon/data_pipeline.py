"""Deprecated: ``luminamoon.data_pipeline`` moved to ``luminamoon.data.pipeline`` (removed in the next release)."""
from ._moved import reexport

reexport(__name__, "luminamoon.data.pipeline")
