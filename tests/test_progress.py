"""Progress: bars without an ETA on a terminal, plain lines anywhere else."""

from __future__ import annotations

import io

import pytest

from primsel.progress import BAR_FORMAT, PlainProgress, progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_file_gets_one_plain_line_per_cell_and_no_carriage_returns():
    log = io.StringIO()
    with progress_bar(total=3, initial=1, desc="grid", unit="cell", file=log) as bar:
        assert isinstance(bar, PlainProgress)
        for label in ("bm25 k=10", "dense k=10"):
            bar.set_postfix_str(label)
            bar.update(1)
    lines = log.getvalue().splitlines()
    assert [line.split(" [")[0] for line in lines] == ["grid: 2/3 cell", "grid: 3/3 cell"]
    assert lines[0].endswith("] bm25 k=10") and lines[1].endswith("] dense k=10")
    assert "\r" not in log.getvalue()


def test_inner_task_bars_write_nothing_to_a_file():
    log = io.StringIO()
    with progress_bar(total=32, desc="  tasks", unit="task", file=log, lines="none") as bar:
        bar.set_description_str("  fitting fold 1/5")
        bar.reset(total=32)
        bar.update(32)
    assert log.getvalue() == ""


def test_a_terminal_gets_a_bar_without_remaining_time():
    term = Terminal()
    with progress_bar(total=4, desc="grid", unit="cell", file=term) as bar:
        bar.update(1)
    assert "<" not in BAR_FORMAT and "remaining" not in BAR_FORMAT and "rate" not in BAR_FORMAT
    text = term.getvalue()
    assert "grid:  25%|" in text and "1/4 cell [" in text and "<" not in text


def test_quiet_shows_nothing_anywhere():
    for stream in (io.StringIO(), Terminal()):
        with progress_bar(total=2, desc="grid", unit="cell", file=stream, disable=True) as bar:
            bar.update(2)
        assert stream.getvalue() == ""


def test_an_unknown_line_mode_is_refused():
    with pytest.raises(ValueError, match="lines must be one of updates, stages, none"):
        progress_bar(total=1, desc="x", unit="cell", file=io.StringIO(), lines="all")
