"""Experiment files: grid expansion, stable cell ids, and errors that name the key and the file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from primsel.experiments.config import ConfigError, cell_id, expand, generator_spec, load_config, parse_config
from primsel.experiments.settings import CellSettings
from primsel.files import canonical_json
from primsel.registry import register


class _TableGenerator:
    """A generator with two parameters, so dotted grid keys have something to reach."""

    def __init__(self, model: str = "m0", temperature: float = 0.0) -> None:
        self.model = model
        self.temperature = temperature

    def generate(self, task, docs):  # pragma: no cover - never run here
        raise NotImplementedError


@pytest.fixture(autouse=True)
def _table_generator(scoped_registry):
    register("test_cfg_generator", kind="generator")(_TableGenerator)


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_grid_is_the_cartesian_product_in_file_order(tmp_path):
    cfg = load_config(write(tmp_path, """
retriever = "bm25"
[grid]
retriever = ["bm25", {type = "hybrid", members = ["bm25", "tfidf"]}]
k = [5, 10, 15, 20]
closure = [false, true]
"""))
    cells = expand(cfg, dataset="d")
    assert len(cells) == 2 * 4 * 2
    assert [c.label for c in cells[:3]] == ["bm25 k=5", "bm25 k=5 +closure", "bm25 k=10"]
    assert cells[-1].label == "hybrid(bm25+tfidf) k=20 +closure"
    assert cfg.name == "exp"
    assert {c.settings.folds for c in cells} == {5} and {c.settings.seed for c in cells} == {0}


def test_cell_id_is_sha256_of_canonical_json():
    settings = {"retriever": "bm25", "k": 10, "closure": False, "folds": 5, "seed": 0, "generator": None,
                "dataset": "d"}
    text = '{"closure":false,"dataset":"d","folds":5,"generator":null,"k":10,"retriever":"bm25","seed":0}'
    assert canonical_json(settings) == text
    assert cell_id(settings) == hashlib.sha256(text.encode()).hexdigest()[:12]


def test_cell_ids_are_stable_across_spellings_and_key_order():
    a = parse_config({"retriever": "bm25", "k": 10, "grid": {"closure": [True]}})
    b = parse_config({"grid": {"closure": [True]}, "k": 10, "retriever": {"type": "bm25"}})
    assert [c.id for c in expand(a, "d")] == [c.id for c in expand(b, "d")]


def test_cell_ids_change_with_settings_and_dataset():
    cfg = parse_config({"retriever": "bm25", "grid": {"k": [5, 10]}})
    ids = {c.id for c in expand(cfg, "d1")} | {c.id for c in expand(cfg, "d2")}
    assert len(ids) == 4


def test_duplicate_cells_are_kept_once():
    cfg = parse_config({"retriever": "bm25", "grid": {"retriever": ["bm25", {"type": "bm25"}], "k": [5]}})
    assert len(expand(cfg, "d")) == 1


def test_dotted_grid_keys_reach_into_the_generator_table():
    cfg = parse_config({"retriever": "bm25", "generator": {"type": "test_cfg_generator"},
                        "grid": {"generator.model": ["a", "b"], "k": [5]}})
    cells = expand(cfg, "d")
    assert [c.settings.generator for c in cells] == [
        {"type": "test_cfg_generator", "model": "a"}, {"type": "test_cfg_generator", "model": "b"}]
    assert cells[0].label == "bm25 k=5 test_cfg_generator:a"
    # with a generator the sandbox timeout is part of the settings
    assert cells[0].settings.timeout == 10.0


def test_toml_dotted_table_form_equals_quoted_key(tmp_path):
    quoted = load_config(write(tmp_path, """
retriever = "bm25"
[generator]
type = "test_cfg_generator"
[grid]
"generator.model" = ["a", "b"]
""", "q.toml"))
    nested = load_config(write(tmp_path, """
