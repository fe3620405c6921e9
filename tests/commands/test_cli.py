"""The ``primsel`` entry point itself: version, verbosity, interrupts, modules in the current directory."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import primsel
from primsel.cli import main

PLUGIN = '''
from primsel.retrieval import BaseRetriever


class FirstWord(BaseRetriever):
    """Scores 1 for the primitives whose name starts with the query's first word."""

    def __init__(self):
        pass

    def score(self, queries):
        return {q: {p: float(p.split(".")[1].startswith(t.split()[0].lower())) for p in self.ids}
                for q, t in queries.items()}
'''


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"primsel {primsel.__version__}\n"


def test_python_dash_m_primsel_is_the_same_command():
    done = subprocess.run([sys.executable, "-m", "primsel", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"primsel {primsel.__version__}\n"


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: primsel" in capsys.readouterr().err


def test_module_class_specs_resolve_from_the_current_directory(tmp_path, monkeypatch, capsys):
    (tmp_path / "cwd_plugin_for_entry_test.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    assert main(["retrieve", "--retriever", "cwd_plugin_for_entry_test:FirstWord", "--k", "5"]) == 0
    assert "recall@5" in capsys.readouterr().out
    assert sys.path[0] == str(tmp_path)


@pytest.mark.slow
def test_installed_command_finds_modules_in_the_current_directory(tmp_path):
    script = Path(sys.executable).parent / "primsel"
    if not script.is_file():
        pytest.skip("the primsel console script is not installed beside this interpreter")
    (tmp_path / "cwd_plugin_for_script_test.py").write_text(textwrap.dedent(PLUGIN))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PRIMSEL_ASPER_BENCH")}
    done = subprocess.run([str(script), "retrieve", "--retriever", "cwd_plugin_for_script_test:FirstWord"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "recall@15" in done.stdout


def test_interrupt_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("primsel.commands.retrieve.main", interrupted)
    assert main(["retrieve"]) == 130
    err = capsys.readouterr().err
    assert err == "primsel retrieve: interrupted\n"


def test_log_messages_are_warning_and_up_unless_verbose(monkeypatch, capsys):
    def chatty(args):
        logging.getLogger("primsel.some.module").info("loading something")
        logging.getLogger("primsel.some.module").debug("details")
        logging.getLogger("primsel.some.module").warning("careful")
        return 0

    monkeypatch.setattr("primsel.commands.retrieve.main", chatty)
    level = logging.getLogger("primsel").level
    assert main(["retrieve"]) == 0
    assert capsys.readouterr().err == "careful\n"
    assert main(["-v", "retrieve"]) == 0
    assert capsys.readouterr().err == "loading something\ncareful\n"
    assert main(["retrieve", "-vv"]) == 0
    assert capsys.readouterr().err == "loading something\ndetails\ncareful\n"
    assert logging.getLogger("primsel").level == level  # restored after each command
    assert not [h for h in logging.getLogger("primsel").handlers if type(h).__name__ == "_StderrHandler"]


def test_one_subcommand_builds_only_its_own_options(tmp_path):
    # verify needs neither the retrievers (numpy) nor the local model's module to parse its
    # options, nor the prompt-facing library to run: a bad --programs file ends it at once
    code = ("import sys; from primsel.cli import main; status = main(['verify', '--programs', sys.argv[1]]); "
            "print(status, sorted(m for m in ('numpy', 'primsel.retrieval', 'primsel.llm.local', "
            "'primsel.simulator.library') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "missing.jsonl")],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout == "2 []\n", done.stderr
    assert "missing.jsonl" in done.stderr


def test_help_without_a_subcommand_lists_every_one(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in ("verify", "retrieve", "local", "explore"))


def test_a_subcommand_keeps_its_own_options(capsys):
    with pytest.raises(SystemExit):
        main(["-v", "retrieve", "--help"])
    assert "--retriever" in capsys.readouterr().out


def test_building_the_parser_imports_no_heavy_package():
    code = ("import sys; from primsel.cli import build_parser; build_parser().format_help(); "
            "print(sorted(m for m in ('torch', 'faiss', 'sentence_transformers', 'transformers', 'openai') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
