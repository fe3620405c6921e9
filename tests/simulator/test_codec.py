"""The data codec between the judge and the program process: what crosses, what is refused."""

from __future__ import annotations

import datetime
import math
import os

import pytest

from primsel.simulator import codec, program
from primsel.simulator.apps.company_directory import Employee, Team
from primsel.simulator.apps.time_utils import Duration, EventFrequency, RepetitionSpec, TimeInterval, TimeUnits
from primsel.simulator.apps.work_calendar import Event, ShowAsStatus


@pytest.fixture(scope="module")
def c():
    return codec.Codec(program.load_apps())


def roundtrip(c, value):
    return c.decode(codec.loads(codec.dumps(c.encode(value))))


def test_builtins_and_datetimes_round_trip_with_their_exact_types(c):
    tz = datetime.timezone(datetime.timedelta(hours=2), "CEST")
    value = [None, True, 3, -2**80, 1.5, math.inf, "é\ud800", b"\x00\xff", (1, [2]), {3, 4}, frozenset({5}),
             {(1, 2): {"k": None}}, datetime.date(2024, 6, 25), datetime.datetime(2024, 6, 25, 9, 6, 0, 7),
             datetime.datetime(2024, 6, 25, 10, tzinfo=tz), datetime.time(9, 6), datetime.timedelta(days=-1, seconds=5)]
    back = roundtrip(c, value)
    assert back == value
    assert [type(v) for v in back] == [type(v) for v in value]
    assert back[14].tzinfo == tz and back[14].utcoffset() == datetime.timedelta(hours=2)
    assert math.isnan(roundtrip(c, math.nan))


def test_library_values_round_trip_field_for_field(c):
    alice = Employee(name="Alice", employee_id="e1")
    event = Event(subject="1:1", attendees=[alice], starts_at=datetime.datetime(2024, 6, 26, 10),
                  repeats=RepetitionSpec(frequency=EventFrequency.WEEKLY, which_weekday=[0, 2]))
    value = [event, Duration(30, TimeUnits.Minutes), TimeInterval(datetime.datetime(2024, 6, 26, 9), datetime.datetime(2024, 6, 26, 10)),
             Team.Engineering, ShowAsStatus.Busy]
    back = roundtrip(c, value)
    assert back == value
    assert type(back[0].attendees[0]) is Employee and back[0].repeats.which_weekday == [0, 2]
    assert back[3] is Team.Engineering
    assert str(back[0]) == str(event)


def test_event_table_rows_round_trip(c):
    row = {"event_id": "x", "repeats": {"frequency": "weekly", "period": 1}, "show_as_status": ShowAsStatus.Free,
           "attendees": ["e1", "e2"], "starts_at": datetime.datetime(2024, 6, 25, 9, 6)}
    assert roundtrip(c, {"USER_CALENDAR": [row]}) == {"USER_CALENDAR": [row]}


class Yes:
    def __eq__(self, other):
        return True


class MyInt(int):
    pass


class MyEvent(Event):
    pass


async def coroutine_function():
    return 1


def generator_function():
    yield 1


@pytest.mark.parametrize(
    "value, named",
    [
        (Yes(), "Yes"),
        (MyInt(3), "MyInt"),
        ([1, {"a": (Yes(),)}], "Yes"),
        (MyEvent(), "MyEvent"),
        (generator_function(), "generator"),
        (os, "module"),
        (len, "builtin_function_or_method"),
        (Event, "ModelMetaclass"),
        (ValueError("x"), "ValueError"),
        (datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC).astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris")), "ZoneInfo"),
    ],
)
def test_values_outside_the_codec_are_refused_naming_the_type(c, value, named):
    with pytest.raises(codec.CodecError, match=named):
        c.encode(value)


def test_a_coroutine_is_refused(c):
    value = coroutine_function()
    try:
        with pytest.raises(codec.CodecError, match="coroutine"):
            c.encode(value)
    finally:
        value.close()


