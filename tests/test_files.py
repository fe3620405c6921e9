"""Files: the one cache directory rule, atomic writes, canonical JSON and JSON Lines."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from primsel import files
from primsel.files import JsonlError, cache_dir, canonical_json, digest, dumps_jsonl, read_jsonl, write_atomic


def test_cache_dir_is_the_variable_with_home_expanded_else_the_user_cache(monkeypatch):
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", "~/somewhere")
    assert cache_dir() == Path.home() / "somewhere"
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", "")
    assert cache_dir() == Path.home() / ".cache" / "primsel"
    monkeypatch.delenv("PRIMSEL_CACHE_DIR")
    assert cache_dir() == Path.home() / ".cache" / "primsel"


def test_every_cache_lives_below_the_cache_dir(tmp_path, monkeypatch):
    from primsel.llm.client import ChatClient
    from primsel.retrieval.encoders import SentenceEncoder

    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path))
    client = ChatClient(model="m", base_url="http://127.0.0.1:9/v1")
    assert client._cache_path("ab" * 32).parent.parent == tmp_path / "llm"
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    assert SentenceEncoder(str(tmp_path / "model")).cache_path.parent == tmp_path / "embeddings"


def test_write_atomic_round_trips_lone_surrogates(tmp_path):
    row = {"message": "bad " + chr(0xD800) + " é \\ " + chr(0xDFFF)}
    write_atomic(tmp_path / "t.jsonl", dumps_jsonl([row]))
    assert json.loads((tmp_path / "t.jsonl").read_text(encoding="utf-8")) == row
    assert "é" in (tmp_path / "t.jsonl").read_text(encoding="utf-8")   # other text stays readable
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


def test_write_atomic_writes_bytes_and_creates_parents(tmp_path):
    write_atomic(tmp_path / "a" / "b" / "v.bin", b"\x00\x01", durable=False)
    assert (tmp_path / "a" / "b" / "v.bin").read_bytes() == b"\x00\x01"


def test_write_atomic_removes_its_temporary_file_on_failure(tmp_path, monkeypatch):
    def broken(fd):
        raise OSError(28, "No space left on device")

    (tmp_path / "report.json").write_text("old")
    monkeypatch.setattr(files.os, "fsync", broken)
    with pytest.raises(OSError, match="No space"):
        write_atomic(tmp_path / "report.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert (tmp_path / "report.json").read_text() == "old"


def test_digest_is_the_sha256_of_the_canonical_json():
    obj = {"b": [1, "é"], "a": None}
    assert canonical_json(obj) == '{"a":null,"b":[1,"é"]}'
    assert digest(obj) == hashlib.sha256('{"a":null,"b":[1,"é"]}'.encode()).hexdigest()


def test_read_jsonl_skips_blank_lines_and_names_a_bad_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n[2]\n', encoding="utf-8")
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (3, [2])]
    path.write_text('{"a": 1}\n{"a": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path}:2: invalid JSON"):
        list(read_jsonl(path))


def test_a_bad_line_gives_its_line_column_and_reason_to_the_caller(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": }\n[3]\n', encoding="utf-8")
    with pytest.raises(JsonlError) as caught:
        list(read_jsonl(path))
    error = caught.value
    assert (error.path, error.line, error.column, error.reason) == (path, 2, 7, "Expecting value")
    assert error.detail == "Expecting value: line 1 column 7 (char 6)"
    assert str(error) == f"{path}:2: invalid JSON: Expecting value"
    skipped: list[JsonlError] = []
    assert list(read_jsonl(path, on_error=skipped.append)) == [(1, {"a": 1}), (3, [3])]
    assert [e.line for e in skipped] == [2]


def test_read_jsonl_reads_a_given_text_and_keeps_a_line_separator_inside_a_string(tmp_path):
    text = '{"q": "one\u2028two"}\r\n\n{"q": "x\x85y"}\n'
    assert list(read_jsonl(tmp_path / "not-read.jsonl", text=text.replace("\r\n", "\n"))) == [
        (1, {"q": "one\u2028two"}), (3, {"q": "x\x85y"})]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(text.encode("utf-8"))
    assert list(read_jsonl(path)) == [(1, {"q": "one\u2028two"}), (3, {"q": "x\x85y"})]


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_honour_the_umask(tmp_path, mask, mode):
    from primsel.files import current_umask, write_atomic

    old = os.umask(mask)
    try:
        assert current_umask() == mask
        write_atomic(tmp_path / "report.md", "text")
        write_atomic(tmp_path / "cache.npy", b"\x00", durable=False)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "cache.npy").stat().st_mode) == mode


def test_a_run_and_retrieve_out_are_readable_by_others_under_umask_022(tmp_path, monkeypatch, capsys):
    from primsel.cli import main

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    cfg = tmp_path / "small.toml"
    cfg.write_text('name = "small"\nretriever = "bm25"\nk = 2\n')
    old = os.umask(0o022)
    try:
        assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
        assert main(["retrieve", "--retriever", "bm25", "--quiet", "--out", str(tmp_path / "bm25.trec")]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    written = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()] + [tmp_path / "bm25.trec"]
    names = {p.name for p in written}
    assert {"report.md", "config.json", "report.json", "run.trec", "tasks.jsonl", "bm25.trec"} <= names
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {p.name: "0o644" for p in written}
