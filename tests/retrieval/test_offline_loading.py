"""Models load offline whatever was imported first, and a model not on disk fails at once.

Each case runs in a fresh interpreter that imports sentence-transformers (and with it
huggingface_hub and transformers) before primsel, with ``HF_HUB_OFFLINE`` unset and the hub
endpoint (``HF_ENDPOINT``) pointing at a loopback socket that accepts connections and never
answers: a network that never answers. Any hub request would hang there (before the fix a
non-default name was still loading after 160 s) and is counted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from primsel.datasets import load_builtin_tasks
from primsel.simulator.library import build_library
from primsel.retrieval.encoders import DEFAULT_MODEL

pytestmark = pytest.mark.dense

SCRIPT = """
import json, sys, time
import sentence_transformers  # imported first: huggingface_hub and transformers read HF_HUB_OFFLINE now
from primsel.retrieval.encoders import EncoderLoadError, SentenceEncoder
for model in sys.argv[1:]:
    begin = time.perf_counter()
    try:
        shape = list(SentenceEncoder(model, use_cache=False).encode(["book a room"]).shape)
        outcome = "loaded"
    except EncoderLoadError as exc:
        shape, outcome = None, "EncoderLoadError: " + str(exc)
    print(json.dumps({"model": model, "seconds": time.perf_counter() - begin, "outcome": outcome, "shape": shape}),
          flush=True)
"""


class BlackHole:
    """A loopback TCP server that accepts connections and never sends a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


def hub_cache_entry(hf_home, repo: str, files_from) -> None:
    """Put a model in the Hugging Face cache layout, as a download leaves it."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = hf_home / "hub" / f"models--{repo.replace('/', '--')}"
    shutil.copytree(files_from, folder / "snapshots" / commit)
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)


def test_models_load_offline_whatever_the_import_order_and_missing_ones_fail_at_once(tmp_path):
    pytest.importorskip("sentence_transformers")
    from primsel.testing.tiny_model import write_tiny_model

    texts = [p.text("full") for p in build_library().values()] + [t.query for t in load_builtin_tasks()]
    tiny = write_tiny_model(tmp_path / "tiny", texts, dim=16)
    hf_home = tmp_path / "hf"
    hub_cache_entry(hf_home, "someone/tiny-cached", tiny)
    hole = BlackHole()
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=hole.url, HF_HOME=str(hf_home), PRIMSEL_CACHE_DIR=str(tmp_path / "cache"))
    models = ["sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "someone/tiny-cached", str(tiny),
              DEFAULT_MODEL]
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, *models], env=env, capture_output=True, text=True,
                              timeout=600)
    finally:
        hole.close()
    assert done.returncode == 0, done.stderr
    rows = {r["model"]: r for r in map(json.loads, done.stdout.splitlines())}
    for name, repo in [(models[0], models[0]), (models[1], "sentence-transformers/all-MiniLM-L6-v2")]:
        assert rows[name]["outcome"] == (
            f"EncoderLoadError: sentence model {name!r} is neither a local directory nor in the local Hugging "
            f"Face cache; primsel loads models offline only: download it once (e.g. `hf download {repo}`), give "
            f"a model directory, or leave the default {DEFAULT_MODEL!r}")
        # at once: the local cache is looked at, nothing is loaded or asked (measured 0.2-1.1 ms)
        assert rows[name]["seconds"] < 2.0
    assert rows["someone/tiny-cached"]["shape"] == rows[str(tiny)]["shape"] == [1, 16]
    assert rows[DEFAULT_MODEL]["shape"] == [1, 384]
    assert hole.connections == []                   # no request ever left for the hub
