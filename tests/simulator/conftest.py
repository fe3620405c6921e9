"""Fixtures shared by the simulator tests."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture
def sleeper():
    """A harmless target process for the sandbox's attacks: ``sleep 60``, killed afterwards."""
    process = subprocess.Popen(["sleep", "60"])
    yield process.pid
    process.kill()
    process.wait()
