"""Where a failed program departs from the task's reference program.

The program under test and the task's reference program (AEP) are run on the same task, so on
the same initial state (same setup program, same seeded ``random``). Each execution leaves a
*trace* (:attr:`primsel.types.ExecutionResult.trace`: every library call the program made, with
its line and a summary of its arguments) and its *outcomes* (per call of the entry point: how
many trace entries it made, and what it returned or raised). :func:`localise` compares them:

1. Ids generated at run time (uuid4 strings of events, employees, rooms, bookings) differ
   between two executions of the same setup. Each execution's ids are renamed ``<id1>``,
   ``<id2>``, ... in order of first appearance in its trace and outcomes, so the same object
   reached the same way gets the same name in both.
2. The traces are cut into the calls of the entry point (one per (SIP, EP) pair) and compared
   call by call, entry by entry. The first entry that differs decides:

   ===================  ==========================================================  ============
   difference           rule at the first differing entry ``a`` (actual) / ``e``    line
   ===================  ==========================================================  ============
   ``arguments``        same primitive, other arguments                             (a)
   ``order``            ``e`` is made later by the program and ``a`` later by the   (b)
                        reference (the same calls in another order)
   ``extra_call``       ``a`` is not made by the reference from here on             (b)
   ``missing_call``     ``e`` is not made by the program from here on, or the       (b)
                        program's calls ended
   ``return``           every call agrees; the returned value (or the exception)    (c)
                        differs
   ``none``             calls and returned values agree (the effect differs in a    None
                        way the trace does not show, e.g. tables edited directly)
   ===================  ==========================================================  ============

The ``divergence_line`` is the line of the program where its execution departs:

(a) the line of the first argument that differs, inside the call (a call written over several
    lines); when that argument is a variable assigned in the same function, or a library
    record (``Event(...)``) built there, the line of its first differing field or of the
    assignment.
(b) the line of the program's call ``a``; when the program's calls ended, None.
(c) the only ``return`` statement with a value in the entry point, else None.
(d) when the reference program's text is given and the program's lines correspond to it
    (:func:`line_correspondence`: most lines equal, or edited in place), the executed lines of
    the two runs (``ExecutionResult.paths``) are compared through that correspondence too (lines
    without code on the other side left out): if they part before the differing call (or, for
    ``return`` and ``none``, anywhere), or one run stops where the other goes on, the line is the
    last one executed before they part: the branch that went the other way; for a ``for`` loop
    that ran another number of times, the expression that computed what it iterates (followed as
    in (a)). A program unlike the reference gets (a)-(c) only.

Both calls are reported as text (``expected_call``, ``actual_call``): ``module.name(arguments)``
with the renamed ids, or ``return <value>`` / ``raise <Type>: <message>`` for outcomes.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from primsel.eval.source import called_name as _callee
from primsel.eval.source import entry_function, parse
from primsel.types import ExecutionResult

__all__ = ["DIFFERENCES", "Localisation", "line_correspondence", "localise", "normalise_ids", "split_arguments"]

#: Kinds of difference :func:`localise` reports (see the module docstring).
DIFFERENCES = ("arguments", "order", "extra_call", "missing_call", "exception", "return", "none")

#: Least fraction of a program's lines that must match the reference's for rule (d).
PATH_MATCH = 0.6
#: Least similarity (difflib ratio) of an edited line to its counterpart in the reference.
EDITED_LINE = 0.75
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_CODE = re.compile(r"[\w'\"]")
_KEYWORD = re.compile(r"([A-Za-z_]\w*)=(.*)", re.S)
_OPEN, _CLOSE = "([{", ")]}"


@dataclass(frozen=True)
class Localisation:
    """The first difference between a program's execution and the reference's.

    Parameters
    ----------
    difference : one of :data:`DIFFERENCES`.
    divergence_line : 1-based line of the program where it departs, or None.
    expected_call : the reference's call (or outcome) at that point, as text, or None.
    actual_call : the program's call (or outcome) at that point, as text, or None.
    index : position of the differing entry in the program's trace (None for outcomes).
    """

    difference: str
    divergence_line: int | None
    expected_call: str | None
    actual_call: str | None
    index: int | None = None


class _Ids:
    """Renames uuid strings ``<id1>``, ``<id2>``, ... in order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        return _UUID.sub(self._name, text)

    def _name(self, match: re.Match[str]) -> str:
        key = match.group(0).lower()
        if key not in self.names:
            self.names[key] = f"<id{len(self.names) + 1}>"
        return self.names[key]


