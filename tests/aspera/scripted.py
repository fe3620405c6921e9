"""The scripted model of the ASPERA parity tests: an answer that depends only on the messages of a request.

Both sides use it: ASPERA's agents (through a completer, in ``aspera_side.py``) and primsel (through
``AsperaProtocol.parse_selection`` and the fake OpenAI server). It imports nothing of either.

A selection request (one ``system`` message) is answered with one of :data:`VARIANTS`, picked by a hash of the
message, naming a subset of the module's own top-level names (read from the module text the message shows) and,
for some variants, names of other modules. The variants are the answers whose handling a reimplementation of
ASPERA's selection parsing would get wrong:

* ``one_line``: ``from aspera.apps.<m> import a, b, c`` (at most three names, or all the chosen ones): ASPERA's
  substring rule misses the last name, unless black wraps the line (longer than 80 characters), when it sees
  them all;
* ``wrapped``: a parenthesised import with a magic trailing comma, kept exploded by black;
* ``none_block`` / ``bare_none``: ``None`` in a python block, and the bare word (no block: the whole answer is
  parsed);
* ``prose``: a python block between prose, with a standard-library import;
* ``no_fence``: import statements without a code block;
* ``usage``: code that uses the names (calls, attributes, annotations, subscripts, a module-level call that
  ASPERA's parser deletes) instead of importing them;
* ``cross``: names of other modules, with prefix false positives (``ContactAddress,`` finds ``Address``,
  ``search_reminder,`` the module ``reminder``), a ``Literal`` alias (``weekdays``) and functional enums;
* ``rejected_prose`` / ``rejected_block`` / ``empty``: answers ASPERA's parser rejects (no parseable python,
  a block that does not parse, an empty answer): they count as ``None``;
* ``two_blocks``: a block that does not parse, then one that does (ASPERA takes the first that parses).

A generation request (``[system, user]``) is answered with a small program that returns None.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence

VARIANTS = ("one_line", "wrapped", "none_block", "bare_none", "prose", "no_fence", "usage", "cross",
            "rejected_prose", "rejected_block", "empty", "two_blocks")
#: Names of other modules an answer may add (``cross``): (module, names), the last of a line not detected.
CROSS = (
    ("contacts", ("ContactAddress", "Contact")),
    ("reminder", ("search_reminder", "PersonalReminder")),
    ("time_utils", ("weekdays", "DateRanges", "TimeUnits")),
    ("company_directory", ("Employee", "find_manager_of")),
    ("files", ("Document", "search_documents")),
)
_HEADER = re.compile(r"^# aspera\.apps\.(\w+)\.py$", re.MULTILINE)
_DEFINITION = re.compile(r"^(?:def (\w+)\(|class (\w+)\b|(\w+)\s*(?::[^=\n]*)?=\s)", re.MULTILINE)
PROGRAM_ANSWER = "```python\ndef scripted_solution():\n    return None\n```"


def digest(text: str) -> int:
    """An integer from the sha256 of ``text`` (stable across processes and Python versions)."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16)


def module_shown(content: str) -> tuple[str, list[str]]:
    """The module a selection message shows (from its ``# aspera.apps.<m>.py`` header) and the module's
    top-level names, in the order of its text."""
    header = _HEADER.search(content)
    if header is None:
        raise ValueError("not a selection message: no '# aspera.apps.<module>.py' header")
    start = header.end()
    end = content.find("\nQuery:", start)
    names: list[str] = []
    for match in _DEFINITION.finditer(content[start:end if end >= 0 else len(content)]):
        name = next(group for group in match.groups() if group)
        if name not in names:
            names.append(name)
    return header.group(1), names


def variant_of(content: str) -> str:
    """Which answer variant a selection message gets."""
    return VARIANTS[digest(content) % len(VARIANTS)]


def selection_answer(content: str) -> str:
    """The answer to a selection request whose one message is ``content``."""
    module, names = module_shown(content)
    chooser = random.Random(digest(content))
    if names:
        chosen = chooser.sample(names, max(1, (len(names) + 1) // 2))
    else:
        chosen = []
    cross_module, cross_names = CROSS[chooser.randrange(len(CROSS))]
    variant = variant_of(content)
    listed = ", ".join(chosen)
    own = f"from aspera.apps.{module} import {listed}" if chosen else "None"
    if variant == "one_line":
        if chosen and chooser.random() < 0.6:
            short = chosen[:3]
            return f"```python\nfrom aspera.apps.{module} import {', '.join(short)}\n```"
        return f"```python\n{own}\n```"
    if variant == "wrapped":
        if not chosen:
            return "```python\nNone\n```"
        lines = "".join(f"    {name},\n" for name in chosen)
        return f"```python\nfrom aspera.apps.{module} import (\n{lines})\n```"
    if variant == "none_block":
        return "```python\nNone\n```"
    if variant == "bare_none":
        return "None"
    if variant == "prose":
        return f"The relevant imports are below.\n\n```python\nimport datetime\n{own}\n```\n\nThey cover the query."
    if variant == "no_fence":
        return f"{own}\nfrom aspera.apps.{cross_module} import {', '.join(cross_names)}"
    if variant == "usage":
        return "```python\n" + _usage(module, chosen) + "```"
    if variant == "cross":
        extra = "\n".join(f"from aspera.apps.{m} import {', '.join(n)}" for m, n in CROSS)
        return f"```python\n{own}\n{extra}\n```"
    if variant == "rejected_prose":
        return "Nothing in this module seems relevant to the request, so I would not import anything from it."
    if variant == "rejected_block":
        return f"```python\nfrom aspera.apps.{module} import (\n    {listed or 'x'}\n```"
    if variant == "empty":
        return ""
    return f"```python\nfrom aspera.apps.{module} import (\n```\nSorry, that was cut. Here:\n```python\n{own}\n```"


def _usage(module: str, names: Sequence[str]) -> str:
    """A program that uses ``names`` in the ways ASPERA's substring rule looks for."""
    lines = [f"import aspera.apps.{module} as app", "", "", "def solve():"]
    forms = ("    first = {}()", "    second = {}.__doc__", "    third: {} | None = None", "    fourth = [{}]",
             "    fifth = ({}, None)")
    for position, name in enumerate(names):
        lines.append(forms[position % len(forms)].format(name))
    lines.append("    return None")
    lines.append("")
    lines.append("")
    lines.append("solve()")
    return "\n".join(lines) + "\n"


def answer(messages: Sequence[Mapping[str, str]]) -> str:
    """The scripted answer to a request: a selection answer for one ``system`` message, else a program."""
    if len(messages) == 1 and messages[0].get("role") == "system":
        return selection_answer(messages[0]["content"])
    return PROGRAM_ANSWER
