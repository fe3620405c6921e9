"""Re-exports of :mod:`primsel.experiments.results` under their former module."""

from primsel.experiments.results import CellConfig, CellEntry, ExperimentManifest, RunFileError  # noqa: F401
