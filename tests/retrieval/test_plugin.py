"""A retriever defined outside primsel plugs in by "module:Class" (the example of docs/user-guide.md)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from primsel.cli import main
from primsel.registry import build
from primsel.retrieval.cv import cross_validated_run

PLUGIN = '''
from primsel import register
from primsel.retrieval import BaseRetriever


@register("readme_keyword_example")
class KeywordRetriever(BaseRetriever):
    """Scores a primitive by the number of query words among its name's parts."""

    def __init__(self, view: str = "name"):
        self.view = view  # JSON-serialisable parameters only

    def fit(self, library, train_tasks=()):
        super().fit(library, train_tasks)  # keeps library and ids
        self._words = {p: set(library[p].text(self.view).lower().split("_")) for p in self.ids}
        return self

    def score(self, queries):
        return {q: {p: len(words & set(text.lower().split())) for p, words in self._words.items()}
                for q, text in queries.items()}
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "my_retrievers_example.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_retrievers_example", raising=False)  # imported (and registered) afresh
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    return "my_retrievers_example:KeywordRetriever"


def test_plugin_ranks_by_name_words(plugin, small_library, small_tasks):
    run, _ = cross_validated_run(plugin, small_library, small_tasks, k=2)
    assert list(run["3"]) == ["calendar.Event", "calendar.add_event"]  # no word matches: ids order
    assert list(build(plugin).fit(small_library).search({"q": "book room now"}, 1)["q"]) == ["rooms.book_room"]


def test_plugin_runs_from_the_command_line(plugin, capsys):
    assert main(["retrieve", "--retriever", plugin, "--k", "10"]) == 0
    assert "recall@10" in capsys.readouterr().out
    assert build("readme_keyword_example").view == "name"  # registered once its module is imported