retriever = "bm25"
[generator]
type = "test_cfg_generator"
[grid.generator]
model = ["a", "b"]
""", "n.toml"))
    assert [c.id for c in expand(quoted, "d")] == [c.id for c in expand(nested, "d")]


def test_several_grids_give_the_union_of_their_cells(tmp_path):
    cfg = load_config(write(tmp_path, """
[[grid]]
retriever = ["bm25", "tfidf"]
k = [5, 10]
[[grid]]
retriever = ["all"]
k = [65]
"""))
    assert [c.label for c in expand(cfg, "d")] == [
        "bm25 k=5", "bm25 k=10", "tfidf k=5", "tfidf k=10", "all k=65"]


def test_data_path_is_relative_to_the_file(tmp_path):
    cfg = load_config(write(tmp_path, 'retriever = "bm25"\ndata = "archive.tgz"\n'))
    assert cfg.data == tmp_path / "archive.tgz"


@pytest.mark.parametrize("text,key,words", [
    ('retriever = "bm25"\nfoo = 1\n', "foo", "unknown key"),
    ('retriever = "bm25"\n[grid]\nkk = [1]\n', "grid.kk", "unknown grid key"),
    ('retriever = "bm25"\n[grid]\nk = []\n', "grid.k", "empty list"),
    ('retriever = "bm99"\n', "retriever", "unknown retriever 'bm99'"),
    ('[grid]\nretriever = ["bm25", "nope"]\n', "grid.retriever[1]", "unknown retriever 'nope'"),
    ('retriever = {type = "bm25", zzz = 1}\n', "retriever.zzz", "unknown retriever parameter"),
    ('retriever = {type = "hybrid", members = ["bm25", "nope"]}\n', "retriever.members[1]", "unknown retriever"),
    ('retriever = "bm25"\nk = "5"\n', "k", "must be an integer, got '5'"),
    ('retriever = "bm25"\nk = 0\n', "k", ">= 1"),
    ('retriever = "bm25"\nfolds = 1\n', "folds", "must be an integer >= 2, got 1"),
    # the sandbox's cap on a task's time (one day), checked before anything runs
    ('retriever = "bm25"\ntimeout = 100000.0\n', "timeout", "must be a number <= 86400, got 100000.0"),
    ('retriever = "bm25"\ntimeout = nan\n', "timeout", "must be a finite number, got nan"),
    ('retriever = "bm25"\n[grid]\ntimeout = [5, 0]\n', "grid.timeout[1]", "must be a number > 0, got 0"),
    ('retriever = "bm25"\ntimeout = inf\n', "timeout", "must be a finite number, got inf"),
    # the seed is scikit-learn's random_state: numpy takes [0, 2**32 - 1]
    ('retriever = "bm25"\nseed = 4294967296\n', "seed", "must be an integer <= 4294967295, got 4294967296"),
    ('retriever = "bm25"\n[grid]\nseed = [0, 4294967296]\n', "grid.seed[1]",
     "must be an integer <= 4294967295, got 4294967296"),
    # sampling parameters sent with every request
    ('retriever = "bm25"\n[generator]\ntype = "openai"\nmodel = "m"\ntemperature = inf\n', "generator",
     "temperature must be a finite number, got inf"),
    ('retriever = "bm25"\n[generator]\ntype = "openai"\nmodel = "m"\nseed = 18446744073709551616\n', "generator",
     "seed must be an integer <= 9223372036854775807, got 18446744073709551616"),
    ('retriever = "bm25"\n[generator]\ntype = "openai"\nmodel = "m"\nmax_tokens = 0\n', "generator",
     "max_tokens must be an integer >= 1, got 0"),
    ('retriever = "bm25"\nclosure = 1\n', "closure", "must be true or false"),
    ('retriever = "bm25"\n[grid]\nk = 5\n', "grid.k", "expected an array"),
    ('retriever = "bm25"\n[grid]\nclosure = [true, "no"]\n', "grid.closure[1]", "must be true or false"),
    ('retriever = "bm25"\n[grid]\n"generator.model" = ["a"]\n', "grid.generator.model", "no 'generator' setting"),
    ('retriever = "bm25"\n[generator]\ntype = "test_cfg_generator"\nmodle = "x"\n', "generator.modle",
     "unknown generator parameter"),
    ('retriever = "bm25"\n[generator]\ntype = "nogen"\n', "generator", "unknown generator 'nogen'"),
    ('retriever = "bm25"\nbaseline = "dense"\n', "baseline", "baseline 'dense' is neither a retriever label"),
    ('k = 5\n', "retriever", "no retriever"),
    ('retriever = "bm25"\nname = "a/b"\n', "name", "without path separators"),
    ('retriever = "bm25"\nthreshold = "0.5"\n', "threshold", "must be a number"),
    ('retriever = "bm25"\n[grid]\nthreshold = [0.5, true]\n', "grid.threshold[1]", "must be a number"),
    ('retriever = "bm25"\n[generator]\ntype = "replay"\nprograms = "absent.jsonl"\n', "generator.programs",
     "no such file"),
    ('retriever = "bm25"\nmetrics = ["bogus@5"]\n', "metrics", "unknown metric 'bogus@5'"),
    ('retriever = "bm25"\n[grid]\nmetrics = [["recall@5"], ["ndcg"]]\n', "grid.metrics[1]", "needs a cut-off"),
    ('retriever = "bm25"\n[grid]\n"retriever.k1" = [1.5, "a"]\n', "grid.retriever.k1",
     "retriever 'bm25' expects float, got string 'a'"),
    ('[[grid]]\nretriever = ["tfidf"]\n[[grid]]\nretriever = ["bm25"]\n"retriever.stopwords" = ["no"]\n',
     "grid[1].retriever.stopwords", "expects bool, got string 'no'"),
    ('retriever = {type = "bm25", b = true}\n', "retriever.b", "expects float, got boolean True"),
    ('retriever = {type = "hybrid", members = [{type = "bm25", k1 = "x"}]}\n', "retriever.members[0].k1",
     "expects float"),
    ('retriever = {type = "hybrid", weights = ["a", 1]}\n', "retriever.weights", "expects"),
    ('retriever = "bm25"\n[generator]\ntype = "test_cfg_generator"\ntemperature = "hot"\n',
     "generator.temperature", "expects float, got string 'hot'"),
    ('retriever = "bm25"\npair_on = "generator.seed"\n', "pair_on", "expected an array of setting keys"),
    ('retriever = "bm25"\npair_on = ["retriever"]\n', "pair_on", "not a setting a cell shares"),
    ('retriever = "bm25"\npair_on = ["colour"]\n', "pair_on", "not a setting a cell shares"),
    ('baseline = "bm25"\npair_on = []\n[grid]\nretriever = ["bm25", "tfidf"]\nk = [1, 2]\n', "pair_on",
     "matches 2 baseline cells"),
    ('baseline = "hybrid"\n[grid]\nretriever = [{type = "hybrid", method = "rrf"}, {type = "hybrid", method = "wsum"}]\n',
     "baseline", "names several retrievers"),
    ('retriever = "bm25"\nselector = {type = "calibrated", target = 0.9}\n', "selector.target",
     "unknown selector parameter for 'calibrated'"),
    ('retriever = "bm25"\n[grid]\nselector = ["topk", "best"]\n', "grid.selector[1]", "unknown selector 'best'"),
    ('retriever = "bm25"\nselector = {type = "calibrated"}\n[grid]\n"selector.target_recall" = [0.9, 2.0]\n',
     "grid.selector", "target_recall must be a number <= 1"),
])
def test_bad_input_names_the_file_and_the_key(tmp_path, text, key, words):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key}: "), message
    assert words in message


def test_toml_syntax_error_names_the_file(tmp_path):
    path = write(tmp_path, "retriever = \n")
    with pytest.raises(ConfigError, match="invalid TOML") as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")


def test_settings_are_json_serialisable_and_rebuild_the_same_cell():
    cfg = parse_config({"retriever": {"type": "hybrid", "members": ["bm25", "tfidf"]}, "metrics": ["precision@5"],
                        "generator": {"type": "test_cfg_generator"}, "threshold": 0.5})
    (cell,) = expand(cfg, "d")
    data = json.loads(json.dumps(cell.settings.to_json()))   # what config.json holds
    assert data["metrics"] == ["precision@5"] and data["timeout"] == 10.0
    rebuilt = CellSettings.from_mapping(data)
    assert rebuilt == cell.settings and cell_id(rebuilt) == cell.id


def test_threshold_top_level_and_in_grids(tmp_path):
    cfg = load_config(write(tmp_path, """
