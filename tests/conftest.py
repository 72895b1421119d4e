"""Shared pytest fixtures of the Python test suite (optimizer and core hooks)."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    # A fixed generator per test: failures reproduce.
    return np.random.default_rng(20261130)


def pytest_configure(config):
    # Tiny models on a shared 2-core machine: torch's intra-op threads only
    # oversubscribe the cores (set before torch is first imported).
    import os
    os.environ.setdefault("OMP_NUM_THREADS", "1")