def normalise_ids(texts: Sequence[str]) -> list[str]:
    """Rename the uuid strings of a sequence of texts (one execution) in order of appearance.

    Parameters
    ----------
    texts : the texts of one execution, in execution order.

    Returns
    -------
    list of texts, uuids replaced by ``<id1>``, ``<id2>``, ... (one name per distinct uuid).
    """
    rename = _Ids()
    return [rename(text) for text in texts]


def _top_level_items(text: str) -> list[str]:
    """The parts of ``text`` between the commas outside brackets and string literals, stripped (an
    empty last part left out)."""
    items, depth, start, quote, i = [], 0, 0, "", 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
        i += 1
    if text[start:].strip():
        items.append(text[start:].strip())
    return items


def split_arguments(text: str) -> list[tuple[str | None, str]]:
    """Split an argument summary ``"a, b, key=c"`` into ``[(None, "a"), (None, "b"), ("key", "c")]``.

    Commas inside brackets and string literals do not split. Returns ``[]`` for ``""``.
    """
    out: list[tuple[str | None, str]] = []
    for item in _top_level_items(text):
        match = _KEYWORD.fullmatch(item)
        out.append((match.group(1), match.group(2)) if match else (None, item))
    return out


def _record(text: str) -> tuple[str, list[tuple[str | None, str]]] | None:
    """``("Event", fields)`` for a record summary ``Event(a=1, ...)``, else None."""
    match = re.fullmatch(r"([A-Za-z_]\w*)\((.*)\)", text, re.S)
    if match is None:
        return None
    return match.group(1), split_arguments(match.group(2))


# -- the traces, renamed and cut per call of the entry point -----------------------------------------


@dataclass(frozen=True)
class _Execution:
    calls: list[list[tuple[str, int | None, str]]]  # per call of the entry point: (id, line, args)
    outcomes: list[tuple[str, str] | None]  # per call: (kind, summary); None: it did not complete
    offsets: list[int]  # index in the whole trace of each call's first entry


def _execution(result: ExecutionResult) -> _Execution:
    """The result's trace cut per call of the entry point, ids renamed in execution order."""
    rename = _Ids()
    trace = list(result.trace)
    calls: list[list[tuple[str, int | None, str]]] = []
    outcomes: list[tuple[str, str] | None] = []
    offsets: list[int] = []
    position = 0
    for count, kind, summary in result.outcomes:
        count = max(int(count), 0)
        offsets.append(position)
        calls.append([(pid, line, rename(args)) for pid, line, args in trace[position:position + count]])
        outcomes.append((kind, rename(summary)))
        position += count
    if position < len(trace) or not calls:  # a call that did not complete (it timed out, or died)
        offsets.append(position)
        calls.append([(pid, line, rename(args)) for pid, line, args in trace[position:]])
        outcomes.append(None)
    return _Execution(calls, outcomes, offsets)


def _call_text(entry: tuple[str, int | None, str] | None) -> str | None:
    return None if entry is None else f"{entry[0]}({entry[2]})"


def _outcome_text(outcome: tuple[str, str] | None) -> str | None:
    return None if outcome is None else f"{outcome[0]} {outcome[1]}"


def localise(program: str, actual: ExecutionResult, reference: ExecutionResult,
             reference_program: str | None = None) -> Localisation:
    """Compare a program's execution with the reference program's on the same task.

    Parameters
    ----------
    program : the program's source (to find lines of arguments and ``return`` statements).
    actual : the program's execution result (``trace``, ``outcomes``, ``paths`` and ``line``
        are read).
    reference : the reference program's execution result on the same task.
    reference_program : the reference program's source; when given and the program's lines
        correspond to it (rule (d) of the module docstring), the executed paths refine the line.

    Returns
    -------
    :class:`Localisation` (see the module docstring for the rules).
    """
    mine, theirs = _execution(actual), _execution(reference)
    tree = parse(program)
    place, segment, agreed = _first_difference(tree, actual, mine, theirs)
    if reference_program is None:
        return place
    mapping = line_correspondence(reference_program, program)
    if mapping is None:
        return place
    # a line without code on one side (blank, a comment, punctuation left by an argument removed
    # from a call written over several lines) runs on the other side only: it is not compared
    blank_ours, blank_theirs = _codeless(program), _codeless(reference_program)
    inverse = {b: a for a, b in mapping.items()}
    segments = [segment] if segment is not None else range(len(actual.paths))
    for s in segments:
        if s < len(actual.paths) and s < len(reference.paths):
            ours = [a for a in actual.paths[s] if mapping.get(a) not in blank_theirs]
            theirs = [b for b in reference.paths[s] if inverse.get(b) not in blank_ours]
            line = _path_divergence(ours, theirs, mapping, inverse, agreed if s == segment else None)
            if line is not None:
                return dataclasses.replace(place, divergence_line=_decided_by(tree, line))
    return place


