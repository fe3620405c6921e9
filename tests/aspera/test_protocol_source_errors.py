"""ASPERA's protocol without ASPERA's source (issue 30, item 1): ``primsel run`` on an experiment under the
protocol exits 2, naming ``PRIMSEL_ASPERA_SRC`` and what was not found, before it sends anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from primsel.testing.fake_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = """\
name = "aspera_cck"
library = "aspera"
retriever = "all"

[generator]
type = "openai"
protocol = "aspera"
model = "gpt-4o-2024-05-13"
base_url = "{base_url}"
api_key = "not-used"
seed = 0
"""


def primsel_run(tmp_path: Path, aspera_src: str | None, experiment_lines: str = "") -> tuple[
        subprocess.CompletedProcess[str], int]:
    """``python -m primsel run`` on a CCK experiment (the built-in tasks, ``experiment_lines`` added at the top)
    with ``$PRIMSEL_ASPERA_SRC`` set to ``aspera_src`` (None: unset); the process and the number of requests the
    endpoint received."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PRIMSEL_ASPERA_SRC", "PRIMSEL_ASPER_BENCH")}
    environment["PYTHONPATH"] = str(REPO)
    if aspera_src is not None:
        environment["PRIMSEL_ASPERA_SRC"] = aspera_src
    with FakeOpenAIServer() as server:
        toml = tmp_path / "aspera_cck.toml"
        toml.write_text(experiment_lines + EXPERIMENT.format(base_url=server.base_url), encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "primsel", "run", "--quiet", "--out", str(tmp_path / "runs"),
                               str(toml)], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
        return done, server.request_count


def assert_refused(done: subprocess.CompletedProcess[str], requests: int, *named: str) -> None:
    """The run stopped with exit 2 before any request, its message naming each of ``named``, no traceback."""
    assert done.returncode == 2, done.stderr
    for text in named:
        assert text in done.stderr, (text, done.stderr)
    assert "Traceback" not in done.stderr
    assert requests == 0


def test_unset_variable_exits_2_naming_it(tmp_path):
    done, requests = primsel_run(tmp_path, None)
    assert_refused(done, requests, "PRIMSEL_ASPERA_SRC", "ml-aspera")


def test_a_folder_that_does_not_exist_exits_2_naming_it(tmp_path):
    missing = tmp_path / "no_such_checkout"
    done, requests = primsel_run(tmp_path, str(missing))
    assert_refused(done, requests, "PRIMSEL_ASPERA_SRC", str(missing))


def test_a_folder_that_is_not_a_checkout_exits_2_naming_what_is_missing(tmp_path):
    folder = tmp_path / "some_project"
    (folder / "src" / "other").mkdir(parents=True)
    done, requests = primsel_run(tmp_path, str(folder))
    assert_refused(done, requests, "PRIMSEL_ASPERA_SRC", str(folder), "src/aspera")


def test_a_checkout_without_a_file_the_agents_read_exits_2_naming_the_file(tmp_path, aspera_src):
    """A copy of the checkout without ASPERA's system-turn templates (the CCK agent's system message)."""
    copy = tmp_path / "ml-aspera"
    shutil.copytree(aspera_src / "src" / "aspera", copy / "src" / "aspera",
                    ignore=shutil.ignore_patterns("system_turn_templates.py", "__pycache__"))
    done, requests = primsel_run(tmp_path, str(copy))
    assert_refused(done, requests, "PRIMSEL_ASPERA_SRC", str(copy), "system_turn_templates.py")


def test_aspera_src_in_the_experiment_that_is_not_a_checkout_exits_2_naming_the_key(tmp_path, aspera_src):
    """The experiment's ``aspera_src`` names the checkout in place of the variable (set here to a good one)."""
    folder = tmp_path / "not_aspera"
    folder.mkdir()
    done, requests = primsel_run(tmp_path, str(aspera_src), experiment_lines=f'aspera_src = "{folder}"\n')
    assert_refused(done, requests, "aspera_src", str(folder))
