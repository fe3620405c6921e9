"""Fixtures of the ASPERA protocol's tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def assistant_library():
    """primsel's assistant library (65 primitives)."""
    from primsel.simulator.library import build_library

    return build_library()
