"""Finding ASPERA's checkout: the variable, the experiment key, and what a wrong folder is told."""

from __future__ import annotations

import shutil

import pytest

from primsel.aspera.source import ENV_VAR, REQUIRED, AsperaSourceError, locate, source_digest


def test_without_a_checkout_the_error_names_the_variable(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(AsperaSourceError, match=r"set PRIMSEL_ASPERA_SRC \(or aspera_src"):
        locate()


def test_a_missing_folder_is_named_with_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(AsperaSourceError, match=r"^\$PRIMSEL_ASPERA_SRC = .*nowhere: no such folder"):
        locate()


def test_a_folder_that_is_not_a_checkout_says_what_is_missing(tmp_path):
    with pytest.raises(AsperaSourceError, match=r"^aspera_src = .*: not a checkout of apple/ml-aspera: no src/aspera"):
        locate(tmp_path)


def test_a_checkout_missing_one_file_names_that_file(aspera_src, tmp_path):
    copy = tmp_path / "ml-aspera"
    shutil.copytree(aspera_src / "src", copy / "src")
    assert locate(copy) == copy.resolve()
    (copy / "src" / "aspera" / "prompting" / "user_turn_templates.py").unlink()
    with pytest.raises(AsperaSourceError, match="src/aspera/prompting/user_turn_templates.py not found"):
        locate(copy)


def test_every_required_file_is_in_the_checkout_and_the_digest_follows_the_content(aspera_src, tmp_path):
    assert all((aspera_src / "src" / "aspera" / r).is_file() for r in REQUIRED)
    copy = tmp_path / "ml-aspera"
    shutil.copytree(aspera_src / "src", copy / "src")
    assert source_digest(copy) == source_digest(aspera_src)
    examples = copy / "src" / "aspera" / "examples" / "work_calendar_query_solution.py"
    examples.write_text(examples.read_text() + "\n# changed\n")
    assert source_digest(copy) != source_digest(aspera_src)
