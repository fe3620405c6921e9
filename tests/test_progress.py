"""Progress: bars without an ETA on a terminal, plain lines anywhere else; work of like items
(epochs, texts, LLM requests) with its rate and remaining time."""

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
    with pytest.raises(ValueError, match="lines must be one of updates, stages, timed, none"):
        progress_bar(total=1, desc="x", unit="cell", file=io.StringIO(), lines="all")


# -- work of like items: rate and remaining time -------------------------------------------------
class Clock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_a_line_every_ten_seconds_with_the_rate_and_the_time_left(monkeypatch):
    from primsel import progress

    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    log = io.StringIO()
    bar = PlainProgress(total=6, desc="fine-tuning", unit="epoch", file=log, lines="timed", rate=True)
    for _ in range(6):
        clock.now += 4.0        # an epoch takes 4 s: lines at 12 s (3 done), 24 s (6, the last)
        bar.update(1)
    # 3 epochs in 12 s: 0.25 epoch/s, 3 left take 12 s; at the end nothing is left
    assert log.getvalue().splitlines() == [
        "fine-tuning: 3/6 epoch [00:12, 0.25 epoch/s, 00:12 left]",
        "fine-tuning: 6/6 epoch [00:24, 0.25 epoch/s, 00:00 left]",
    ]


def test_activity_shows_nothing_outside_show_progress_and_lines_inside():
    from primsel.progress import activity, counted, show_progress

    with activity(total=2, desc="embedding", unit="text") as bar:
        bar.update(2)                              # no stream: nothing to see, nothing raised
    log = io.StringIO()
    with show_progress(log):
        assert list(counted(range(3), desc="fine-tuning", unit="epoch")) == [0, 1, 2]
    lines = log.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fine-tuning: 3/3 epoch [00:00, ")
    assert lines[0].endswith(" epoch/s, 00:00 left]")


def test_a_terminal_gets_a_bar_with_the_rate_and_the_remaining_time():
    from primsel.progress import RATE_BAR_FORMAT, activity, show_progress

    term = Terminal()
    with show_progress(term), activity(total=4, desc="embedding", unit="text") as bar:
        assert bar.bar_format == RATE_BAR_FORMAT and bar.pos in (2, -2)
        bar.update(4)
    assert "<" in term.getvalue() and "text/s" in term.getvalue()


def test_an_llm_batch_counts_its_requests_and_the_tokens_per_second():
    from primsel.llm.client import ChatClient
    from primsel.progress import show_progress
    from primsel.testing.fake_server import FakeOpenAIServer, Reply

    log = io.StringIO()
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.push(Reply(content="x", completion_tokens=40))
        client = ChatClient(model="m", base_url=server.base_url, api_key="test", cache=False, concurrency=1)
        with show_progress(log):
            answers = client.complete_many([[{"role": "user", "content": c}] for c in "abc"])
    assert [a.completion_tokens for a in answers] == [40, 40, 40]
    last = log.getvalue().splitlines()[-1]
    assert last.startswith("LLM requests: 3/3 request [") and " request/s, 00:00 left] " in last
    rate = float(last.rsplit("] ", 1)[1].removesuffix(" tok/s"))
    assert rate > 0     # 120 tokens over the batch's wall time
