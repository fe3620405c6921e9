"""The open registry: names, "module:Class" paths, tables, and what is not a component."""

from __future__ import annotations

import pytest

from primsel.registry import UnknownComponentError, build, register, resolve
from primsel.retrieval.bm25 import BM25Retriever


def test_names_paths_and_tables_build_the_same_class():
    assert resolve("bm25") is BM25Retriever
    assert resolve("primsel.retrieval.bm25:BM25Retriever") is BM25Retriever
    assert build({"type": "bm25", "k1": 2.0}).k1 == 2.0


def test_a_path_to_a_function_is_not_a_component():
    with pytest.raises(UnknownComponentError, match="retriever 'os:system' is not a class"):
        resolve("os:system")


def test_a_class_without_fit_and_search_is_not_a_retriever():
    with pytest.raises(UnknownComponentError, match="'json:JSONDecoder' .* is not a retriever: it lacks fit and search"):
        resolve("json:JSONDecoder")
    with pytest.raises(UnknownComponentError, match="is not a generator: it lacks generate"):
        resolve("primsel.retrieval.bm25:BM25Retriever", "generator")


@pytest.mark.parametrize("name", ["no_such_module_xyz:Thing", "json:NoSuchClass", ":BM25Retriever", "json:"])
def test_unimportable_paths_are_unknown_components(name):
    with pytest.raises(UnknownComponentError, match="cannot import retriever"):
        resolve(name)


def test_a_parameter_the_class_does_not_take_lists_those_it_takes():
    with pytest.raises(TypeError, match=r"retriever 'bm25': .*'bogus'.*\(it takes: view, k1, b, stopwords, backend\)"):
        build({"type": "bm25", "bogus": 1})


def test_a_rejected_value_is_prefixed_with_the_component():
    with pytest.raises(ValueError, match="retriever 'bm25': k1 must be a number, got 'abc'"):
        build({"type": "bm25", "k1": "abc"})


def test_register_decorates_classes_only():
    with pytest.raises(TypeError, match="decorates a class"):
        register("test_not_a_class")(lambda: None)


@pytest.mark.parametrize("name, near", [("bm52", "'bm25'"), ("Dense", "'dense'"), ("hybird", "'hybrid'"),
                                        ("clasifier", "'classifier'")])
def test_a_wrong_name_suggests_the_nearest_registered_names(name, near):
    from primsel.registry import UnknownComponentError, resolve

    with pytest.raises(UnknownComponentError, match=rf"unknown retriever '{name}'; did you mean {near}"):
        resolve(name)


def test_a_name_near_nothing_gets_no_suggestion():
    from primsel.registry import UnknownComponentError, resolve

    with pytest.raises(UnknownComponentError) as exc:
        resolve("zzzzzz")
    assert "did you mean" not in str(exc.value) and "known: " in str(exc.value)


def test_a_wrong_parameter_suggests_the_nearest_one(capsys, monkeypatch):
    from primsel.cli import main
    from primsel.spec import SpecError, check

    with pytest.raises(SpecError, match=r"unknown retriever parameter for 'bm25'; did you mean 'k1'\?"):
        check({"type": "bm25", "k2": 1.2})
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    assert main(["retrieve", "--retriever", '{"type": "bm25", "k2": 1.2}']) == 2
    assert "got an unexpected keyword argument 'k2'; did you mean 'k1'? (it takes: view, k1, b" in capsys.readouterr().err


def test_a_wrong_name_on_the_command_line_or_in_a_config_names_the_nearest(tmp_path, capsys, monkeypatch):
    from primsel.cli import main

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    assert main(["retrieve", "--retriever", "bm52"]) == 2
    assert "--retriever: unknown retriever 'bm52'; did you mean 'bm25'?" in capsys.readouterr().err
    cfg = tmp_path / "bad.toml"
    cfg.write_text('name = "bad"\nretriever = "bm52"\n[generator]\ntype = "refrence"\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}: retriever: unknown retriever 'bm52'; did you mean 'bm25'?" in err
    assert not (tmp_path / "runs").exists()
    cfg.write_text('name = "bad"\nretriever = "bm25"\n[generator]\ntype = "refrence"\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs")]) == 2
    assert "unknown generator 'refrence'; did you mean 'reference'?" in capsys.readouterr().err
