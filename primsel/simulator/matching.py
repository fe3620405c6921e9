"""Text matching shared by the directory and calendar searches."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Imported here, not on first use: program processes are forked from a process that imported
# this module, and importing rapidfuzz in each of them cost more than all the rest of a call.
from rapidfuzz import fuzz, process, utils

#: Minimum WRatio score (0-100) for a fuzzy match, and the most matches returned.
FUZZY_CUTOFF = 90
FUZZY_LIMIT = 50


def fuzzy_match(query: str, values: Sequence[str | None]) -> list[int]:
    """Indexes of ``values`` that fuzzy-match ``query``, best first.

    Scores with rapidfuzz's WRatio after rapidfuzz's default normalisation (lower-case,
    non-alphanumerics to spaces, trimmed). Keeps scores >= 90, at most 50 matches, sorted by
    descending score with ties in ``values`` order. ``None`` values and an empty query never match.
    """
    if not query:
        return []
    candidates = {i: v for i, v in enumerate(values) if v is not None}
    hits = process.extract(
        query,
        candidates,
        scorer=fuzz.WRatio,
        processor=utils.default_process,
        score_cutoff=FUZZY_CUTOFF,
        limit=None,
    )
    hits = sorted(hits, key=lambda hit: (-hit[1], hit[2]))
    return [index for _, _, index in hits[:FUZZY_LIMIT]]


def regex_first_match(pattern: str, values: Sequence[str]) -> int | None:
    """Index of the first value in which ``pattern`` (a case-insensitive regex) is found, else None.

    An invalid pattern matches nothing.
    """
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except re.error:
        return None
    for index, value in enumerate(values):
        if value is not None and compiled.search(value):
            return index
    return None
