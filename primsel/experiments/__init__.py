"""Experiments: grids of retrieval (and generation) pipelines declared in TOML, run resumably, and their reports.
The names below load on first use: importing the settings alone loads no runner, retriever or sandbox.
"""

from __future__ import annotations

from typing import Any

_CONFIG = ("Cell", "ConfigError", "ExperimentConfig", "cell_id", "expand", "load_config", "parse_config")
__all__ = sorted((*_CONFIG, "ExperimentResult", "run_experiment", "CellSettings", "SettingError"))


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use (AttributeError for others)."""
    if name in _CONFIG:
        from primsel.experiments import config as home
    elif name in ("ExperimentResult", "run_experiment"):
        from primsel.experiments import runner as home
    elif name in ("CellSettings", "SettingError"):
        from primsel.experiments import settings as home
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value = getattr(home, name)
    return value
