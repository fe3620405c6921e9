"""Experiments: grids of retrieval (and generation) pipelines declared in TOML, run resumably, and
their reports. The names below load on first use: importing the settings alone loads no runner,
retriever or sandbox.
"""

import importlib
from typing import Any

#: Each public name and the module of this package that defines it.
_HOMES = {
    **dict.fromkeys(
        (
            "Cell",
            "ConfigError",
            "ExperimentConfig",
            "cell_id",
            "expand",
            "load_config",
            "parse_config",
        ),
        "config",
    ),
    "ExperimentResult": "runner",
    "run_experiment": "runner",
    "CellSettings": "settings",
    "SettingError": "settings",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use (AttributeError for
    others)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    return value
