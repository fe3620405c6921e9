"""What the benchmark scripts share: offline model loading and a fresh primsel cache."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def fresh_cache() -> Iterator[str]:
    """Run the block with ``PRIMSEL_CACHE_DIR`` set to a new temporary directory (removed
    afterwards, the previous value restored) and models loaded offline. Yields the directory."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    previous = os.environ.get("PRIMSEL_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="primsel-bench-") as cache:
        os.environ["PRIMSEL_CACHE_DIR"] = cache
        try:
            yield cache
        finally:
            if previous is None:
                os.environ.pop("PRIMSEL_CACHE_DIR", None)
            else:
                os.environ["PRIMSEL_CACHE_DIR"] = previous
