"""Experiments: grids of retrieval (and generation) pipelines declared in TOML, run resumably.

See :mod:`primsel.experiments.config` for the file format and
:mod:`primsel.experiments.runner` for the outputs.
"""

from primsel.experiments.config import Cell, ConfigError, ExperimentConfig, cell_id, expand, load_config, parse_config
from primsel.experiments.runner import ExperimentResult, run_experiment

__all__ = [
    "Cell",
    "ConfigError",
    "ExperimentConfig",
    "ExperimentResult",
    "cell_id",
    "expand",
    "load_config",
    "parse_config",
    "run_experiment",
]