def _first_difference(tree: ast.Module | None, actual: ExecutionResult, mine: _Execution,
                      theirs: _Execution) -> tuple[Localisation, int | None, int | None]:
    """Rules 2 and (a)-(c): the localisation, the call of the entry point it is in (None: no
    difference) and how many library calls of that call agreed before it (None: all of them)."""
    for segment, a_calls in enumerate(mine.calls):
        e_calls = theirs.calls[segment] if segment < len(theirs.calls) else []
        a_out = mine.outcomes[segment]
        e_out = theirs.outcomes[segment] if segment < len(theirs.outcomes) else None
        for i in range(max(len(a_calls), len(e_calls))):
            a = a_calls[i] if i < len(a_calls) else None
            e = e_calls[i] if i < len(e_calls) else None
            if a is not None and e is not None and (a[0], a[2]) == (e[0], e[2]):
                continue
            if a is None:  # the program's calls ended here
                if a_out is None or a_out[0] == "raise":
                    return Localisation("exception", actual.line, _call_text(e), _outcome_text(a_out)), segment, None
                return Localisation("missing_call", _return_line(tree), _call_text(e), _outcome_text(a_out)), segment, None
            index = mine.offsets[segment] + i
            if e is None:
                return Localisation("extra_call", a[1], _outcome_text(e_out), _call_text(a), index), segment, i
            if a[0] == e[0]:
                line = _argument_line(tree, a, e)
                return Localisation("arguments", line, _call_text(e), _call_text(a), index), segment, i
            later_e = (e[0], e[2]) in [(x[0], x[2]) for x in a_calls[i + 1:]]
            later_a = (a[0], a[2]) in [(x[0], x[2]) for x in e_calls[i + 1:]]
            kind = "order" if later_e and later_a else "extra_call" if later_e else "missing_call"
            return Localisation(kind, a[1], _call_text(e), _call_text(a), index), segment, i
        if a_out != e_out:
            if a_out is None or a_out[0] == "raise":
                return Localisation("exception", actual.line, _outcome_text(e_out), _outcome_text(a_out)), segment, None
            return Localisation("return", _return_line(tree), _outcome_text(e_out), _outcome_text(a_out)), segment, None
    return Localisation("none", None, None, None), None, None


# -- executed paths ------------------------------------------------------------------------------
def line_correspondence(reference_program: str, program: str, least: float = PATH_MATCH) -> dict[int, int] | None:
    """Lines of ``program`` matched to lines of ``reference_program``, when they correspond.

    The two texts are aligned line by line (:class:`difflib.SequenceMatcher` over the stripped
    lines): equal lines match, and so do the lines of a replaced block of the same length on both
    sides, in order, whose texts are similar (similarity ratio at least :data:`EDITED_LINE`: a
    line edited in place keeps its counterpart). The programs correspond when at least ``least``
    of the program's non-blank lines are matched.

    Returns
    -------
    ``{program line: reference line}`` (1-based), or None when they do not correspond.
    """
    ours = [line.strip() for line in program.splitlines()]
    theirs = [line.strip() for line in reference_program.splitlines()]
    mapping: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, theirs, ours, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            mapping.update({j + 1: i + 1 for i, j in zip(range(i1, i2), range(j1, j2))})
        elif tag == "replace" and i2 - i1 == j2 - j1:  # lines edited in place: similar texts
            mapping.update({j + 1: i + 1 for i, j in zip(range(i1, i2), range(j1, j2))
                            if difflib.SequenceMatcher(None, theirs[i], ours[j]).ratio() >= EDITED_LINE})
    code = [n for n, line in enumerate(ours, start=1) if line and not line.startswith("#")]
    matched = sum(1 for n in code if n in mapping)
    return mapping if code and matched >= least * len(code) else None


def _decided_by(tree: ast.Module | None, line: int) -> int:
    """Where the decision taken at ``line`` comes from: for a ``for`` loop (which ran another
    number of times), the expression that computed what it iterates; else ``line``."""
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor)) and n.lineno == line] if tree else []
    return _origin(tree, loops[0].iter, depth=4).lineno if loops else line


def _codeless(source: str) -> set[int]:
    """Lines holding no name, number or string (blank, comments, brackets and commas only)."""
    return {n for n, line in enumerate(source.splitlines(), start=1) if not _CODE.search(line.split("#", 1)[0])}


