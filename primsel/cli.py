"""The ``primsel`` console script and ``python -m primsel.cli``: the command line of
:mod:`primsel.commands`, whose names this module also gives to older imports."""

import sys

from primsel.commands import SUBCOMMANDS, UsageError, build_parser, main, output_stream, read_jsonl_objects

__all__ = ["SUBCOMMANDS", "UsageError", "build_parser", "main", "output_stream", "read_jsonl_objects"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
