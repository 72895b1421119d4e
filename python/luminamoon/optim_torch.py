"""Deprecated: ``luminamoon.optim_torch`` moved to ``luminamoon.optim.torch_optimizer`` (removed in the next release)."""
from ._moved import reexport

reexport(__name__, "luminamoon.optim.torch_optimizer")
