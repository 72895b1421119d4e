"""Shared pytest fixtures of the Python test suite (optimizer and core hooks)."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    # A fixed generator per test: failures reproduce.
    return np.random.default_rng(20261130)
