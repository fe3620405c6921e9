"""``primsel run`` goes on when the endpoint answers HTTP 200 with a body that does not decode."""

from __future__ import annotations

import json

import pytest

from primsel.cli import main as cli_main
from primsel.testing.fake_server import FakeOpenAIServer, Reply


@pytest.fixture(autouse=True)
def _builtin_tasks(monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)


@pytest.mark.parametrize("raw", [b"", b" \n", b'{"choices": [{"message"', b'{"choices": "\xe9"}'])
def test_a_malformed_body_gives_llm_error_rows_and_the_run_goes_on(tmp_path, capsys, monkeypatch, raw):
    cfg = tmp_path / "broken.toml"
    cfg.write_text('name = "broken"\nretriever = "bm25"\nk = 3\n'
                   '[generator]\ntype = "openai"\nmodel = "m"\nmax_retries = 0\nexamples = 0\n')
    count = {"n": 0}

    def responder(request):       # the first 5 requests get a broken body, the others an answer
        count["n"] += 1
        return Reply(raw=raw) if count["n"] <= 5 else Reply(content="no code here")

    with FakeOpenAIServer(responder=responder) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (cell,) = json.loads((tmp_path / "runs" / "broken" / "experiment.json").read_text())["cells"]
    d = tmp_path / "runs" / "broken" / cell["id"]
    rows = [json.loads(line) for line in (d / "tasks.jsonl").read_text().splitlines()]
    statuses = [r["status"] for r in rows]
    assert statuses.count("llm_error") == 5 and statuses.count("no_program") == len(rows) - 5
    report = json.loads((d / "report.json").read_text())
    assert report["complete"] is False and report["incomplete_tasks"] == 5.0