retriever = "bm25"
threshold = 1
[[grid]]
k = [5]
[[grid]]
k = [65]
threshold = [0.5]
"""))
    cells = expand(cfg, "d")
    assert [c.settings.threshold for c in cells] == [1.0, 0.5]
    assert [c.label for c in cells] == ["bm25 k=5 threshold=1", "bm25 k=65 threshold=0.5"]


def test_cells_without_threshold_keep_their_ids():
    (cell,) = expand(parse_config({"retriever": "bm25"}), "d")
    assert "threshold" not in cell.settings.to_json()
    assert cell.id == cell_id({"retriever": "bm25", "k": 10, "closure": False, "folds": 5, "seed": 0,
                               "generator": None, "dataset": "d"})


def test_labels_show_every_varied_generator_parameter():
    dotted = parse_config({"retriever": "bm25", "generator": {"type": "test_cfg_generator", "model": "a"},
                           "grid": {"generator.temperature": [0.0, 0.5]}})
    assert [c.label for c in expand(dotted, "d")] == [
        "bm25 k=10 test_cfg_generator:a generator.temperature=0",
        "bm25 k=10 test_cfg_generator:a generator.temperature=0.5"]
    tables = parse_config({"retriever": "bm25", "grid": {"generator": [
        {"type": "test_cfg_generator", "model": "a", "temperature": 0.0},
        {"type": "test_cfg_generator", "model": "a", "temperature": 1.0},
        {"type": "test_cfg_generator", "model": "b", "temperature": 1.0}]}})
    assert [c.label for c in expand(tables, "d")] == [
        "bm25 k=10 test_cfg_generator:a generator.temperature=0",
        "bm25 k=10 test_cfg_generator:a generator.temperature=1",
        "bm25 k=10 test_cfg_generator:b generator.temperature=1"]


def test_replay_programs_path_is_kept_as_written_and_checked_next_to_the_file(tmp_path, monkeypatch):
    (tmp_path / "progs.jsonl").write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(write(tmp_path, 'retriever = "bm25"\n[generator]\ntype = "replay"\nprograms = "progs.jsonl"\n'))
    (cell,) = expand(cfg, "d")
    # the settings (so the cell id) hold the path as written; the runner joins it to the file's directory
    assert cell.settings.generator == {"type": "replay", "programs": "progs.jsonl"}
    assert cfg.base_dir == tmp_path
    assert generator_spec(cell.settings.generator, cfg.base_dir)["programs"] == str(tmp_path / "progs.jsonl")


def test_values_of_the_annotated_type_are_accepted():
    cfg = parse_config({"retriever": {"type": "hybrid", "members": ["bm25", {"type": "bm25", "k1": 2}],
                                      "weights": [1, 0.5], "method": "wsum"},
                        "generator": {"type": "test_cfg_generator", "temperature": 1},
                        "grid": {"retriever.rrf_k": [60, 10]}, "metrics": ["precision@5", "mrr"]})
    assert len(expand(cfg, "d")) == 2


def test_baseline_may_name_a_retriever_type_and_pair_on_selects_the_partner():
    cfg = parse_config({
        "baseline": "llm_selector", "pair_on": ["generator.seed", "generator.seed"],
        "generator": {"type": "openai", "model": "m"},
        "grid": [{"retriever": [{"type": "llm_selector", "model": "m"}], "k": [65], "threshold": [0.5],
                  "generator.seed": [0, 1]},
                 {"retriever": ["bm25"], "k": [15], "generator.seed": [0, 1]}],
    })
    assert cfg.baseline == "llm_selector" and cfg.pair_on == ("generator.seed",)
    assert len(expand(cfg, "d")) == 4


def test_selector_top_level_in_grids_and_dotted(tmp_path):
    cfg = load_config(write(tmp_path, """
