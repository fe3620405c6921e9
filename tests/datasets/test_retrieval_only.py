"""Retrieval-only data: the BEIR layout (synthetic, written here), MetaTool and Gorilla APIBench
(read from ../shared/datasets beside the repository when present, else skipped), the rules for
repeated queries and ambiguous gold documents, and the refusal of commands that execute."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from primsel.cli import main
from primsel.datasets import DatasetError, is_retrieval_data, load_retrieval_data, resolve_dataset
from primsel.datasets.apibench import instruction, load_apibench
from primsel.datasets.beir import load_beir
from primsel.datasets.retrieval_only import clean_query, merge_queries
from primsel.types import DOCUMENT_KIND

SHARED = Path(os.environ.get("PRIMSEL_SHARED_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets"))


def shared(name: str) -> Path:
    """A dataset folder of ../shared/datasets; skips the test when it is absent."""
    path = SHARED / name
    if not path.is_dir():
        pytest.skip(f"{path} is absent: set PRIMSEL_SHARED_DATASETS to the folder holding metatool/ and "
                    "gorilla-apibench/ (default: ../shared/datasets beside the repository; docs/user-guide.md, Data)")
    return path


def write_beir(root: Path, corpus=None, queries=None, qrels=None) -> Path:
    corpus = corpus if corpus is not None else [
        {"_id": "d1", "title": "Weather", "text": "Forecast of rain and sun for a city."},
        {"_id": "d2", "title": "", "text": "Convert an amount between two currencies."},
        {"_id": 3, "title": "Stocks", "text": "Latest stock prices."},
    ]
    queries = queries if queries is not None else [
        {"_id": "q1", "text": "will it rain tomorrow"}, {"_id": "q2", "text": "euros to dollars"},
        {"_id": "q3", "text": "not judged"},
    ]
    qrels = qrels if qrels is not None else ["q1\td1\t1", "q2\td2\t2", "q2\t3\t0"]
    root.mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n", encoding="utf-8")
    return root


# ---------------------------------------------------------------------------------------------
# BEIR
# ---------------------------------------------------------------------------------------------
def test_beir_documents_queries_and_gold(tmp_path):
    data = load_beir(write_beir(tmp_path / "toy"))
    assert data.name == "beir-toy"
    assert [d.id for d in data.documents] == ["d1", "d2", "3"]
    assert {d.kind for d in data.documents} == {DOCUMENT_KIND}
    assert data.documents[0].text("full") == "Weather\nForecast of rain and sun for a city."
    assert data.documents[1].signature == "d2"  # an empty title gives the id
    assert [(t.id, t.query, sorted(t.gold)) for t in data.tasks] == [
        ("q1", "will it rain tomorrow", ["d1"]), ("q2", "euros to dollars", ["d2"])]  # score 0 is not gold
    assert not any(t.executable for t in data.tasks)
    assert data.notes == ("queries.jsonl: 1 queries without a qrels row of score > 0 are not evaluated",)


@pytest.mark.parametrize(("change", "message"), [
    ({"corpus": [{"_id": "d1", "text": "a"}, {"_id": "d1", "text": "b"}]}, r"corpus.jsonl:2: document id 'd1' is used twice"),
    ({"corpus": [{"_id": "d1"}]}, r"corpus.jsonl:1: missing 'text'"),
    ({"qrels": ["q1\tnope\t1"]}, r"test.tsv:2: corpus id 'nope' is not in corpus.jsonl"),
    ({"qrels": ["q9\td1\t1"]}, r"test.tsv:2: query id 'q9' is not in queries.jsonl"),
    ({"qrels": ["q1\td1\thigh"]}, r"test.tsv:2: score 'high' is not a number"),
    ({"qrels": ["q1 d1 1"]}, r"test.tsv:2: expected 3 tab-separated fields"),
])
def test_beir_malformed_input_names_file_and_line(tmp_path, change, message):
    root = write_beir(tmp_path / "bad", **change)
    with pytest.raises(DatasetError, match=message):
        load_beir(root)


@pytest.mark.parametrize(("file", "change", "message"), [
    ("corpus.jsonl", {"corpus": [{"_id": "d1", "text": "a"}, {"_id": "d 2", "text": "b"}]}, "2: '_id' 'd 2'"),
    ("queries.jsonl", {"queries": [{"_id": "q\t1", "text": "rain"}], "qrels": ["q\t1\td1\t1"]}, "1: '_id' 'q\\t1'"),
])
def test_a_beir_id_holding_whitespace_is_refused_at_load_naming_file_and_line(tmp_path, capsys, file, change,
                                                                                message):
    """A TREC run file separates its fields by whitespace: such an id would fail after the ranking."""
    root = write_beir(tmp_path / "toy", **change)
    with pytest.raises(DatasetError) as info:
        load_beir(root)
    assert str(info.value) == (f"{root / file}:{message} holds whitespace; ids are fields of TREC run files, "
                               "which whitespace separates: rename it")
    out = tmp_path / "out.trec"
    assert main(["retrieve", "--retriever", "bm25", "--data", str(root), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{root / file}:{message} holds whitespace" in err and "Traceback" not in err
    assert not out.exists()


def test_beir_invalid_json_names_the_line(tmp_path):
    root = write_beir(tmp_path / "bad")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n{"_id": \n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"queries.jsonl:2: invalid JSON"):
        load_beir(root)


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------
def test_repeated_queries_are_kept_once_and_contradictory_ones_dropped():
    rows = [("1", ' "Book a table" ', frozenset({"a"})), ("2", "Book a table", frozenset({"a"})),
            ("3", "weather?", frozenset({"b"})), ("4", "weather?", frozenset({"c"})), ("5", "news", frozenset({"d"}))]
    kept, notes = merge_queries(rows, "f.csv")
    assert kept == [("1", "Book a table", frozenset({"a"})), ("5", "news", frozenset({"d"}))]
    assert notes == ["f.csv: 1 repeated queries with the same gold set kept once (their first row)",
                     "f.csv: 1 queries that appear with different gold sets dropped (contradictory labels)"]


def test_clean_query_strips_one_pair_of_quotes():
    assert clean_query('  "say ""hi"""  ') == 'say ""hi""'
    assert clean_query('"') == '"'