def _path_divergence(mine: Sequence[int], theirs: Sequence[int], mapping: dict[int, int],
                     inverse: dict[int, int], agreed: int | None) -> int | None:
    """Rule (d): the program line after which the executed lines part, before the program's
    library call number ``agreed`` (None: anywhere); None when they do not part before it, or
    when a line without counterpart on the other side is reached first."""
    calls = 0
    previous = None
    for a, b in zip(mine, theirs):
        if a == 0:
            if agreed is not None and calls >= agreed:
                return None  # the differing call comes first
            calls += 1
        if a == 0 or b == 0:
            if a != b:
                return None  # a call on one side only: the calls tell it
            continue
        if a not in mapping or b not in inverse:
            return None  # a line without counterpart: the runs cannot be compared from here
        if mapping[a] != b:
            return previous if previous is not None else a
        previous = a
    if len(mine) != len(theirs) and (agreed is None or calls < agreed):
        return previous  # one run stopped where the other went on
    return None


# -- lines in the program ------------------------------------------------------------------------
def _return_line(tree: ast.Module | None) -> int | None:
    """Line of the entry point's only ``return`` statement with a value (None if not exactly one)."""
    function = entry_function(tree)
    if function is None:
        return None
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
    return _origin(tree, returns[0].value, depth=4).lineno if len(returns) == 1 else None


def _call_at(tree: ast.Module | None, name: str, line: int | None) -> ast.Call | None:
    if tree is None or line is None:
        return None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line and _callee(n) == name]
    return min(found, key=lambda n: n.col_offset) if found else None


def _argument_line(tree: ast.Module | None, a: tuple[str, int | None, str], e: tuple[str, int | None, str]) -> int | None:
    """Line of the first differing argument of the program's call ``a`` (see rule (a))."""
    call = _call_at(tree, a[0].rsplit(".", 1)[-1], a[1])
    if call is None:
        return a[1]
    line = _differing_line(tree, call, split_arguments(a[2]), split_arguments(e[2]), depth=3)
    return line if line is not None else a[1]


def _differing_line(tree: ast.Module | None, call: ast.Call, mine: list[tuple[str | None, str]],
                    theirs: list[tuple[str | None, str]], depth: int) -> int | None:
    positional_a = [v for k, v in mine if k is None]
    positional_e = [v for k, v in theirs if k is None]
    keywords_a = {k: v for k, v in mine if k is not None}
    keywords_e = {k: v for k, v in theirs if k is not None}
    for index, value in enumerate(positional_a):
        other = positional_e[index] if index < len(positional_e) else None
        if value != other and index < len(call.args) and not isinstance(call.args[index], ast.Starred):
            return _node_line(tree, call.args[index], value, other, depth)
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        value, other = keywords_a.get(keyword.arg), keywords_e.get(keyword.arg)
        if value != other:
            return _node_line(tree, keyword.value, value, other, depth)
    return None


def _node_line(tree: ast.Module | None, node: ast.expr, value: str | None, other: str | None, depth: int) -> int:
    """Line of an argument expression whose value differs, followed into records and variables."""
    if depth <= 0 or value is None or other is None:
        return node.lineno
    mine, theirs = _record(value), _record(other)
    if isinstance(node, ast.Call) and mine is not None and theirs is not None and _callee(node) == mine[0]:
        inner = _differing_line(tree, node, mine[1], theirs[1], depth - 1)
        return inner if inner is not None else node.lineno
    if isinstance(node, ast.Name):
        assigned = _assignment(tree, node)
        if assigned is not None:
            return _node_line(tree, assigned, value, other, depth - 1)
    return _origin(tree, node, depth).lineno


def _origin(tree: ast.Module | None, node: ast.expr, depth: int) -> ast.expr:
    """The expression that computed ``node``'s value: followed back through variables, attribute
    and index access and loop variables (``for x in xs``: ``xs``), at most ``depth`` steps."""
    while depth > 0:
        base = node
        while isinstance(base, (ast.Attribute, ast.Subscript)):
            base = base.value
        if not isinstance(base, ast.Name):
            break
        assigned = _assignment(tree, base)
        if assigned is None:
            break
        node, depth = assigned, depth - 1
    return node


def _assignment(tree: ast.Module | None, use: ast.Name) -> ast.expr | None:
    """The value last bound to ``use``'s name before it in the source: by a plain assignment
    ``name = value``, or as the variable of a ``for`` loop around it (the loop's iterable)."""
    if tree is None:
        return None
    best: tuple[int, ast.expr] | None = None
    for node in ast.walk(tree):
        if node is use or getattr(node, "lineno", use.lineno) >= use.lineno:
            continue
        value: ast.expr | None = None
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == use.id for t in targets):
                value = node.value
        elif isinstance(node, (ast.For, ast.AsyncFor)) and use.lineno <= (node.end_lineno or node.lineno):
            if any(isinstance(t, ast.Name) and t.id == use.id for t in ast.walk(node.target)):
                value = node.iter
        if value is not None and (best is None or node.lineno > best[0]):
            best = (node.lineno, value)
    return best[1] if best else None
