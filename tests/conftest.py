"""Shared fixtures. Tests that need the Asper-Bench archive read PRIMSEL_ASPER_BENCH and skip otherwise; tests
that need ASPERA's source read PRIMSEL_ASPERA_SRC, else the checkout beside the repository
(``../shared/aspera/ml-aspera``), and skip when there is none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from primsel import registry

#: Markers whose tests are slow by what they need: a neural model, the local model's server, or
#: the whole Asper-Bench archive end to end. They are marked ``slow`` too (``make test-fast``).
SLOW_BY_NEED = ("dense", "local", "asper")


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` every test marked with one of :data:`SLOW_BY_NEED` or using the archive (the
    ``asper_path`` fixture)."""
    for item in items:
        needs_archive = "asper_path" in getattr(item, "fixturenames", ())
        if needs_archive or any(item.get_closest_marker(name) for name in SLOW_BY_NEED):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def asper_path() -> Path:
    """Path of the Asper-Bench archive; skips the test when PRIMSEL_ASPER_BENCH is unset or missing."""
    value = os.environ.get("PRIMSEL_ASPER_BENCH")
    if not value:
        pytest.skip("PRIMSEL_ASPER_BENCH is not set: the Asper-Bench archive is not available")
    path = Path(value)
    if not path.is_file():
        pytest.skip(f"PRIMSEL_ASPER_BENCH points to a missing file: {path}")
    return path


#: Where a checkout of apple/ml-aspera lies beside the repository (as CI has it).
ASPERA_BESIDE = Path(__file__).resolve().parents[2] / "shared" / "aspera" / "ml-aspera"


def aspera_checkout() -> Path | None:
    """The checkout of apple/ml-aspera the tests use: ``$PRIMSEL_ASPERA_SRC``, else :data:`ASPERA_BESIDE`, else
    None."""
    value = os.environ.get("PRIMSEL_ASPERA_SRC")
    path = Path(value) if value else ASPERA_BESIDE
    return path if (path / "src" / "aspera" / "apps").is_dir() else None


@pytest.fixture()
def aspera_src(monkeypatch) -> Path:
    """ASPERA's checkout, named by PRIMSEL_ASPERA_SRC for the test; skips the test without one."""
    path = aspera_checkout()
    if path is None:
        pytest.skip("no checkout of apple/ml-aspera: set PRIMSEL_ASPERA_SRC (or put it in ../shared/aspera/ml-aspera)")
    monkeypatch.setenv("PRIMSEL_ASPERA_SRC", str(path))
    return path


@pytest.fixture(autouse=True)
def scoped_registry():
    """Classes a test (or its fixtures) registers are unregistered after it: no other test, and
    no test parametrised over the registered names, sees them."""
    with registry.temporary():
        yield


@pytest.fixture(autouse=True, scope="session")
def _isolated_session_cache(tmp_path_factory):
    """Fixtures wider than one test (a module's tasks read from the archive) get a cache
    directory of their own too: nothing of the tests is written to the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path_factory.mktemp("session-cache")))
        yield


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own primsel cache directory (nothing is read from or written to the user's)."""
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture()
def saved_figures(monkeypatch):
    """The matplotlib figures a report saves, in order (the files are still written)."""
    from matplotlib.figure import Figure

    figures = []
    save = Figure.savefig

    def keep(self, *args, **kwargs):
        figures.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures
