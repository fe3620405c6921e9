"""``python -m primsel``: the same command line as ``primsel``."""

import sys

from primsel.cli import main

if __name__ == "__main__":
    sys.exit(main())
