"""Experiments: grids of retrieval (and generation) pipelines declared in TOML, run resumably,
and their reports.

:mod:`primsel.experiments.config` reads a file and expands its grid into cells, each with
:class:`primsel.experiments.settings.CellSettings`; :mod:`primsel.experiments.cell` computes one
cell (the pipeline ``primsel retrieve`` uses too); :mod:`primsel.experiments.store` shares
retrievals between cells; :mod:`primsel.experiments.runner` runs the grid and
:mod:`primsel.experiments.report` writes the report.
"""

from primsel.experiments.config import Cell, ConfigError, ExperimentConfig, cell_id, expand, load_config, parse_config
from primsel.experiments.runner import ExperimentResult, run_experiment
from primsel.experiments.settings import CellSettings, SettingError

__all__ = [
    "Cell",
    "CellSettings",
    "ConfigError",
    "ExperimentConfig",
    "ExperimentResult",
    "SettingError",
    "cell_id",
    "expand",
    "load_config",
    "parse_config",
    "run_experiment",
]
