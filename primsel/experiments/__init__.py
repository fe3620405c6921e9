"""Experiments: grids of retrieval (and generation) pipelines declared in TOML, run resumably,
and their reports.

:mod:`primsel.experiments.config` reads a file and expands its grid into cells, each with
:class:`primsel.experiments.settings.CellSettings`; :mod:`primsel.experiments.cell` computes one
cell (the pipeline ``primsel retrieve`` uses too); :mod:`primsel.experiments.store` shares
retrievals between cells; :mod:`primsel.experiments.runner` runs the grid and
:mod:`primsel.experiments.report` writes the report.

The names below are loaded on first use, so that importing one module of the package (the
settings, say) does not load the runner and every component it runs.
"""

from __future__ import annotations

from typing import Any

_CONFIG = ("Cell", "ConfigError", "ExperimentConfig", "cell_id", "expand", "load_config", "parse_config")
_RUNNER = ("ExperimentResult", "run_experiment")
_SETTINGS = ("CellSettings", "SettingError")

__all__ = sorted((*_CONFIG, *_RUNNER, *_SETTINGS))


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use.

    Raises
    ------
    AttributeError : ``name`` is not a public name of the package.
    """
    if name in _CONFIG:
        from primsel.experiments import config as home
    elif name in _RUNNER:
        from primsel.experiments import runner as home
    elif name in _SETTINGS:
        from primsel.experiments import settings as home
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(home, name)
    globals()[name] = value
    return value
