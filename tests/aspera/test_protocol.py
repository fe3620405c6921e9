"""ASPERA's requests as primsel renders them, checked against facts stated in ASPERA's protocol
(the sizes and shapes its own run recorded); byte-for-byte parity with ASPERA's agents is
tests/aspera/test_parity*.py."""

from __future__ import annotations

import pytest

from primsel.aspera import aspera_protocol
from primsel.aspera.library import aspera_primitives
from primsel.datasets import load_builtin_tasks
from primsel.library import Library, gold_primitives

MODULES = ["ai_assistant", "company_directory", "contacts", "exceptions", "files", "messaging", "navigation",
           "reminder", "room_booking", "time_utils", "user_device_settings", "work_calendar"]


@pytest.fixture()
def protocol(aspera_src):
    return aspera_protocol(aspera_src)


def test_the_ps_agent_asks_about_all_twelve_modules_in_alphabetical_order(protocol):
    # ASPERA's deny list names "reminders", which is no module: all twelve are asked about
    assert protocol.selection_modules() == MODULES


def test_cck_system_turn_is_one_of_two_texts_of_the_documented_sizes(protocol):
    tasks = load_builtin_tasks()
    systems = {protocol.cck_messages(t)[0]["content"] for t in tasks}
    with_rooms = {t.id for t in tasks if "room_booking" in t.apps}
    # the spec: 30,168 characters without room_booking, 33,488 with it
    expected = {30168} if not with_rooms else ({30168, 33488} if len(with_rooms) < len(tasks) else {33488})
    assert {len(s) for s in systems} == expected


def test_cck_user_turn_ends_with_an_open_fence_and_states_the_return_type(protocol):
    task = next(t for t in load_builtin_tasks() if t.return_annotation)
    system, user = protocol.cck_messages(task)
    assert (system["role"], user["role"]) == ("system", "user")
    assert user["content"].endswith(f"Query: {task.query}\n\n```python")
    assert f"The return type of the solution should be `{task.return_annotation}`." in user["content"]
    plain = next(t for t in load_builtin_tasks() if not t.return_annotation)
    assert "do not call your solutions.\n\n\n\nQuery: " in protocol.cck_messages(plain)[1]["content"]


def test_selection_requests_are_one_system_message_with_the_dotted_header(protocol):
    requests = protocol.selection_messages("Book a room for tomorrow")
    assert [len(r) for r in requests] == [1] * 12
    assert all(r[0]["role"] == "system" for r in requests)
    messaging = requests[MODULES.index("messaging")][0]["content"]
    assert "Module:\n# aspera.apps.messaging.py\n\n\"\"\"The messaging service on the user's device.\"\"\"\n\n\n" \
           "Query: Book a room for tomorrow\nThink carefully" in messaging


def test_selection_answers_follow_aspera_s_substring_rule(protocol):
    answers = ["None"] * 12
    # the last name of a one-line import is not found (nothing follows it); wrapped names are
    answers[MODULES.index("work_calendar")] = (
        "```python\nfrom aspera.apps.work_calendar import find_events, Event\n```")
    answers[MODULES.index("time_utils")] = "```python\nfrom aspera.apps.time_utils import (\n    now_,\n)\n```"
    parsed = protocol.parse_selection(answers)
    assert set(parsed["names"]) == {"find_events", "now_"}
    assert parsed["unparsed"] == 0 and parsed["failed"] == 0
    answers[0] = None
    assert protocol.parse_selection(answers)["failed"] == 1


def test_the_generation_request_shows_the_selection_and_the_examples_symbols(protocol):
    task = load_builtin_tasks()[0]
    messages = protocol.generation_messages(task, ["summarise_calendar"])
    system = messages[0]["content"]
    assert "def summarise_calendar(" in system
    # always added: the worked examples use add_event and get_current_user
    assert "def add_event(" in system and "def get_current_user(" in system
    assert messages[1] == protocol.cck_messages(task)[1]  # the user turn is the CCK agent's


def test_aspera_library_has_97_definitions_and_the_65_primitives_keep_their_ids(protocol, assistant_library):
    library = Library(aspera_primitives(protocol))
    assert len(library) == 97
    five = {"exceptions", "time_utils", "company_directory", "room_booking", "work_calendar"}
    assert {pid for pid in library if pid.split(".")[0] in five} == set(assistant_library)
    task = load_builtin_tasks()[0]
    assert gold_primitives(task.program, library) == gold_primitives(task.program, assistant_library)
    event = library["work_calendar.Event"]
    assert event.text("full").startswith("@dataclass\nclass Event:")
    assert "company_directory.Employee" in event.depends_on
