"""Ctrl-C during ``primsel run`` with LLM requests in flight: a real process, a real SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from primsel.cli import main as cli_main
from primsel.testing.fake_server import FakeOpenAIServer, Reply

FAST = "```python\ndef answer():\n    return 1\n```"
CONFIG = """
name = "slow"
retriever = "bm25"
k = 3
[generator]
type = "openai"
model = "m"
examples = 0
concurrency = 4
max_retries = 0
timeout_s = 120
"""


#: Seconds the late answers wait: far beyond any bound below, so that a process that waited for
#: them (instead of cancelling the requests) could never pass for one that exits at once.
LATE_S = 600.0


def _first_answers_fast(n_fast: int):
    """A responder: the first ``n_fast`` requests are answered at once, the others after
    :data:`LATE_S` seconds."""
    lock = threading.Lock()
    seen = [0]

    def respond(request):
        with lock:
            seen[0] += 1
            number = seen[0]
        return Reply(content=FAST) if number <= n_fast else Reply(content="late", delay_s=LATE_S)

    return respond


def _cached_answers(cache: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["response"]["text"] for p in (cache / "llm").rglob("*.json"))


@pytest.mark.slow
def test_ctrl_c_with_four_requests_in_flight_exits_130_at_once_and_keeps_the_answers_received(tmp_path, monkeypatch):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(CONFIG)
    cache = tmp_path / "cache"
    runs = tmp_path / "runs"
    with FakeOpenAIServer(responder=_first_answers_fast(2)) as srv:
        env = {k: v for k, v in os.environ.items() if k != "PRIMSEL_ASPER_BENCH"}
        # a hang dumps every thread's stack (SIGABRT below) so that the failure says where
        env.update(PRIMSEL_CACHE_DIR=str(cache), OPENAI_BASE_URL=srv.base_url, PYTHONFAULTHANDLER="1")
        cmd = [sys.executable, "-m", "primsel.cli", "run", str(cfg), "--out", str(runs), "--quiet", "--workers", "1"]
        # SIGINT as a terminal delivers it, even when this test runs where SIGINT is ignored (a shell
        # starts background jobs so, and a child inherits it): Python then installs no handler
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            # two answers received, then four requests waiting for theirs (the other tasks queued)
            deadline = time.monotonic() + 240
            while srv.stats()["in_flight"] < 4 or srv.stats()["answered"] < 2:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr and proc.stderr.read()
                time.sleep(0.05)
            time.sleep(0.3)
            assert srv.stats() == {"requests": 6, "answered": 2, "in_flight": 4, "max_in_flight": 4}
            begin = time.monotonic()
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGABRT)
                _, err = proc.communicate(timeout=60)
                raise AssertionError(f"no exit within 300 s of SIGINT; the threads then:\n{err[-6000:]}") from None
            elapsed = time.monotonic() - begin
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        sent = srv.request_count
    # before, the message came at once but the process waited for the four answers (60.9 s after
    # the signal with 60 s answers); now the requests are cancelled and it exits at once
    # (measured 0.12-0.35 s over 10 runs on a busy 2-core machine). The bound is behaviour, not
    # speed: a tenth of the late answers' delay, which holds at load 15.
    assert proc.returncode == 130, err
    assert elapsed < LATE_S / 10
    assert sent == 6                                # nothing was sent after the interrupt
    assert err.strip().splitlines()[-1] == (
        f"primsel run: interrupted; 0 cells computed before it stay in {runs / 'slow'}; "
        "run the same command again to resume")
    assert _cached_answers(cache) == [FAST, FAST]   # the two answers received before it stay cached
    # the same command resumes and sends only the 30 requests not answered before
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(cache))
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    with FakeOpenAIServer(responder=lambda request: Reply(content=FAST)) as again:
        monkeypatch.setenv("OPENAI_BASE_URL", again.base_url)
        assert cli_main(["run", str(cfg), "--out", str(runs), "--quiet", "--workers", "1", "--no-report"]) == 0
        assert again.request_count == 32 - 2