def test_depth_cycles_and_size_are_capped(c):
    deep = []
    for _ in range(codec.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(codec.CodecError, match="nested"):
        c.encode(deep)
    cyclic = []
    cyclic.append(cyclic)
    with pytest.raises(codec.CodecError, match="cyclic"):
        c.encode(cyclic)
    small = codec.Codec(program.load_apps(), max_nodes=10)
    with pytest.raises(codec.CodecError, match="more than 10"):
        small.encode(list(range(20)))
    with pytest.raises(codec.CodecError, match="digits"):
        c.encode(10**5000)


def test_long_collections_of_plain_values_are_checked_as_item_by_item():
    # the random state and long lists are taken whole when every item is plain: the same wire
    # form, the same values, the same counts and refusals as item by item
    import random
    import sys

    c = codec.Codec(program.load_apps())
    state = random.Random(5).getstate()
    wire = c.encode(state)
    assert wire == {"t": [3, {"t": list(state[1])}, None]}
    assert c.decode(codec.loads(codec.dumps(wire))) == state
    words = [True, None, "x"] * 30
    assert c.encode(words) == words and c.decode(words) == words
    mixed = list(range(100)) + [2**64, -(2**64), 2**63]  # past 64 bits: each checked, still exact
    assert roundtrip(c, mixed) == mixed
    assert [type(v) for v in roundtrip(c, [1.5] * 70 + [True])] == [float] * 70 + [bool]
    with pytest.raises(codec.CodecError, match="digits"):
        c.encode(list(range(100)) + [10**5000])
    with pytest.raises(codec.CodecError, match="int of more than"):
        c.decode(list(range(100)) + [10**5000])
    class Count(int):
        pass

    with pytest.raises(codec.CodecError, match="Count"):
        c.encode([1] * 100 + [Count(1)])  # a subclass of int is no plain value
    assert c.encode([Team.Finance] * 70)[0] == {"enum": ["company_directory.Team", "Finance"]}
    assert c.encode([math.nan] + [1.0] * 100)[0] == {"fl": "nan"}  # floats encoded one by one
    small = codec.Codec(program.load_apps(), max_nodes=100)
    assert small.encode(["a"] * 99) == ["a"] * 99  # the list itself is the 100th value
    with pytest.raises(codec.CodecError, match="more than 100 values"):
        small.encode(["a"] * 100)
    with pytest.raises(codec.CodecError, match="more than 100 values"):
        small.decode(list(range(100)))
    assert sys.maxsize in roundtrip(c, [sys.maxsize] * 64)


@pytest.mark.parametrize(
    "data",
    [
        {"x": 1},  # unknown tag
        {"t": [1], "s": [2]},  # two tags
        {"obj": ["work_calendar.Nope", {}]},  # unknown type
        {"obj": ["builtins.object", {}]},
        {"obj": ["work_calendar.Event", {"not_a_field": 1}]},
        {"obj": ["time_utils.Duration", {"number": 1}]},  # a named tuple needs all fields
        {"enum": ["company_directory.Team", "Nope"]},
        {"enum": ["work_calendar.Event", "x"]},
        {"date": [2024, 13, 1]},
        {"date": [2024, 1]},
        {"datetime": [2024, 1, 1, 0, 0, 0, 0, "utc", 0]},
        {"d": [[1]]},
        {"d": [[[1], 2]]},  # unhashable key
        {"b": "!!"},
        {"fl": "big"},
    ],
)
def test_malformed_data_is_refused(c, data):
    with pytest.raises(codec.CodecError):
        c.decode(data)


def test_json_constants_and_deep_json_are_refused():
    with pytest.raises(codec.CodecError):
        codec.loads(b"[NaN]")
    with pytest.raises(codec.CodecError):
        codec.loads(b"[" * 200_000)


def test_frames_round_trip_and_the_cap_is_checked_before_reading():
    read_end, write_end = os.pipe()
    try:
        codec.write_frame(write_end, b'{"a":1}')
        assert codec.read_frame(read_end) == b'{"a":1}'
        os.write(write_end, (2**31).to_bytes(4, "big") + b"xx")
        with pytest.raises(codec.FrameTooLarge):
            codec.read_frame(read_end, cap=1000)
        assert os.read(read_end, 10) == b"xx"  # nothing past the header was read
    finally:
        os.close(write_end)
        os.close(read_end)


def test_a_read_past_its_deadline_raises_timeout():
    import time

    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        with pytest.raises(TimeoutError):
            codec.read_frame(read_end, deadline=time.monotonic() + 0.05)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_sets_and_dict_keys_made_to_share_one_hash_are_refused():
    from primsel.simulator.codec import MAX_SAME_HASH, Codec, CodecError

    codec = Codec({})
    colliding = [7 + i * (2**61 - 1) for i in range(MAX_SAME_HASH + 1)]  # hash(x) == 7 for each
    assert {hash(x) for x in colliding} == {7}
    for data in ({"s": colliding}, {"fs": colliding}, {"d": [[x, 0] for x in colliding]}):
        with pytest.raises(CodecError, match="hash"):
            codec.decode(data)
    fewer = colliding[:MAX_SAME_HASH]
    assert codec.decode({"s": fewer}) == set(fewer)
    assert codec.decode(codec.encode({-1: "a", -2: "b"})) == {-1: "a", -2: "b"}  # hash(-1) == hash(-2)


def test_nans_keep_their_identity():
    from primsel.simulator.codec import Codec

    codec = Codec({})
    nans = {float("nan"), float("nan"), float("nan")}
    assert len(nans) == 3
    assert len(codec.decode(codec.encode(nans))) == 3


def test_commas_inside_strings_are_not_values():
    import json

    from primsel.simulator.codec import too_many_values

    assert not too_many_values(json.dumps("," * 1_000_001).encode())
    assert too_many_values(json.dumps([0] * 1_000_001).encode())
    assert too_many_values(b'["a\\",", 1, 2]', 3)  # an escaped quote does not end the string
    assert not too_many_values(b'["a\\",", 1]', 3)


def test_clean_text_drops_controls_bidi_and_lone_surrogates():
    from primsel.simulator.judge import clean_text

    assert clean_text("a\x1b[2Jb\u202ec\u2066d\u200be\ud800f\tg\nh") == "a[2Jbcde?f\tg\nh"
