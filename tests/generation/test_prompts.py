"""Prompt rendering, templates and the choice of few-shot examples."""

from __future__ import annotations

import random

import pytest

from primsel.generation.prompts import (
    cck_messages,
    choose_examples,
    expected_function,
    generation_messages,
    render_primitives,
)
from primsel.llm.templates import PromptTemplate, load_template, packaged_templates
from primsel.retrieval.llm_selector import selection_messages

from .conftest import make_task


def test_packaged_templates_are_listed():
    assert packaged_templates() == ["cck", "ps", "reflect", "select"]


def test_ps_prompt_has_guidelines_stubs_query_and_signature(toy_library, toy_tasks):
    task = toy_tasks[1]
    docs = [toy_library["work_calendar.find_events"], toy_library["work_calendar.Event"]]
    messages = generation_messages(task, docs)
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "- Be brief." in system
    assert toy_library["work_calendar.find_events"].text("full") in system
    assert toy_library["work_calendar.Event"].text("full") in system
    assert "add_event" not in system  # not selected, not shown
    assert "How many meetings do I have today?" in user
    assert "def count_meetings() -> int" in user


def test_return_annotation_defaults_to_none(toy_tasks):
    assert expected_function(toy_tasks[0]) == ("book_lunch", "None")
    assert expected_function(toy_tasks[1]) == ("count_meetings", "int")
    nameless = make_task("9", "q", "")
    assert expected_function(nameless) == ("fulfil_request", "None")


def test_stubs_are_grouped_by_module_in_the_given_order(toy_library):
    docs = [toy_library["work_calendar.add_event"], toy_library["time_utils.now_"], toy_library["work_calendar.Event"]]
    text, modules = render_primitives(docs, module_order=("time_utils", "work_calendar"))
    assert modules == ["time_utils", "work_calendar"]
    assert text.index("Module `time_utils`") < text.index("Module `work_calendar`")
    assert text.index("def add_event") < text.index("class Event")  # order within a module kept


def test_empty_selection_renders_none(toy_tasks):
    system = generation_messages(toy_tasks[0], [])[0]["content"]
    assert "(none)" in system


def test_cck_prompt_shows_every_primitive(toy_library, toy_tasks):
    system = cck_messages(toy_tasks[0], toy_library)[0]["content"]
    for primitive in toy_library.values():
        assert primitive.text("full") in system
    assert "complete documentation" in system


def test_examples_show_query_and_program(toy_library, toy_tasks):
    task, example = toy_tasks[2], toy_tasks[0]
    system = generation_messages(task, [], examples=[example])[0]["content"]
    assert "Book lunch with Ana tomorrow" in system
    assert example.program.strip() in system


def test_a_task_is_never_its_own_example(toy_tasks):
    with pytest.raises(ValueError, match="own example"):
        generation_messages(toy_tasks[0], [], examples=[toy_tasks[0]])


def test_no_examples_leaves_no_example_section(toy_tasks):
    system = generation_messages(toy_tasks[0], [])[0]["content"]
    assert "example of a request" not in system


def test_selection_prompt_shows_one_module_and_the_query(toy_library):
    docs = [p for p in toy_library.values() if p.module == "work_calendar"]
    messages = selection_messages("Book lunch", "work_calendar", docs)
    system, user = messages[0]["content"], messages[1]["content"]
    assert all(p.text("full") in system for p in docs)
    assert "find_employee" not in system
    assert "Book lunch" in user and "`work_calendar`" in user
    assert '["add_event"]' in user  # the example name is a function of the module


def test_selection_prompt_needs_primitives():
    with pytest.raises(ValueError, match="no primitives"):
        selection_messages("q", "work_calendar", [])


def test_template_from_a_file(tmp_path, toy_tasks):
    path = tmp_path / "mine.txt"
    path.write_text("A comment line.\n=== user ===\nDo ${query} as ${function_name}; costs $$5\n")
    messages = generation_messages(toy_tasks[0], [], template=str(path))
    assert messages == [{"role": "user", "content": "Do Book lunch with Ana tomorrow as book_lunch; costs $5"}]


def test_unknown_placeholder_is_named(tmp_path, toy_tasks):
    path = tmp_path / "bad.txt"
    path.write_text("=== user ===\n${quer}\n")
    with pytest.raises(ValueError, match=r"\$\{quer\}"):
        generation_messages(toy_tasks[0], [], template=str(path))


def test_template_without_headers_is_rejected():
    with pytest.raises(ValueError, match="header"):
        PromptTemplate.parse("just text")


def test_unknown_template_lists_the_packaged_names():
    with pytest.raises(ValueError, match="cck, ps, reflect, select"):
        load_template("nope")


def test_placeholders_of_the_packaged_ps_template():
    # no module list in the ps prompt: it would differ between tasks before the documentation starts
    assert load_template("ps").placeholders == {"guidelines", "primitives", "examples", "query", "signature"}


def test_similar_examples_by_word_overlap(toy_tasks):
    # "cancel lunch tomorrow" vs "book lunch ana tomorrow": 2 shared of 5 words; the others share none
    chosen = choose_examples(toy_tasks[2], toy_tasks, 2)
    assert [t.id for t in chosen] == ["1", "2"]  # the zero-overlap tie goes to the lower id


def test_examples_exclude_the_task_and_empty_programs(toy_tasks):
    pool = toy_tasks + [make_task("4", "Cancel my lunch tomorrow too", "")]
    chosen = choose_examples(toy_tasks[2], pool, 10)
    assert [t.id for t in chosen] == ["1", "2", "10"]


def test_fixed_examples_are_the_same_for_every_task(toy_tasks):
    ids = ["1", "2", "3", "10"]
    random.Random(3).shuffle(ids)
    others = [t for t in toy_tasks if t.id != ids[0]]
    chosen = {t.id: [e.id for e in choose_examples(t, toy_tasks, 1, method="fixed", seed=3)] for t in others}
    assert all(c == [ids[0]] for c in chosen.values())
    # the shuffle's first task gets the next one, never itself
    first = next(t for t in toy_tasks if t.id == ids[0])
    assert [e.id for e in choose_examples(first, toy_tasks, 1, method="fixed", seed=3)] == [ids[1]]


def test_zero_examples_and_bad_arguments(toy_tasks):
    assert choose_examples(toy_tasks[0], toy_tasks, 0) == []
    with pytest.raises(ValueError):
        choose_examples(toy_tasks[0], toy_tasks, -1)
    with pytest.raises(ValueError):
        choose_examples(toy_tasks[0], toy_tasks, 1, method="best")
