"""Deprecated: ``luminamoon.data_cli`` moved to ``luminamoon.data.cli`` (removed in the next release)."""
from ._moved import reexport

reexport(__name__, "luminamoon.data.cli")
