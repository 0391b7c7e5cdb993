"""Fixtures for the coordinator unit tests (tests/conftest.py belongs to the wider suite)."""

from __future__ import annotations

import pytest
from helpers_coordinator import Harness


@pytest.fixture
def h() -> Harness:
    return Harness()
