"""Text matching shared by the directory and calendar searches."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import re2

# Imported here, not on first use: program processes are forked from a process that imported
# this module, and importing rapidfuzz in each of them cost more than all the rest of a call.
from rapidfuzz import fuzz, process, utils

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # an invalid room name is no news for stderr

#: Called before a search in C starts, with the most steps it may take and what it is (for
#: messages). RE2 searching one text: the compiled pattern's size times the text's length, the
#: bound of RE2's slowest matcher (its NFA, which it falls back to when a pattern's automaton
#: outgrows its memory budget: ``"a" * 3000 + "b"`` in a text of 100,000 characters is 300
#: million steps in C). A fuzzy match (:func:`fuzzy_match`): its character pairs in RE2's steps
#: (:data:`FUZZY_PAIRS_PER_STEP`). It may raise to refuse the search. None (the default, and in
#: a program process, where the time is the program's): no bound. The judge sets it while it
#: runs a task (``primsel.simulator.judge.Clock``): the work is in C, where the judge's timer
#: cannot fire.
search_guard: Callable[[int, str], None] | None = None

#: Minimum WRatio score (0-100) for a fuzzy match, and the most matches returned.
FUZZY_CUTOFF = 90
FUZZY_LIMIT = 50

#: Character pairs (query length times value length) rapidfuzz's WRatio compares in the time
#: RE2's slowest matcher takes one step: 370 to 770 measured on a loaded machine (0.04 to 0.08 ns
#: a pair, 29 ns a step), rounded down. WRatio is quadratic in C: two names of 300,000
#: characters take seconds.
FUZZY_PAIRS_PER_STEP = 300


def fuzzy_match(query: str, values: Sequence[str | None]) -> list[int]:
    """Indexes of ``values`` that fuzzy-match ``query``, best first.

    Scores with rapidfuzz's WRatio after rapidfuzz's default normalisation (lower-case,
    non-alphanumerics to spaces, trimmed). Keeps scores >= 90, at most 50 matches, sorted by
    descending score with ties in ``values`` order. ``None`` values and an empty query never match.
    The whole match runs in C: its worst case, the query's length times the values' total length
    in character pairs, is offered to :data:`search_guard` first, in RE2's steps, when one is set
    (whatever it raises ends the call).
    """
    if not query:
        return []
    candidates = {i: v for i, v in enumerate(values) if v is not None}
    guard = search_guard
    if guard is not None:
        pairs = len(query) * sum(len(value) for value in candidates.values())
        guard(pairs // FUZZY_PAIRS_PER_STEP, "a fuzzy name match")
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

    Matched as ASPERA matches room names (polars' ``str.contains(f"(?i){pattern}")``, Rust's
    regex engine): by a linear-time engine, RE2, with no backtracking, so a pattern from the
    world state (a room name a program wrote) costs time in proportion to the text it is
    searched in, never exponential time (``(0+)+1`` against a run of zeros). A pattern RE2
    cannot take (look-arounds, back-references, or one whose compiled form passes RE2's 8 MiB
    memory budget) matches nothing, as an invalid one does. The compiled pattern is not kept:
    nothing of a task's data stays in the process once the call returns. Each text's search is
    offered to :data:`search_guard` first, when one is set (whatever it raises ends the call).
    """
    try:
        compiled = re2.compile("(?i)" + pattern, _RE2_OPTIONS)
    except re2.error:
        return None
    finally:
        re2.purge()  # re2 keeps compiled patterns in a cache of its own
    guard = search_guard
    for index, value in enumerate(values):
        if value is None:
            continue
        if guard is not None:
            guard(compiled.programsize * max(len(value), 1), "a regular-expression search")
        if compiled.search(value) is not None:
            return index
    return None
