"""Deprecated: ``luminamoon.data_batch`` moved to ``luminamoon.data.batch`` (removed in the next release)."""
from ._moved import reexport

reexport(__name__, "luminamoon.data.batch")
