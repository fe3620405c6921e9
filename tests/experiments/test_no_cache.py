"""``primsel run --no-cache`` reads and writes no cache: rankings, embeddings, LLM answers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from primsel.cli import main as cli_main
from primsel.datasets import load_builtin_tasks
from primsel.library import with_gold
from primsel.simulator.library import build_library
from primsel.testing.fake_server import FakeOpenAIServer, pipeline_responder

pytestmark = pytest.mark.dense


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(root.rglob("*"))
            if p.is_file()}


def report(out: Path) -> dict:
    (cell,) = json.loads((out / "nocache" / "experiment.json").read_text())["cells"]
    values = json.loads((out / "nocache" / cell["id"] / "report.json").read_text())
    return {k: values[k] for k in ("recall@5", "recall@10", "ndcg@10", "success")}


def test_no_cache_neither_reads_nor_writes_any_cache(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    from primsel.testing.tiny_model import write_tiny_model

    library = build_library()
    tasks = with_gold(load_builtin_tasks(), library)
    tiny = write_tiny_model(tmp_path / "tiny", [p.text("full") for p in library.values()] + [t.query for t in tasks])
    past = time.time() - 60          # a model written a minute ago: its file digests are remembered
    for path in tiny.rglob("*"):
        os.utime(path, (past, past))
    cfg = tmp_path / "nocache.toml"
    cfg.write_text(f'name = "nocache"\nk = 10\nretriever = {{type = "dense", model = {json.dumps(str(tiny))}}}\n'
                   '[generator]\ntype = "openai"\nmodel = "m"\nexamples = 0\nmax_retries = 0\n')
    cache = tmp_path / "cache"
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(cache))
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)

    def run(out: str, *flags: str) -> dict:
        assert cli_main(["run", str(cfg), "--out", str(tmp_path / out), "--quiet", "--workers", "1",
                         "--no-report", *flags]) == 0
        return report(tmp_path / out)

    with FakeOpenAIServer(responder=pipeline_responder(tasks)) as srv:   # answers as a perfect model
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        first = run("a")
        assert first["success"] == 1.0 and srv.request_count == len(tasks)
        # every cache is filled; now make each of them wrong
        assert {p.name for p in cache.iterdir()} == {"digests", "embeddings", "experiments", "llm"}
        for path in (cache / "embeddings").rglob("*.npy"):
            np.save(path, np.zeros(16, dtype=np.float32))
        for path in (cache / "llm").rglob("*.json"):
            entry = json.loads(path.read_text())
            entry["response"]["text"] = "no program here"
            path.write_text(json.dumps(entry))
        for path in (cache / "experiments" / "retrieval").glob("*.json"):
            path.unlink()
        poisoned = snapshot(cache)
        # --no-cache: the results of the first run (the same selections, so the same prompts, whose
        # cached answers now hold no program), every request sent again, the cache untouched
        assert run("b", "--no-cache") == first
        assert srv.request_count == 2 * len(tasks)
        assert snapshot(cache) == poisoned
        # with the cache, the zero vectors are read: another ranking
        assert run("c")["recall@10"] != first["recall@10"]
