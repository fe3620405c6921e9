"""Exported model answers: written from the answer cache, read back into it, refused when malformed."""

from __future__ import annotations

import gzip
import json

import pytest

from primsel.llm.answers import AnswersError, answer_path, export_answers, import_answers
from primsel.llm.client import ChatClient
from primsel.testing.fake_server import FakeOpenAIServer, Reply


def _ask(server, text):
    client = ChatClient(model="m", base_url=server.base_url, api_key="x")
    return client.complete([{"role": "user", "content": text}])


def test_answers_round_trip_through_a_file_into_an_empty_cache(tmp_path, monkeypatch):
    with FakeOpenAIServer(responder=lambda body: Reply(content="A:" + body["messages"][0]["content"])) as server:
        first, second = _ask(server, "one"), _ask(server, "two")
        assert first.key and first.key != second.key
        path = tmp_path / "x.answers.jsonl.gz"
        assert export_answers([("cell", "2", second.key), ("cell", "1", first.key), ("cell", "3", "f" * 64)],
                              path) == (2, 1)
        rows = [json.loads(line) for line in gzip.open(path, "rt")]
        # sorted by cell, task, digest; no prompt in the file
        assert [(r["cell"], r["task"], r["answer"]["text"]) for r in rows] == [("cell", "1", "A:one"),
                                                                              ("cell", "2", "A:two")]
        assert "one" not in json.dumps([r["digest"] for r in rows])
        # the same answers give the same bytes (gzip's timestamp is fixed)
        again = tmp_path / "again.answers.jsonl.gz"
        export_answers([("cell", "1", first.key), ("cell", "2", second.key)], again)
        assert again.read_bytes() == path.read_bytes()
        sent = server.request_count
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path / "other-cache"))
    assert import_answers(path) == (2, 0)
    assert import_answers(path) == (0, 2)
    with FakeOpenAIServer(responder=lambda body: Reply(content="never")) as server:
        assert _ask(server, "one").text == "A:one" and server.request_count == 0
    assert sent == 2


@pytest.mark.parametrize("content, problem", [
    (b"not gzip", "not a gzip-compressed JSON Lines file"),
    (gzip.compress(b'{"digest": "abc", "answer": {"text": "t"}}\n', mtime=0), ":1: expected a 64-character hex 'digest'"),
    (gzip.compress(b'\n{"digest": "' + b"a" * 64 + b'", "answer": {}}\n', mtime=0), ":2: expected an 'answer' object"),
    (gzip.compress(b"[1,\n", mtime=0), ":1: not JSON"),
])
def test_a_malformed_file_is_refused_naming_the_line_and_writes_nothing(tmp_path, content, problem):
    path = tmp_path / "bad.answers.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(AnswersError, match=problem):
        import_answers(path)
    assert not answer_path("a" * 64).exists()


def test_a_run_re_scores_its_exported_answers_without_the_model(tmp_path, monkeypatch):
    from primsel.datasets import load_builtin_tasks
    from primsel.experiments.config import load_config
    from primsel.experiments.runner import run_experiment
    from primsel.reporting import write_report
    from primsel.testing.fake_server import pipeline_responder

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    tasks = load_builtin_tasks()
    with FakeOpenAIServer(responder=pipeline_responder(tasks)) as server:
        toml = tmp_path / "exp" / "answered.toml"
        toml.parent.mkdir()
        toml.write_text(f'name = "answered"\nretriever = "bm25"\nk = 10\n[generator]\ntype = "openai"\n'
                        f'model = "m"\nbase_url = "{server.base_url}"\napi_key = "x"\n')
        first = run_experiment(load_config(toml), tmp_path / "runs", progress=False, sample=4)
        sent = server.request_count
    assert sent == 4
    write_report(tmp_path / "runs" / "answered", export=toml.parent)
    assert (toml.parent / "answered.answers.jsonl.gz").is_file()
    # another machine: an empty cache, no server; the committed answers beside the file
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path / "elsewhere"))
    log = tmp_path / "log.txt"
    with open(log, "w") as fh:
        again = run_experiment(load_config(toml), tmp_path / "runs2", progress=False, sample=4, log=fh)
    assert "4 model answers in answered.answers.jsonl.gz: 4 put into the answer cache" in log.read_text()
    rows = [json.loads(line) for line in (tmp_path / "runs2" / "answered" / again.computed[0] / "tasks.jsonl").open()]
    before = [json.loads(line) for line in (tmp_path / "runs" / "answered" / first.computed[0] / "tasks.jsonl").open()]
    assert [(r["task_id"], r["status"], r["prompt_digest"]) for r in rows] == \
           [(r["task_id"], r["status"], r["prompt_digest"]) for r in before]