retriever = "bm25"
k = 65
selector = {type = "calibrated"}
[grid]
"selector.target_recall" = [0.9, 0.95]
"""))
    cells = expand(cfg, "d")
    assert [c.settings.selector for c in cells] == [{"type": "calibrated", "target_recall": 0.9},
                                                    {"type": "calibrated", "target_recall": 0.95}]
    assert [c.label for c in cells] == ["bm25 k=65 selector.target_recall=0.9",
                                        "bm25 k=65 selector.target_recall=0.95"]
    whole = expand(parse_config({"retriever": "bm25", "grid": {"selector": ["topk", {"type": "calibrated"}]}}), "d")
    assert [c.label for c in whole] == ["bm25 k=10 selector=topk", "bm25 k=10 selector=calibrated"]
    (plain,) = expand(parse_config({"retriever": "bm25", "selector": {"type": "topk"}}), "d")
    assert plain.settings.selector == "topk"  # canonical form
    assert "selector" not in expand(parse_config({"retriever": "bm25"}), "d")[0].settings.to_json()


def test_a_reflection_table_equals_the_reflection_keys_in_the_generator_table(tmp_path):
    old = parse_config({"retriever": "bm25", "generator": {"type": "openai", "model": "m", "rounds": 2},
                        "grid": {"generator.feedback": ["verdict", "trace"]}})
    new = parse_config({"retriever": "bm25", "generator": {"type": "openai", "model": "m"},
                        "reflection": {"rounds": 2}, "grid": {"reflection.feedback": ["verdict", "trace"]}})
    old_cells, new_cells = expand(old, "d"), expand(new, "d")
    assert [c.id for c in old_cells] == [c.id for c in new_cells]
    assert [c.settings.reflection.feedback for c in new_cells] == ["verdict", "trace"]
    assert [c.label for c in new_cells] == ["bm25 k=10 openai:m reflection.feedback=verdict",
                                            "bm25 k=10 openai:m reflection.feedback=trace"]
    assert {c.settings.reflection.rounds for c in new_cells} == {2}
    path = write(tmp_path, 'retriever = "bm25"\n[generator]\ntype = "reference"\n[grid]\n"reflection.rounds" = [1, 2]\n')
    with pytest.raises(ConfigError, match=r": grid\.reflection\.rounds: generator 'reference' cannot revise"):
        load_config(path)


def test_the_grid_is_expanded_and_checked_once(monkeypatch):
    from primsel.experiments import settings as settings_module

    built = []
    real = settings_module.CellSettings.__post_init__
    monkeypatch.setattr(settings_module.CellSettings, "__post_init__", lambda self: (built.append(1), real(self)))
    cfg = parse_config({"retriever": "bm25", "grid": {"k": [1, 2, 3], "closure": [False, True]}})
    assert len(built) == 6
    cells = expand(cfg, "d1") + expand(cfg, "d2")
    assert len(built) == 6 and len({c.id for c in cells}) == 12
    assert [c.settings.k for c in cells[:6]] == [1, 1, 2, 2, 3, 3]
