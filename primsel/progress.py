"""Progress on stderr: tqdm bars on a terminal, a few whole lines anywhere else.

Items (cells, folds, tasks) differ in cost by orders of magnitude, so their bars show no ETA: only
the items done, the elapsed time and what runs now. Off a terminal (a log file), a bar redrawn
with carriage returns would fill the log with partial lines, so :class:`PlainProgress` writes
whole lines instead.

Work made of like items (fine-tuning epochs, texts to embed, requests to a model) shows its
rate and remaining time: :func:`activity`, a bar below the runner's (or, in a log, a whole line
at most every :data:`LINE_SECONDS` seconds and at the end). Where it goes is set once by the
command that runs the work, with :func:`show_progress`; outside one (a script, a test) it shows
nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, TypeVar

from tqdm import tqdm

__all__ = [
    "BAR_FORMAT",
    "LINE_MODES",
    "LINE_SECONDS",
    "RATE_BAR_FORMAT",
    "PlainProgress",
    "activity",
    "counted",
    "progress_bar",
    "show_progress",
]

T = TypeVar("T")

#: tqdm's format of every bar: no remaining time, no rate.
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}]{postfix}"
#: tqdm's format of a bar of like items: the rate and the remaining time too.
RATE_BAR_FORMAT = ("{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} "
                   "[{elapsed}<{remaining}, {rate_fmt}]{postfix}")
#: What a :class:`PlainProgress` writes: ``"updates"``, a line at every step done; ``"stages"``,
#: a line at every new description; ``"timed"``, a line when :data:`LINE_SECONDS` have passed
#: since the last one, and at the last item; ``"none"``.
LINE_MODES = ("updates", "stages", "timed", "none")
#: Seconds between two lines of a ``"timed"`` :class:`PlainProgress`.
LINE_SECONDS = 10.0
#: Where :func:`activity` shows progress: the stream :func:`show_progress` set, or None (nothing).
_SINK: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar("primsel_progress", default=None)
#: The terminal row of an :func:`activity` bar: below the runner's cell (0) and task (1) bars.
ACTIVITY_POSITION = 2


def progress_bar(*, total: int, desc: str, unit: str, file: TextIO, disable: bool = False,
                 initial: int = 0, leave: bool = True, position: int | None = None,
                 lines: str = "updates", rate: bool = False) -> Any:
    """A tqdm bar (:data:`BAR_FORMAT`) when ``file`` is a terminal, else a :class:`PlainProgress`.

    ``total``/``initial``: items to do / already done; ``disable``: show nothing; ``leave``,
    ``position``: as for tqdm; ``lines``: one of :data:`LINE_MODES` (off a terminal); ``rate``:
    also the items per second and the remaining time (:data:`RATE_BAR_FORMAT`), for like items.

    Returns
    -------
    An object with tqdm's counting interface, usable as a context manager.

    Raises
    ------
    ValueError : ``lines`` not one of :data:`LINE_MODES`.
    """
    if lines not in LINE_MODES:
        raise ValueError(f"lines must be one of {', '.join(LINE_MODES)}, got {lines!r}")
    try:
        terminal = bool(file.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        terminal = False
    if not disable and not terminal:
        return PlainProgress(total=total, desc=desc, unit=unit, file=file, initial=initial, lines=lines,
                             rate=rate)
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=file, disable=disable, leave=leave,
                position=position, dynamic_ncols=True, mininterval=0.5,
                bar_format=RATE_BAR_FORMAT if rate else BAR_FORMAT)


@contextlib.contextmanager
def show_progress(file: TextIO | None) -> Iterator[None]:
    """While active, :func:`activity` shows progress on ``file`` (None: nowhere). A command turns
    it on around the work it runs; the setting is per thread and per asyncio task."""
    token = _SINK.set(file)
    try:
        yield
    finally:
        _SINK.reset(token)


def activity(*, total: int, desc: str, unit: str) -> Any:
    """The progress of ``total`` like items (epochs, texts, requests), with their rate and the
    remaining time, where :func:`show_progress` says: a bar on a terminal (below the runner's,
    removed when done), whole lines in a log (``"timed"``); nothing outside :func:`show_progress`.

    Returns
    -------
    An object with tqdm's counting interface, usable as a context manager.
    """
    sink = _SINK.get()
    if sink is None:
        return tqdm(total=total, disable=True)
    return progress_bar(total=total, desc=desc, unit=unit, file=sink, leave=False,
                        position=ACTIVITY_POSITION, lines="timed", rate=True)


class PlainProgress:
    """tqdm's counting interface writing whole lines (``desc: n/total unit [elapsed] postfix``).

    Parameters are those of :func:`progress_bar`.
    """

    def __init__(self, *, total: int, desc: str, unit: str, file: TextIO, initial: int = 0,
                 lines: str = "updates", rate: bool = False) -> None:
        self.total, self.n, self.desc, self.unit, self.file = total, initial, desc, unit, file
        self.lines = lines
        self.rate = rate
        self.postfix = ""
        self._start = time.monotonic()
        self._initial = initial
        self._last_line = self._start
        self._shown: tuple[str, int] | None = None  # (desc, n) of the last line written

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> None:
        now = time.monotonic()
        what = f" {self.postfix}" if self.postfix else ""
        self.file.write(f"{self.desc.strip()}: {self.n}/{self.total} {self.unit} "
                        f"[{_clock(now - self._start)}{self._rate_text(now)}]{what}\n")
        self.file.flush()
        self._shown = (self.desc, self.n)
        self._last_line = now

    def _rate_text(self, now: float) -> str:
        """``", 2.50 epoch/s, 00:12 left"`` with ``rate`` once an item is done, else ``""``."""
        done = self.n - self._initial
        seconds = now - self._start
        if not self.rate or done <= 0 or seconds <= 0:
            return ""
        per_second = done / seconds
        left = max(self.total - self.n, 0) / per_second
        return f", {per_second:.2f} {self.unit}/s, {_clock(left)} left"

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items done (a line in ``"updates"`` mode; in ``"timed"`` mode when
        :data:`LINE_SECONDS` have passed since the last line, or at the last item)."""
        self.n += n
        if not n:
            return
        if self.lines == "updates":
            self._write()
        elif self.lines == "timed" and (self.n >= self.total
                                        or time.monotonic() - self._last_line >= LINE_SECONDS):
            self._write()

    def reset(self, total: int | None = None) -> None:
        """Start counting again from 0 (with a new ``total`` when given)."""
        self.n = 0
        if total is not None:
            self.total = total

    def set_description_str(self, desc: str, refresh: bool = True) -> None:
        """Name what runs now (a line in ``"stages"`` mode unless the last line named it)."""
        self.desc = desc
        if self.lines == "stages" and (self._shown is None or self._shown[0] != desc):
            self._write()

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        """Set what the next line ends with."""
        self.postfix = text

    def refresh(self) -> None:
        """Nothing to redraw."""

    def close(self) -> None:
        """In ``"stages"`` mode, a last line when items were done since the last one."""
        if self.lines == "stages" and self._shown is not None and self._shown[1] != self.n:
            self._write()
            self.lines = "none"


def counted(items: Iterable[T], *, desc: str, unit: str) -> Iterator[T]:
    """The items of ``items``, each counted by an :func:`activity` as the next is asked for (the
    bar closes when the loop ends, or is left)."""
    items = list(items)
    with activity(total=len(items), desc=desc, unit=unit) as bar:
        for item in items:
            yield item
            bar.update(1)


def _clock(seconds: float) -> str:
    """``MM:SS`` (``H:MM:SS`` from an hour on) of a number of seconds."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    if hours:
        return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{rest // 60:02d}:{rest % 60:02d}"
