"""Tests in tiers: ``make test`` runs every test, ``make test-fast`` those not marked ``slow`` (the
end-to-end and model tests, every ``dense``, ``local`` and ``asper`` test among them)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_the_slow_marker_is_registered():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]
    assert any(m.startswith("slow:") for m in options["ini_options"]["markers"])


def test_make_test_fast_leaves_the_slow_tests_out_and_make_test_runs_all():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    fast = re.search(r"^test-fast: .*\n\t(.*)$", makefile, re.MULTILINE)
    whole = re.search(r"^test: .*\n\t(.*)$", makefile, re.MULTILINE)
    assert fast and fast[1].endswith('pytest -q -n 2 -m "not slow"')
    assert whole and whole[1] == "$(BIN)/python -m pytest -q -n 2"


def collected(*args: str) -> list[str]:
    """The test ids ``pytest --collect-only`` gives for ``args``."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_model_tests_are_slow_and_fast_tests_are_not():
    dense = collected("tests/retrieval/test_dense.py", "-m", "dense")
    assert dense and collected("tests/retrieval/test_dense.py", "-m", "dense and not slow") == []
    assert collected("tests/test_spec.py", "-m", "slow") == []
    assert collected("tests/aspera/test_protocol_parity.py", "-m", "not slow") == []


def test_a_test_on_the_archive_is_slow_without_a_marker_of_its_own():
    fast = collected("tests/eval/test_feedback.py", "-m", "not slow")
    assert fast and not [t for t in fast if t.endswith("_on_asper_bench")]
