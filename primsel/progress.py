"""Progress on stderr: tqdm bars on a terminal, a few whole lines anywhere else.

Items (cells, folds, tasks) differ in cost by orders of magnitude, so no bar shows an ETA: only
the items done, the elapsed time and what runs now. Off a terminal (a log file), a bar redrawn
with carriage returns would fill the log with partial lines, so :class:`PlainProgress` writes
whole lines instead.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from tqdm import tqdm

__all__ = ["BAR_FORMAT", "LINE_MODES", "PlainProgress", "progress_bar"]

#: tqdm's format of every bar: no remaining time, no rate.
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}]{postfix}"
#: What a :class:`PlainProgress` writes: ``"updates"``, a line at every step done; ``"stages"``,
#: a line at every new description; ``"none"``.
LINE_MODES = ("updates", "stages", "none")


def progress_bar(*, total: int, desc: str, unit: str, file: TextIO, disable: bool = False,
                 initial: int = 0, leave: bool = True, position: int | None = None,
                 lines: str = "updates") -> Any:
    """A tqdm bar (:data:`BAR_FORMAT`) when ``file`` is a terminal, else a :class:`PlainProgress`.

    ``total``/``initial``: items to do / already done; ``disable``: show nothing; ``leave``,
    ``position``: as for tqdm; ``lines``: one of :data:`LINE_MODES` (off a terminal).

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
        return PlainProgress(total=total, desc=desc, unit=unit, file=file, initial=initial, lines=lines)
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=file, disable=disable, leave=leave,
                position=position, dynamic_ncols=True, mininterval=0.5, bar_format=BAR_FORMAT)


class PlainProgress:
    """tqdm's counting interface writing whole lines (``desc: n/total unit [elapsed] postfix``).

    Parameters are those of :func:`progress_bar`.
    """

    def __init__(self, *, total: int, desc: str, unit: str, file: TextIO, initial: int = 0,
                 lines: str = "updates") -> None:
        self.total, self.n, self.desc, self.unit, self.file = total, initial, desc, unit, file
        self.lines = lines
        self.postfix = ""
        self._start = time.monotonic()
        self._shown: tuple[str, int] | None = None  # (desc, n) of the last line written

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> None:
        elapsed = int(time.monotonic() - self._start)
        what = f" {self.postfix}" if self.postfix else ""
        self.file.write(f"{self.desc.strip()}: {self.n}/{self.total} {self.unit} "
                        f"[{elapsed // 60:02d}:{elapsed % 60:02d}]{what}\n")
        self.file.flush()
        self._shown = (self.desc, self.n)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items done (a line in ``"updates"`` mode)."""
        self.n += n
        if self.lines == "updates" and n:
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
