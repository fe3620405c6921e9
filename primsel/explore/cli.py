"""``primsel explore``: write a static site to browse an experiment directory."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``primsel explore``."""
    parser.add_argument("directory", metavar="RUN_DIR", help="experiment directory, <out>/<name>")


def main(args: argparse.Namespace) -> int:
    raise NotImplementedError
