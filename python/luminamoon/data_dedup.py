"""Deprecated: ``luminamoon.data_dedup`` moved to ``luminamoon.data.dedup`` (removed in the next release)."""
from ._moved import reexport

reexport(__name__, "luminamoon.data.dedup")
