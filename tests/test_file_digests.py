"""File digests remembered by path, size and times; the switch that bypasses every cache."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time

from primsel import files
from primsel.files import cache_dir, caches_disabled, caches_enabled, file_sha256


def _settled(path, data: bytes) -> None:
    """Write ``data`` and date the file 10 s back (past the racy window)."""
    path.write_bytes(data)
    past = time.time() - 10
    os.utime(path, (past, past))


def test_a_settled_files_digest_is_remembered_until_its_stat_changes(tmp_path, monkeypatch):
    weights = tmp_path / "weights.bin"
    _settled(weights, b"abc")
    assert file_sha256(weights) == hashlib.sha256(b"abc").hexdigest()
    (entry,) = (cache_dir() / "digests").glob("*.json")
    # a forged digest under the same stamp is believed: the remembered value is used, not the file
    monkeypatch.setattr(files, "_file_digests", {})
    forged = dict(json.loads(entry.read_text()), sha256="0" * 64)
    entry.write_text(json.dumps(forged))
    assert file_sha256(weights) == "0" * 64
    # not inside caches_disabled, which reads the file again
    monkeypatch.setattr(files, "_file_digests", {})
    with caches_disabled():
        assert file_sha256(weights) == hashlib.sha256(b"abc").hexdigest()
    # new bytes of the same size, the modification time put back: the change time differs
    monkeypatch.setattr(files, "_file_digests", {})
    stamp = weights.stat()
    weights.write_bytes(b"abd")
    os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert file_sha256(weights) == hashlib.sha256(b"abd").hexdigest()


def test_a_file_modified_in_the_last_seconds_is_read_every_time(tmp_path):
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"abc")
    assert file_sha256(weights) == hashlib.sha256(b"abc").hexdigest()
    weights.write_bytes(b"abd")           # same size, possibly the same timestamps
    assert file_sha256(weights) == hashlib.sha256(b"abd").hexdigest()
    assert not (cache_dir() / "digests").exists()


def test_caches_disabled_is_process_wide_and_nests():
    seen = []
    with caches_disabled():
        thread = threading.Thread(target=lambda: seen.append(caches_enabled()))
        thread.start()
        thread.join()
        with caches_disabled():
            seen.append(caches_enabled())
        seen.append(caches_enabled())
    seen.append(caches_enabled())
    assert seen == [False, False, False, True]
