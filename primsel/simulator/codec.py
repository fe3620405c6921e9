"""Typed data that crosses between the judge and the program process, and its framing.

The judge (which runs the setup and evaluation programs) and the program process (which runs
the program under test) share no memory. What crosses between them (the world state, the
arguments and the return value of the entry point, the exception it raised, the trace of its
primitive calls) is data only: JSON, with tags that rebuild exactly these types and nothing
else, never pickle:

================  =====================================================================
value             wire form
================  =====================================================================
None, bool, int,  themselves (exact types only: a subclass of ``int`` or ``str`` made by
finite float, str the program is refused, as is an ``int`` of more than ``MAX_INT_DIGITS``)
list              a JSON array
tuple / set /     ``{"t": [...]}`` / ``{"s": [...]}`` / ``{"fs": [...]}``
frozenset
dict              ``{"d": [[key, value], ...]}`` (insertion order kept; any key type above)
bytes             ``{"b": "<base64>"}``
nan, inf, -inf    ``{"fl": "nan" | "inf" | "-inf"}``
datetime.date     ``{"date": [year, month, day]}``
datetime.time     ``{"time": [hour, minute, second, microsecond, tz, fold]}``
datetime.datetime ``{"datetime": [year, month, day, hour, minute, second, microsecond, tz,
                  fold]}``; ``tz`` is null or ``[utcoffset seconds, microseconds, name]``
                  (a fixed-offset ``datetime.timezone``; other tzinfo objects are refused)
datetime.         ``{"timedelta": [days, seconds, microseconds]}``
timedelta
library enum      ``{"enum": ["work_calendar.ShowAsStatus", "Busy"]}`` (member name)
library type      ``{"obj": ["work_calendar.Event", {field: value, ...}]}`` (pydantic models,
                  named tuples and dataclasses defined in the five app modules)
================  =====================================================================

The *library types* are the classes the app modules (``primsel.simulator.apps.*``) define,
matched by exact type: a subclass the program defines is refused. Decoding never runs code of
the other side; library objects are rebuilt without validation (``model_construct``,
``_make``, or fields set on a bare instance), so they are field-for-field what was sent.

Frames are a 4-byte big-endian length followed by that many bytes of ASCII JSON; a frame longer
than the reader's cap is refused before it is read.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import math
import os
import re
import select
import struct
import time
import types
from collections.abc import Callable, Mapping
from typing import Any

#: Deepest nesting accepted (a row of an event table is about 5 levels deep).
MAX_DEPTH = 64
#: Most values (nodes) in one decoded document.
MAX_NODES = 1_000_000
#: Most decimal digits of an int.
MAX_INT_DIGITS = 4000
#: Default cap on one frame, in bytes.
FRAME_CAP = 16 * 1024 * 1024
#: Most distinct items of one set, frozenset or dict (keys) that may share a hash value. Items
#: of a set are pairwise unequal, and unequal values rarely share a hash (``-1`` and ``-2``
#: do); thousands that do were made to (hash flooding), and would make building the set take
#: quadratic time in C, where no timer can interrupt it.
MAX_SAME_HASH = 32

_HEADER = struct.Struct(">I")
#: A JSON string (escapes included), as the encoder writes it.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
# Taken at import: a program that rebinds the builtins in its own process still gets its answer out.
_len = len
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


#: Ints of at most this many bits are taken as they are by the fast paths (the full check, of
#: :data:`MAX_INT_DIGITS` digits, is :meth:`Codec._encode`'s and :meth:`Codec._decode`'s).
_INT_BITS = 64


class CodecError(ValueError):
    """A value that cannot cross: a type outside the codec, too deep, too large or malformed."""


class Codec:
    """Encodes and decodes values of the types in the module docstring.

    Parameters
    ----------
    modules : ``{short name: module}`` of the app modules whose enums and types may cross,
        e.g. ``{"work_calendar": primsel.simulator.apps.work_calendar, ...}``. A class counts
        when its ``__module__`` is the module's name.
    max_depth : deepest nesting accepted, in containers.
    max_nodes : most values in one encoded or decoded document.
    """

    def __init__(
        self, modules: Mapping[str, types.ModuleType], max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES
    ) -> None:
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self._by_type: dict[type, tuple[str, str, tuple[str, ...]]] = {}
        self._by_name: dict[str, tuple[type, str, tuple[str, ...]]] = {}
        for short, module in modules.items():
            for value in vars(module).values():
                if not isinstance(value, type) or value.__module__ != module.__name__:
                    continue
                kind, fields = _kind(value)
                if kind is None:
                    continue
                name = f"{short}.{value.__qualname__}"
                self._by_type[value] = (name, kind, fields)
                self._by_name[name] = (value, kind, fields)

    @property
    def type_names(self) -> list[str]:
        """Names of the library enums and types that may cross, sorted."""
        return sorted(self._by_name)

    # -- encoding ---------------------------------------------------------------------------

    def encode(self, value: Any, where: str = "the value") -> Any:
        """The JSON-ready form of ``value``; ``where`` names it in error messages.

        Raises
        ------
        CodecError : a value of a type outside the codec (the message names the type and where
            it was found), nesting deeper than ``max_depth`` (or a cycle), or more than
            ``max_nodes`` values.
        """
        budget = [self.max_nodes]
        return self._encode(value, 0, budget, where)

    def _encode(self, value: Any, depth: int, budget: list[int], where: str) -> Any:
        """:meth:`encode` of ``value`` at nesting ``depth``, counting it against ``budget``.

        JSON's own values are taken here; the others go to their type's encoder in
        :data:`_ENCODERS`, or to :meth:`_encode_library`.
        """
        budget[0] -= 1
        if budget[0] < 0:
            raise CodecError(f"{where} holds more than {self.max_nodes} values")
        if depth > self.max_depth:
            raise CodecError(f"{where} is nested more than {self.max_depth} levels deep (or is cyclic)")
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return value
        if kind is int:
            if value.bit_length() > MAX_INT_DIGITS * 3.33:
                raise CodecError(f"{where} holds an int of more than {MAX_INT_DIGITS} digits")
            return value
        if kind is float:
            if math.isfinite(value):
                return value
            return {"fl": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
        if kind is list:
            return self._encode_items(value, depth + 1, budget, where)
        encoder = _ENCODERS.get(kind)
        if encoder is not None:
            return encoder(self, value, depth + 1, budget, where)
        return self._encode_library(value, kind, depth + 1, budget, where)

    def _encode_tuple(self, value: tuple[Any, ...], depth: int, budget: list[int], where: str) -> Any:
        """``{"t": [item, ...]}``, the items at nesting ``depth``."""
        return {"t": self._encode_items(value, depth, budget, where)}

    def _encode_set(self, value: set[Any], depth: int, budget: list[int], where: str) -> Any:
        """``{"s": [item, ...]}``, the items at nesting ``depth``."""
        return {"s": self._encode_items(value, depth, budget, where)}

    def _encode_frozenset(self, value: frozenset[Any], depth: int, budget: list[int], where: str) -> Any:
        """``{"fs": [item, ...]}``, the items at nesting ``depth``."""
        return {"fs": self._encode_items(value, depth, budget, where)}

    def _encode_dict(self, value: dict[Any, Any], depth: int, budget: list[int], where: str) -> Any:
        """``{"d": [[key, value], ...]}``: all the keys, then all the values, at nesting ``depth``."""
        keys = self._encode_items(value.keys(), depth, budget, where)
        values = self._encode_items(value.values(), depth, budget, where)
        return {"d": [[key, item] for key, item in zip(keys, values)]}

    def _encode_bytes(self, value: bytes, depth: int, budget: list[int], where: str) -> Any:
        """``{"b": "<base64>"}``."""
        return {"b": base64.b64encode(value).decode("ascii")}

    def _encode_datetime(self, value: datetime.datetime, depth: int, budget: list[int], where: str) -> Any:
        """``{"datetime": [year, month, day, hour, minute, second, microsecond, tz, fold]}``."""
        return {"datetime": [value.year, value.month, value.day, value.hour, value.minute, value.second,
                             value.microsecond, _tz(value.tzinfo, where), value.fold]}  # fmt: skip

    def _encode_date(self, value: datetime.date, depth: int, budget: list[int], where: str) -> Any:
        """``{"date": [year, month, day]}``."""
        return {"date": [value.year, value.month, value.day]}

    def _encode_time(self, value: datetime.time, depth: int, budget: list[int], where: str) -> Any:
        """``{"time": [hour, minute, second, microsecond, tz, fold]}``."""
        return {"time": [value.hour, value.minute, value.second, value.microsecond, _tz(value.tzinfo, where),
                         value.fold]}  # fmt: skip

    def _encode_timedelta(self, value: datetime.timedelta, depth: int, budget: list[int], where: str) -> Any:
        """``{"timedelta": [days, seconds, microseconds]}``."""
        return {"timedelta": [value.days, value.seconds, value.microseconds]}

    def _encode_library(self, value: Any, kind: type, depth: int, budget: list[int], where: str) -> Any:
        """``{"enum": [name, member]}`` or ``{"obj": [name, {field: value, ...}]}`` (the fields
        at nesting ``depth``) for a value of a library type ``kind``.

        Raises
        ------
        CodecError : ``kind`` is no library type (nor a type of the codec's own).
        """
        known = self._by_type.get(kind)
        if known is None:
            raise CodecError(f"{where} holds a value of type {_type_name(kind)}, which cannot leave the program's "
                             f"process (only builtins, datetime values and the library's enums and types can)")  # fmt: skip
        name, category, fields = known
        if category == "enum":
            return {"enum": [name, value.name]}
        return {"obj": [name, {field: self._encode(getattr(value, field), depth, budget, where) for field in fields}]}

    def _encode_items(self, values: Any, depth: int, budget: list[int], where: str) -> list[Any]:
        """``[self._encode(item, depth, ...) for item in values]``, with strings, ``None`` and
        bools (most of a world state) taken as they are without a call each, and a collection
        holding only those, or only ints of at most :data:`_INT_BITS` bits (a ``random``
        state), copied whole: the same values, counts and errors, in a fraction of the time."""
        if depth > self.max_depth:
            return [self._encode(item, depth, budget, where) for item in values]
        if _len(values) >= _WHOLE and _all_plain(values, _ENCODE_PLAIN):
            budget[0] -= _len(values)
            if budget[0] < 0:
                raise CodecError(f"{where} holds more than {self.max_nodes} values")
            return list(values)
        out = []
        for item in values:
            kind = type(item)
            plain = kind is str or kind is bool or item is None
            if plain or (kind is int and item.bit_length() <= _INT_BITS):
                budget[0] -= 1
                if budget[0] < 0:
                    raise CodecError(f"{where} holds more than {self.max_nodes} values")
                out.append(item)
            else:
                out.append(self._encode(item, depth, budget, where))
        return out

    # -- decoding ---------------------------------------------------------------------------

    def decode(self, data: Any) -> Any:
        """Rebuild a value from its JSON-ready form.

        Raises
        ------
        CodecError : anything not produced by :meth:`encode` (unknown tag or type, wrong shape,
            out-of-range date, too deep, too many values).
        """
        budget = [self.max_nodes]
        try:
            return self._decode(data, 0, budget)
        except CodecError:
            raise
        except (TypeError, ValueError, OverflowError, KeyError, AttributeError, IndexError) as exc:
            raise CodecError(f"malformed value: {type(exc).__name__}: {exc}") from None

    def _decode(self, data: Any, depth: int, budget: list[int]) -> Any:
        """:meth:`decode` of ``data`` at nesting ``depth``, counting it against ``budget``.

        JSON's own values are taken here; a tagged value ``{tag: body}`` goes to the tag's
        decoder in :data:`_DECODERS`.
        """
        budget[0] -= 1
        if budget[0] < 0:
            raise CodecError(f"more than {self.max_nodes} values")
        if depth > self.max_depth:
            raise CodecError(f"nested more than {self.max_depth} levels deep")
        kind = type(data)
        if data is None or kind is bool or kind is str or kind is float:
            return data
        if kind is int:
            if data.bit_length() > MAX_INT_DIGITS * 3.33:
                raise CodecError(f"an int of more than {MAX_INT_DIGITS} digits")
            return data
        if kind is list:
            return self._decode_items(data, depth + 1, budget)
        if kind is not dict or len(data) != 1:
            raise CodecError(f"unexpected {_type_name(kind)} in the data")
        (tag, body), = data.items()
        decoder = _DECODERS.get(tag)
        if decoder is None:
            raise CodecError(f"unknown tag {tag!r}")
        return decoder(self, body, depth + 1, budget)

    def _decode_tuple(self, body: Any, depth: int, budget: list[int]) -> tuple[Any, ...]:
        """The tuple of ``{"t": body}``, its items at nesting ``depth``."""
        return tuple(self._decode_items(_list(body, "t"), depth, budget))

    def _decode_set(self, body: Any, depth: int, budget: list[int]) -> set[Any]:
        """The set of ``{"s": body}``, its items at nesting ``depth`` (few sharing a hash value)."""
        items = self._decode_items(_list(body, "s"), depth, budget)
        _few_collisions(items)
        return set(items)

    def _decode_frozenset(self, body: Any, depth: int, budget: list[int]) -> frozenset[Any]:
        """The frozenset of ``{"fs": body}``, as :meth:`_decode_set`."""
        items = self._decode_items(_list(body, "fs"), depth, budget)
        _few_collisions(items)
        return frozenset(items)

    def _decode_dict(self, body: Any, depth: int, budget: list[int]) -> dict[Any, Any]:
        """The dict of ``{"d": body}``: all the keys (few sharing a hash value), then all the
        values, at nesting ``depth``."""
        body = _list(body, "d")
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise CodecError("a dict entry is not a [key, value] pair")
        keys = self._decode_items([pair[0] for pair in body], depth, budget)
        _few_collisions(keys)
        return dict(zip(keys, self._decode_items([pair[1] for pair in body], depth, budget)))

    def _decode_bytes(self, body: Any, depth: int, budget: list[int]) -> bytes:
        """The bytes of ``{"b": "<base64>"}``."""
        if type(body) is not str:
            raise CodecError("bytes are not a base64 string")
        return base64.b64decode(body, validate=True)

    def _decode_float(self, body: Any, depth: int, budget: list[int]) -> float:
        """The nan or infinity of ``{"fl": body}``."""
        if body not in _FLOATS:
            raise CodecError(f"unknown float {body!r}")
        return float(body)  # a new object per nan: three nans in a set stay three

    def _decode_date(self, body: Any, depth: int, budget: list[int]) -> datetime.date:
        """The date of ``{"date": [year, month, day]}``."""
        return datetime.date(*_ints(body, 3, "date"))

    def _decode_time(self, body: Any, depth: int, budget: list[int]) -> datetime.time:
        """The time of ``{"time": [hour, minute, second, microsecond, tz, fold]}``."""
        body = _list(body, "time", 6)
        h, m, s, us = _ints(body[:4], 4, "time")
        return datetime.time(h, m, s, us, tzinfo=_untz(body[4]), fold=_ints(body[5:], 1, "time")[0])

    def _decode_datetime(self, body: Any, depth: int, budget: list[int]) -> datetime.datetime:
        """The datetime of ``{"datetime": [year, ..., microsecond, tz, fold]}``."""
        body = _list(body, "datetime", 9)
        fields = _ints(body[:7], 7, "datetime")
        return datetime.datetime(*fields, tzinfo=_untz(body[7]), fold=_ints(body[8:], 1, "datetime")[0])

    def _decode_timedelta(self, body: Any, depth: int, budget: list[int]) -> datetime.timedelta:
        """The timedelta of ``{"timedelta": [days, seconds, microseconds]}``."""
        return datetime.timedelta(*_ints(body, 3, "timedelta"))

    def _decode_enum(self, body: Any, depth: int, budget: list[int]) -> enum.Enum:
        """The member of ``{"enum": [name, member]}``, of a library enum."""
        name, member = _list(body, "enum", 2)
        cls = self._known(name, "enum")
        if type(member) is not str or member not in cls.__members__:
            raise CodecError(f"{name} has no member {member!r}")
        return cls.__members__[member]

    def _decode_object(self, body: Any, depth: int, budget: list[int]) -> Any:
        """The object of ``{"obj": [name, {field: value, ...}]}``, of a library type, its fields
        at nesting ``depth`` (rebuilt without validation: :func:`_build`)."""
        name, values = _list(body, "obj", 2)
        cls = self._known(name, None)
        _, category, fields = self._by_name[name]
        if category == "enum" or type(values) is not dict or not set(values) <= set(fields):
            raise CodecError(f"malformed {name}")
        decoded = {field: self._decode(values[field], depth, budget) for field in fields if field in values}
        return _build(cls, category, fields, decoded)

    def _decode_items(self, data: list[Any], depth: int, budget: list[int]) -> list[Any]:
        """``[self._decode(item, depth, ...) for item in data]``, with strings, ``None``, bools
        and floats taken as they are without a call each, and a list of only those, or only
        ints, copied whole (as :meth:`_encode_items`)."""
        if depth > self.max_depth:
            return [self._decode(item, depth, budget) for item in data]
        if _len(data) >= _WHOLE and _all_plain(data, _DECODE_PLAIN):
            budget[0] -= _len(data)
            if budget[0] < 0:
                raise CodecError(f"more than {self.max_nodes} values")
            return list(data)
        out = []
        for item in data:
            kind = type(item)
            plain = kind is str or kind is bool or kind is float or item is None
            if plain or (kind is int and item.bit_length() <= _INT_BITS):
                budget[0] -= 1
                if budget[0] < 0:
                    raise CodecError(f"more than {self.max_nodes} values")
                out.append(item)
            else:
                out.append(self._decode(item, depth, budget))
        return out

    def _known(self, name: Any, category: str | None) -> type:
        entry = self._by_name.get(name) if type(name) is str else None
        if entry is None or (category is not None and entry[1] != category):
            raise CodecError(f"unknown library type {name!r}")
        return entry[0]


#: Types :meth:`Codec._encode_items` takes as they are; :meth:`Codec._decode_items` takes floats
#: too (a nan or infinity never reaches the decoder as a float: JSON has none).
_ENCODE_PLAIN = frozenset({str, bool, type(None)})
_DECODE_PLAIN = _ENCODE_PLAIN | {float}
#: Ints and bools: taken as they are when every one has at most :data:`_INT_BITS` bits.
_INTEGRAL = frozenset({int, bool})
_INT_BOUND = 1 << _INT_BITS
#: Collections at least this long are checked whole first (shorter ones, a row's fields, mostly
#: mix types: the check would cost more than it saves).
_WHOLE = 64


def _all_plain(values: Any, plain: frozenset[type]) -> bool:
    """Whether every item of ``values`` (a list, tuple, set, frozenset or dict view) is of a type
    in ``plain``, or every one is an int or bool of at most :data:`_INT_BITS` bits; checked in
    C, one pass over the items (two more for ints)."""
    kinds = set(map(type, values))
    if kinds <= plain:
        return True
    return kinds <= _INTEGRAL and -_INT_BOUND < min(values) and max(values) < _INT_BOUND


#: The encoder of each type :meth:`Codec._encode` does not take itself, by exact type.
_ENCODERS: dict[type, Callable[[Codec, Any, int, list[int], str], Any]] = {
    tuple: Codec._encode_tuple,
    set: Codec._encode_set,
    frozenset: Codec._encode_frozenset,
    dict: Codec._encode_dict,
    bytes: Codec._encode_bytes,
    datetime.datetime: Codec._encode_datetime,
    datetime.date: Codec._encode_date,
    datetime.time: Codec._encode_time,
    datetime.timedelta: Codec._encode_timedelta,
}
#: The decoder of each tag of the wire form (the module docstring).
_DECODERS: dict[str, Callable[[Codec, Any, int, list[int]], Any]] = {
    "t": Codec._decode_tuple,
    "s": Codec._decode_set,
    "fs": Codec._decode_frozenset,
    "d": Codec._decode_dict,
    "b": Codec._decode_bytes,
    "fl": Codec._decode_float,
    "date": Codec._decode_date,
    "time": Codec._decode_time,
    "datetime": Codec._decode_datetime,
    "timedelta": Codec._decode_timedelta,
    "enum": Codec._decode_enum,
    "obj": Codec._decode_object,
}


def _few_collisions(items: list[Any]) -> None:
    """Refuse more than :data:`MAX_SAME_HASH` items with one hash value (linear time).

    The counts are kept in a dict keyed by the hash values, plain ints that hash to
    themselves, so the check itself cannot be flooded.

    Raises
    ------
    CodecError : too many items share a hash value, or an item is unhashable.
    """
    if len(items) <= MAX_SAME_HASH:
        return
    counts: dict[int, int] = {}
    for item in items:
        value = hash(item)
        count = counts.get(value, 0) + 1
        if count > MAX_SAME_HASH:
            raise CodecError(f"more than {MAX_SAME_HASH} items of a set or dict share one hash value (hash flooding)")
        counts[value] = count


def _kind(cls: type) -> tuple[str | None, tuple[str, ...]]:
    """How a library class crosses: ``enum``, ``model`` (pydantic), ``namedtuple`` or ``dataclass``."""
    if issubclass(cls, enum.Enum):
        return "enum", ()
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, dict) and hasattr(cls, "model_construct"):
        return "model", tuple(model_fields)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return "namedtuple", tuple(cls._fields)
    if dataclasses.is_dataclass(cls):
        return "dataclass", tuple(f.name for f in dataclasses.fields(cls))
    return None, ()


def _build(cls: type, category: str, fields: tuple[str, ...], values: dict[str, Any]) -> Any:
    if category == "model":
        return cls.model_construct(**values)
    if category == "namedtuple":
        if len(values) != len(fields):
            raise CodecError(f"{cls.__qualname__} needs all of its fields")
        return cls._make(values[field] for field in fields)
    obj = object.__new__(cls)  # a dataclass, field for field, without re-running its checks
    if set(values) != set(fields):
        raise CodecError(f"{cls.__qualname__} needs all of its fields")
    for field in fields:
        object.__setattr__(obj, field, values[field])
    return obj


def _type_name(kind: type) -> str:
    module = getattr(kind, "__module__", None)
    name = getattr(kind, "__qualname__", None) or "?"
    if type(name) is not str or type(module) is not str:
        return "?"
    return repr(name if module in ("builtins", None) else f"{module}.{name}")


def _list(body: Any, tag: str, length: int | None = None) -> list[Any]:
    if type(body) is not list or (length is not None and len(body) != length):
        raise CodecError(f"malformed {tag!r} value")
    return body


def _ints(body: Any, length: int, tag: str) -> list[int]:
    body = _list(body, tag, length)
    if any(type(item) is not int for item in body):
        raise CodecError(f"malformed {tag!r} value")
    return body


def _tz(tzinfo: Any, where: str) -> list[Any] | None:
    if tzinfo is None:
        return None
    if type(tzinfo) is not datetime.timezone:
        raise CodecError(f"{where} holds a datetime with a {_type_name(type(tzinfo))} time zone; only fixed "
                         "offsets (datetime.timezone) can cross")  # fmt: skip
    offset = tzinfo.utcoffset(None)
    return [offset.days * 86400 + offset.seconds, offset.microseconds, tzinfo.tzname(None)]


def _untz(body: Any) -> datetime.timezone | None:
    if body is None:
        return None
    seconds, micros, name = _list(body, "tz", 3)
    if type(seconds) is not int or type(micros) is not int or type(name) is not str:
        raise CodecError("malformed time zone")
    return datetime.timezone(datetime.timedelta(seconds=seconds, microseconds=micros), name)


# -- frames ---------------------------------------------------------------------------------


def dumps(document: Any) -> bytes:
    """``document`` (already JSON-ready) as compact ASCII JSON bytes."""
    return _ENCODE(document).encode("ascii")


def write_frame(fd: int, payload: bytes, deadline: float | None = None) -> None:
    """Write one frame (length header and payload) to ``fd``, all of it.

    Parameters
    ----------
    fd : a blocking descriptor, or a non-blocking one when ``deadline`` is given.
    payload : the frame's bytes.
    deadline : ``time.monotonic()`` value after which to give up (None: wait as long as it takes).

    Raises
    ------
    OSError : the descriptor is closed or broken.
    TimeoutError : the deadline passed before everything was written.
    """
    data = memoryview(_HEADER.pack(_len(payload)) + payload)
    while data:
        if deadline is not None:
            _wait(fd, deadline, write=True)
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        data = data[written:]


class FrameTooLarge(CodecError):
    """A frame announced a length above the reader's cap."""


def read_frame(fd: int, cap: int = FRAME_CAP, deadline: float | None = None) -> bytes | None:
    """Read one frame from ``fd``; None at end of file before a header.

    Parameters
    ----------
    fd : a blocking descriptor, or a non-blocking one when ``deadline`` is given.
    cap : largest payload accepted, in bytes.
    deadline : ``time.monotonic()`` value after which to give up (None: wait as long as it takes).

    Raises
    ------
    FrameTooLarge : the announced length is above ``cap`` (nothing more is read).
    CodecError : the stream ends inside a frame.
    TimeoutError : the deadline passed first.
    """
    header = _read_exactly(fd, _HEADER.size, deadline)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > cap:
        raise FrameTooLarge(f"a message of {length} bytes is above the cap of {cap} bytes")
    payload = _read_exactly(fd, length, deadline)
    if payload is None:
        raise CodecError("the stream ended inside a message")
    return payload


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes | None:
    parts: list[bytes] = []
    missing = size
    while missing:
        if deadline is not None:
            _wait(fd, deadline, write=False)
        try:
            chunk = os.read(fd, min(missing, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            if missing == size:
                return None
            raise CodecError("the stream ended inside a message")
        parts.append(chunk)
        missing -= len(chunk)
    return b"".join(parts)


def _wait(fd: int, deadline: float, write: bool) -> None:
    remaining = deadline - time.monotonic()
    if remaining > 0:
        ready = select.select([], [fd], [], remaining)[1] if write else select.select([fd], [], [], remaining)[0]
        if ready:
            return
    raise TimeoutError("the deadline passed")


def too_many_values(payload: bytes, most: int = MAX_NODES) -> bool:
    """Whether a JSON frame holds more than ``most`` values, judged from its bytes.

    Every value but the first follows a comma or opens a container, so a frame with fewer than
    ``most`` commas and brackets outside its strings holds at most ``most`` values. Counted at
    C speed, so a huge frame is refused before parsing; strings are cut out (by a regular
    expression) only when the raw count is over, so commas inside a string never count.
    """
    def count(data: bytes) -> int:
        return data.count(b",") + data.count(b"[") + data.count(b"{")

    return count(payload) >= most and count(_JSON_STRING.sub(b'""', payload)) >= most


def loads(payload: bytes) -> Any:
    """Parse one frame's JSON.

    Raises
    ------
    CodecError : not ASCII JSON, or too deeply nested for the parser.
    """
    try:
        return json.loads(payload.decode("ascii"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"malformed message: {type(exc).__name__}") from None



def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")
