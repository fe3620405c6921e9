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


def primsel_run(tmp_path: Path, aspera_src: str | None) -> tuple[subprocess.CompletedProcess[str], int]:
    """``python -m primsel run`` on a CCK experiment (the built-in tasks) with ``$PRIMSEL_ASPERA_SRC`` set to
    ``aspera_src`` (None: unset); the process and the number of requests the endpoint received."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PRIMSEL_ASPERA_SRC", "PRIMSEL_ASPER_BENCH")}
    environment["PYTHONPATH"] = str(REPO)
    if aspera_src is not None:
        environment["PRIMSEL_ASPERA_SRC"] = aspera_src
    with FakeOpenAIServer() as server:
        toml = tmp_path / "aspera_cck.toml"
        toml.write_text(EXPERIMENT.format(base_url=server.base_url), encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "primsel", "run", "--quiet", "--out", str(tmp_path / "runs"),
                               str(toml)], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
        return done, server.request_count


def test_unset_variable_exits_2_naming_it(tmp_path):
    done, requests = primsel_run(tmp_path, None)
    assert done.returncode == 2, done.stderr
    assert "PRIMSEL_ASPERA_SRC" in done.stderr
    assert "ml-aspera" in done.stderr or "checkout" in done.stderr
    assert "Traceback" not in done.stderr
    assert requests == 0


def test_a_folder_that_does_not_exist_exits_2_naming_it(tmp_path):
    missing = tmp_path / "no_such_checkout"
    done, requests = primsel_run(tmp_path, str(missing))
    assert done.returncode == 2, done.stderr
    assert "PRIMSEL_ASPERA_SRC" in done.stderr and str(missing) in done.stderr
    assert "Traceback" not in done.stderr
    assert requests == 0


def test_a_folder_that_is_not_a_checkout_exits_2_naming_what_is_missing(tmp_path):
    folder = tmp_path / "some_project"
    (folder / "src" / "other").mkdir(parents=True)
    done, requests = primsel_run(tmp_path, str(folder))
    assert done.returncode == 2, done.stderr
    assert "PRIMSEL_ASPERA_SRC" in done.stderr and str(folder) in done.stderr
    assert "src/aspera" in done.stderr
    assert "Traceback" not in done.stderr
    assert requests == 0


def test_a_checkout_without_a_file_the_agents_read_exits_2_naming_the_file(tmp_path, aspera_src):
    """A copy of the checkout without ASPERA's system-turn templates (the CCK agent's system message)."""
    copy = tmp_path / "ml-aspera"
    shutil.copytree(aspera_src / "src" / "aspera", copy / "src" / "aspera",
                    ignore=shutil.ignore_patterns("system_turn_templates.py", "__pycache__"))
    done, requests = primsel_run(tmp_path, str(copy))
    assert done.returncode == 2, done.stderr
    assert "PRIMSEL_ASPERA_SRC" in done.stderr and str(copy) in done.stderr
    assert "system_turn_templates.py" in done.stderr
    assert "Traceback" not in done.stderr
    assert requests == 0



def test_aspera_src_in_the_experiment_that_is_not_a_checkout_exits_2_naming_the_key(tmp_path, aspera_src):
    """The experiment's ``aspera_src`` names the checkout in place of the variable (set here to a good one)."""
    folder = tmp_path / "not_aspera"
    folder.mkdir()
    with FakeOpenAIServer() as server:
        toml = tmp_path / "aspera_cck.toml"
        toml.write_text(f'aspera_src = "{folder}"\n' + EXPERIMENT.format(base_url=server.base_url), encoding="utf-8")
        environment = {k: v for k, v in os.environ.items() if k != "PRIMSEL_ASPER_BENCH"}
        environment.update(PYTHONPATH=str(REPO), PRIMSEL_ASPERA_SRC=str(aspera_src))
        done = subprocess.run([sys.executable, "-m", "primsel", "run", "--quiet", "--out", str(tmp_path / "runs"),
                               str(toml)], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
        requests = server.request_count
    assert done.returncode == 2, done.stderr
    assert "aspera_src" in done.stderr and str(folder) in done.stderr
    assert "Traceback" not in done.stderr
    assert requests == 0