def test_instruction_is_the_text_between_the_markers():
    assert instruction("###Instruction: Find a model.\n###Output: {'x': 1}") == "Find a model."
    assert instruction("### Instruction: Spaced marker.\n### Output: y") == "Spaced marker."
    assert instruction("###Instruction: no output part") == "no output part"
    assert instruction("no marker") is None


def _apibench(root: Path, docs: list[dict], items: list[dict]) -> Path:
    (root / "api").mkdir(parents=True)
    (root / "apibench").mkdir()
    (root / "api" / "torchhub_api.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (root / "apibench" / "torchhub_eval.json").write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return root


def _doc(name: str, call: str, functionality: str = "f", description: str = "d") -> dict:
    return {"domain": "Vision", "api_name": name, "api_call": call, "functionality": functionality,
            "description": description}


def test_apibench_gold_rule_for_ambiguous_items(tmp_path):
    docs = [_doc("a", "load('a')"), _doc("b", "load('shared')", "one"), _doc("c", "load('shared')", "two"),
            _doc("a", "load('a')"),  # identical to line 1: the same document
            _doc("e", "load('e')", "three")]
    items = [
        {"code": "###Instruction: exact\n###Output: x", "api_data": docs[0]},
        {"code": "###Instruction: same call, narrowed by name\n###Output: x", "api_data": _doc("c", "load('shared')", "two", "other")},
        {"code": "###Instruction: same call, no name match\n###Output: x", "api_data": _doc("z", "load('shared')")},
        {"code": "###Instruction: call differs, name matches\n###Output: x", "api_data": _doc("e", "load('e', x=1)", "three")},
        {"code": "###Instruction: nothing matches\n###Output: x", "api_data": _doc("q", "load('q')")},
    ]
    data = load_apibench(_apibench(tmp_path / "g", docs, items), "torchhub")
    assert [d.id for d in data.documents] == ["torchhub/0001", "torchhub/0002", "torchhub/0003", "torchhub/0005"]
    assert data.documents[0].text("full") == "load('a')\na\nVision\nf\nd"
    assert {t.id: sorted(t.gold) for t in data.tasks} == {
        "1": ["torchhub/0001"], "2": ["torchhub/0003"], "3": ["torchhub/0002", "torchhub/0003"],
        "4": ["torchhub/0005"]}
    assert data.notes == (
        "torchhub_api.jsonl: 1 lines identical to an earlier line kept once",
        "torchhub_eval.json: 1 items match several documents of the same call; all are gold",
        "torchhub_eval.json: 1 items match no API document and are dropped")


def test_apibench_item_without_instruction_names_the_line(tmp_path):
    root = _apibench(tmp_path / "g", [_doc("a", "x()")], [{"code": "no marker", "api_data": _doc("a", "x()")}])
    with pytest.raises(DatasetError, match=r"torchhub_eval.json:1: 'code' has no '###Instruction:' text"):
        load_apibench(root, "torchhub")


# ---------------------------------------------------------------------------------------------
# The shared datasets as published
# ---------------------------------------------------------------------------------------------
def test_metatool_as_published():
    single, multi = load_retrieval_data(shared("metatool"))
    assert (single.name, len(single.documents), len(single.tasks)) == ("metatool-single", 199, 20532)
    assert (multi.name, len(multi.documents), len(multi.tasks)) == ("metatool-multi", 47, 497)
    # 20,614 rows: 70 repeat an earlier query (54 with the same tool, 16 rows of the 12
    # queries given two tools), and those 12 go: 20614 - 54 - 16 - 12 = 20532
    assert single.notes == (
        "all_clean_data.csv: 54 repeated queries with the same gold set kept once (their first row)",
        "all_clean_data.csv: 12 queries that appear with different gold sets dropped (contradictory labels)")
    assert {len(t.gold) for t in single.tasks} == {1} and {len(t.gold) for t in multi.tasks} == {2}
    assert not any(t.query.startswith('"') and t.query.endswith('"') for t in single.tasks)
    assert multi.tasks[0].gold == frozenset({"FinanceTool", "NewsTool"})


def test_a_subset_is_named_as_a_path_below_the_folder():
    (multi,) = load_retrieval_data(shared("metatool") / "multi")
    assert multi.name == "metatool-multi"
    assert is_retrieval_data(shared("gorilla-apibench") / "huggingface")
    assert not is_retrieval_data(shared("gorilla-apibench") / "nohub")


def test_apibench_as_published():
    hubs = load_retrieval_data(shared("gorilla-apibench"))
    assert [(d.name, len(d.documents), len(d.tasks)) for d in hubs] == [
        ("apibench-torchhub", 94, 186), ("apibench-tensorflowhub", 694, 688), ("apibench-huggingface", 936, 911)]
    torch, tf, hf = hubs
    assert torch.notes == () and hf.notes == ()
    assert tf.notes == ("tensorflowhub_api.jsonl: 2 lines identical to an earlier line kept once",)
    assert all(len(t.gold) == 1 for d in hubs for t in d.tasks)
    assert torch.tasks[0].query == "What is an API that can be used to classify sports activities in videos?"
    assert torch.tasks[0].gold == frozenset({"torchhub/0001"})


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------
def test_resolve_dataset_refuses_retrieval_only_data(tmp_path):
    root = write_beir(tmp_path / "toy")
    with pytest.raises(DatasetError, match="is retrieval-only data .* needs executable tasks"):
        resolve_dataset(root)


@pytest.mark.parametrize("command", [["verify"], ["tasks"]])
def test_commands_that_execute_refuse_retrieval_only_data(tmp_path, capsys, command):
    root = write_beir(tmp_path / "toy")
    assert main([*command, "--data", str(root)]) == 2
    assert "is retrieval-only data" in capsys.readouterr().err


def test_a_generator_on_retrieval_only_data_is_refused_before_anything_is_written(tmp_path, capsys):
    root = write_beir(tmp_path / "toy")
    cfg = tmp_path / "gen.toml"
    cfg.write_text(f'retriever = "bm25"\ndata = "{root}"\n[generator]\ntype = "reference"\n', encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    assert "beir-toy is retrieval-only data" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------------------------------
# Text that is not valid Unicode
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("file", ["queries.jsonl", "corpus.jsonl"])
def test_a_lone_surrogate_escape_is_refused_naming_file_and_line(tmp_path, file):
    root = write_beir(tmp_path / "toy")
    path = root / file
    lines = path.read_text(encoding="utf-8").splitlines()
    # json.dumps writes the lone surrogate as the escape \ud83d (half of an emoji's pair)
    row = json.loads(lines[1])
    row["text"] = "rain \ud83d tomorrow"
    lines[1] = json.dumps(row)
    assert "\\ud83d" in lines[1]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"{file}:2: the text .*'rain '.* holds a lone surrogate "
                                           r"\(escape \\ud83d"):
        load_beir(root)


def test_retrieve_on_a_lone_surrogate_exits_2_with_file_and_line(tmp_path, capsys):
    from primsel.cli import main

    root = write_beir(tmp_path / "toy", queries=[{"_id": "q1", "text": "rain \udc00"}, {"_id": "q2", "text": "euros"}])
    assert main(["retrieve", "--retriever", "bm25", "--data", str(root), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "queries.jsonl:1: the text 'rain '... holds a lone surrogate (escape \\udc00" in err
    assert "Traceback" not in err


def test_a_surrogate_pair_escape_is_valid_text(tmp_path):
    root = write_beir(tmp_path / "toy", queries=[{"_id": "q1", "text": "rain \U0001F327"}, {"_id": "q2", "text": "euros"}])
    assert "\\ud83c\\udf27" in (root / "queries.jsonl").read_text()
    assert load_beir(root).tasks[0].query == "rain \U0001F327"


def test_a_lone_surrogate_in_a_json_file_names_its_line(tmp_path):
    from primsel.datasets.retrieval_only import read_json

    path = tmp_path / "tools.json"
    path.write_text('{\n  "a": "fine",\n  "b": "bad \\udfff"\n}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"tools.json:3: the text 'bad '... holds a lone surrogate"):
        read_json(path)


def test_pydoc_texts_with_a_lone_surrogate_become_its_escape():
    from primsel.datasets.pydoc import _unicode

    assert _unicode("x \ud800 y") == "x \\ud800 y"
    assert _unicode("plain") == "plain" and _unicode(3) == 3


def test_missing_retrieval_data_is_not_called_an_archive(tmp_path, capsys):
    from primsel.cli import main

    cfg = tmp_path / "tools.toml"
    cfg.write_text('name = "tools"\nretriever = "bm25"\ndata = ["../nowhere/metatool/multi"]\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Asper-Bench archive not found" not in err
    assert f"data not found: {tmp_path / '../nowhere/metatool/multi'}" in err
    assert "the MetaTool or Gorilla APIBench folder or one of their subsets" in err
    assert 'docs/user-guide.md ("Data") says where to download MetaTool and APIBench' in err
