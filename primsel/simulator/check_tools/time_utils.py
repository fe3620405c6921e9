"""Recurrence helper that only the evaluation programs may call."""

from __future__ import annotations

import datetime

from primsel.simulator.apps.time_utils import (
    MAX_EVENT_RECURRENCES,
    RepetitionSpec,
    _repetition_schedule,
    now_,
)

__all__ = ["repetition_schedule", "MAX_EVENT_RECURRENCES", "RepetitionSpec", "now_", "datetime"]


def repetition_schedule(
    when: datetime.time,
    spec: RepetitionSpec,
    start_date: datetime.date | None = None,
) -> list[datetime.datetime]:
    """Occurrences of a recurrence rule, as the calendar stores them.

    Parameters
    ----------
    when : time of day of every occurrence.
    spec : the rule, or None (no occurrences).
    start_date : first day of the series; default today.

    Returns
    -------
    list of datetimes, ascending; ``[]`` for ``spec=None``; at most ``MAX_EVENT_RECURRENCES``
    (23) items when the rule has neither ``max_repetitions`` nor ``recurs_until``.

    Notes
    -----
    Rewrites ``spec.recurs_until`` in place to that day at ``when`` (as the calendar does).
    """
    if spec is None:
        return []
    return _repetition_schedule(when, spec, start_date)
