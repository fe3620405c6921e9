"""``primsel explore``: write a static site to browse an experiment directory."""

from __future__ import annotations

import argparse
import sys

from primsel.commands.common import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``primsel explore``."""
    parser.add_argument(
        "directory",
        metavar="RUN_DIR",
        help="experiment directory, <out>/<name> (e.g. runs/retrieval_ablation)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="where to write the site (default RUN_DIR/explore)",
    )
    parser.add_argument(
        "--data",
        metavar="PATH",
        default=None,
        help="Asper-Bench archive, to show the queries and reference programs of a run on it "
        "(default $PRIMSEL_ASPER_BENCH); not needed for the built-in tasks",
    )


def main(args: argparse.Namespace) -> int:
    """Write the site and print the path of its index.html; exit 2 when RUN_DIR is not an
    experiment."""
    from primsel.explore.site import SiteError, build_site

    try:
        index = build_site(args.directory, args.out, args.data)
    except SiteError as exc:
        raise UsageError(str(exc)) from None
    print(f"primsel explore: open {index} in a browser (no server needed)", file=sys.stderr)
    print(index)
    return 0
