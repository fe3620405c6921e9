"""Prompts of the generator and of the LLM selector, rendered from editable template files.

Template files
--------------
A template is a text file split into chat messages by header lines ``=== system ===``,
``=== user ===`` and ``=== assistant ===``; text before the first header is a comment and is
ignored. Placeholders use :class:`string.Template` syntax (``${query}``; write ``$$`` for a
literal dollar sign); an unknown placeholder is an error. The packaged templates live in
``primsel/generation/templates``:

``ps``      program generation from the *selected* primitives (the PS setting of ASPERA).
``cck``     program generation with complete codebase knowledge: the same request, worded for
            documentation of the whole library. Use it with the ``all`` retriever, which
            selects every primitive, or call :func:`cck_messages`.
``select``  one module's documentation and the request; asks for a JSON list of symbol names
            (the LLM selector, ASPERA's primitive-selection agent).

A configuration's ``template`` value is a packaged name (``"ps"``) or a file path (absolute or
relative to the working directory); copy a packaged file to start a variant.

Placeholders of generation templates: ``guidelines`` (the task's generation guidelines as a
bulleted list), ``modules`` (the modules shown), ``primitives`` (the stubs,
``Primitive.text("full")``, grouped by module in fenced blocks), ``examples`` (a section of
worked examples, or "" when there are none), ``query``, ``function_name``,
``return_annotation`` and ``signature`` (``def name() -> Return``). Selection templates get
``module``, ``primitives``, ``names`` (the module's symbol names), ``example_name`` and ``query``.
"""

from __future__ import annotations

import os
import random
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from primsel.types import Primitive, Task

__all__ = [
    "DEFAULT_FUNCTION_NAME",
    "PromptTemplate",
    "cck_messages",
    "choose_examples",
    "expected_function",
    "generation_messages",
    "load_template",
    "packaged_templates",
    "render_primitives",
    "selection_messages",
]

#: Function name asked for when a task has no reference program to take it from.
DEFAULT_FUNCTION_NAME = "fulfil_request"
#: Roles a template section may have.
ROLES = ("system", "user", "assistant")

_HEADER = re.compile(r"^=== (system|user|assistant) ===[ \t]*$", re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from hey i in is it me my of on or please the this to "
    "with you your assistant can could would will".split()
)


@dataclass(frozen=True)
class PromptTemplate:
    """A parsed template: chat messages with ``string.Template`` placeholders.

    Parameters
    ----------
    name : the packaged name or the file path it was read from.
    sections : ``((role, text), ...)`` in message order.
    """

    name: str
    sections: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str, name: str = "<template>") -> PromptTemplate:
        """Split template text into messages.

        Raises
        ------
        ValueError : no ``=== role ===`` header, or an empty message.
        """
        headers = list(_HEADER.finditer(text))
        if not headers:
            raise ValueError(f"template {name}: no '=== system ===' or '=== user ===' header line")
        sections = []
        for i, match in enumerate(headers):
            end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
            body = text[match.end():end].strip("\n")
            if not body.strip():
                raise ValueError(f"template {name}: empty {match.group(1)} message")
            sections.append((match.group(1), body))
        return cls(name=name, sections=tuple(sections))

    @property
    def placeholders(self) -> frozenset[str]:
        """Names of the placeholders the template uses."""
        names: set[str] = set()
        for _, body in self.sections:
            for match in string.Template.pattern.finditer(body):
                name = match.group("named") or match.group("braced")
                if name:
                    names.add(name)
        return frozenset(names)

    def render(self, values: Mapping[str, str]) -> list[dict[str, str]]:
        """The chat messages with placeholders filled.

        Raises
        ------
        ValueError : a placeholder has no value (the message names it and the template).
        """
        messages = []
        for role, body in self.sections:
            try:
                content = string.Template(body).substitute(values)
            except KeyError as exc:
                known = ", ".join(sorted(values))
                raise ValueError(f"template {self.name}: unknown placeholder ${{{exc.args[0]}}}; known: {known}") from None
            except ValueError as exc:
                raise ValueError(f"template {self.name}: {exc} (write $$ for a literal $)") from None
            messages.append({"role": role, "content": content.strip("\n")})
        return messages


def packaged_templates() -> list[str]:
    """Names of the templates shipped with primsel (``cck``, ``ps``, ``select``)."""
    folder = resources.files("primsel.generation") / "templates"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".txt"))


def load_template(spec: str | os.PathLike[str]) -> PromptTemplate:
    """Load a template by packaged name or file path.

    Parameters
    ----------
    spec : ``"ps"``, ``"cck"``, ``"select"``, or a path to a template file.

    Raises
    ------
    ValueError : neither a packaged name nor a readable file (the message lists the names),
        or a malformed template.
    """
    text_spec = os.fspath(spec)
    looks_like_path = os.sep in text_spec or "/" in text_spec or text_spec.endswith(".txt")
    if not looks_like_path:
        resource = resources.files("primsel.generation") / "templates" / f"{text_spec}.txt"
        if resource.is_file():
            return PromptTemplate.parse(resource.read_text(encoding="utf-8"), name=text_spec)
    path = Path(text_spec).expanduser()
    if path.is_file():
        return PromptTemplate.parse(path.read_text(encoding="utf-8"), name=str(path))
    raise ValueError(
        f"template {text_spec!r} is neither a packaged template ({', '.join(packaged_templates())}) nor a readable file"
    )


def _as_template(template: str | os.PathLike[str] | PromptTemplate) -> PromptTemplate:
    return template if isinstance(template, PromptTemplate) else load_template(template)


# ---------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------
def render_primitives(docs: Sequence[Primitive], module_order: Sequence[str] = ()) -> tuple[str, list[str]]:
    """The stubs of ``docs`` grouped by module, each module in one fenced ``python`` block.

    Parameters
    ----------
    docs : primitives to show; within a module they keep the given order.
    module_order : module names in the order to show them; modules not listed follow in order
        of first appearance in ``docs``.

    Returns
    -------
    (text, modules shown in order). The text is "(none)" when ``docs`` is empty.
    """
    grouped: dict[str, list[Primitive]] = {}
    for p in docs:
        grouped.setdefault(p.module, []).append(p)
    order = [m for m in module_order if m in grouped] + [m for m in grouped if m not in module_order]
    parts = []
    for module in order:
        stubs = "\n\n".join(p.text("full") for p in grouped[module])
        parts.append(f"Module `{module}`:\n```python\n{stubs}\n```")
    return ("\n\n".join(parts) if parts else "(none)"), order


def _guidelines(task: Task) -> str:
    guidelines = (task.scenario.get("guidelines") or {}).get("generation_labelling") or ()
    if isinstance(guidelines, str):
        guidelines = [guidelines]
    lines = [f"- {g.strip()}" for g in guidelines if str(g).strip()]
    return "\n".join(lines) if lines else "- (no task-specific rules)"


def expected_function(task: Task) -> tuple[str, str]:
    """(function name, return annotation) a prompt asks for.

    The name is the reference program's entry point (:attr:`Task.entry_point`), else
    :data:`DEFAULT_FUNCTION_NAME`; the annotation is the reference's return annotation as
    source text, else ``"None"``.
    """
    return task.entry_point or DEFAULT_FUNCTION_NAME, task.return_annotation or "None"


def _examples(examples: Sequence[Task]) -> str:
    if not examples:
        return ""
    blocks = [f"Request: {ex.query}\n```python\n{ex.program.strip()}\n```" for ex in examples]
    noun = "an example" if len(examples) == 1 else "examples"
    return f"\nHere is {noun} of a request and a program that fulfils it:\n\n" + "\n\n".join(blocks) + "\n"


def generation_messages(
    task: Task,
    docs: Sequence[Primitive],
    examples: Sequence[Task] = (),
    template: str | os.PathLike[str] | PromptTemplate = "ps",
    module_order: Sequence[str] = (),
) -> list[dict[str, str]]:
    """Chat messages asking for the program of ``task`` from the documentation ``docs``.

    Parameters
    ----------
    task : the task (its query, generation guidelines, and the entry point name and return
        annotation of its reference program).
    docs : the primitives shown, as stubs (``Primitive.text("full")``).
    examples : worked examples (query and reference program), e.g. from
        :func:`choose_examples`; never the task itself.
    template : packaged name, path or parsed template.
    module_order : module display order (default: order of first appearance in ``docs``).

    Returns
    -------
    ``[{"role": ..., "content": ...}, ...]``

    Raises
    ------
    ValueError : unknown template or placeholder; an example that is the task itself.
    """
    if any(ex.id == task.id for ex in examples):
        raise ValueError(f"task {task.id} cannot be its own example")
    primitives, modules = render_primitives(docs, module_order)
    name, returns = expected_function(task)
    values = {
        "guidelines": _guidelines(task),
        "modules": ", ".join(modules) if modules else "none",
        "primitives": primitives,
        "examples": _examples(examples),
        "query": task.query.strip(),
        "function_name": name,
        "return_annotation": returns,
        "signature": f"def {name}() -> {returns}",
    }
    return _as_template(template).render(values)


def cck_messages(
    task: Task,
    library: Mapping[str, Primitive],
    examples: Sequence[Task] = (),
    template: str | os.PathLike[str] | PromptTemplate = "cck",
) -> list[dict[str, str]]:
    """Generation messages showing every primitive of ``library`` (complete codebase knowledge).

    Same as :func:`generation_messages` with ``docs`` = the whole library in library order.
    """
    prims = list(library.values())
    order = list(dict.fromkeys(p.module for p in prims))
    return generation_messages(task, prims, examples, template, order)


def selection_messages(
    query: str,
    module: str,
    docs: Sequence[Primitive],
    template: str | os.PathLike[str] | PromptTemplate = "select",
) -> list[dict[str, str]]:
    """Chat messages asking which primitives of one module a request needs.

    Parameters
    ----------
    query : the user's request.
    module : the module's short name (``"work_calendar"``).
    docs : the module's primitives, in library order.
    template : packaged name, path or parsed template.

    Raises
    ------
    ValueError : empty ``docs``; unknown template or placeholder.
    """
    if not docs:
        raise ValueError(f"module {module!r} has no primitives to show")
    stubs = "\n\n".join(p.text("full") for p in docs)
    example = next((p.name for p in docs if p.kind == "function"), docs[0].name)
    values = {
        "module": module,
        "primitives": f"```python\n{stubs}\n```",
        "names": ", ".join(p.name for p in docs),
        "example_name": example,
        "query": query.strip(),
    }
    return _as_template(template).render(values)


# ---------------------------------------------------------------------------------------------
# Few-shot examples
# ---------------------------------------------------------------------------------------------
def _sort_key(task_id: str) -> tuple[int, int, str]:
    return (0, int(task_id), "") if task_id.isdigit() else (1, 0, task_id)


@lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def choose_examples(
    task: Task,
    pool: Iterable[Task],
    n: int,
    method: str = "similar",
    seed: int = 0,
) -> list[Task]:
    """Pick ``n`` worked examples for ``task`` from ``pool`` (never ``task`` itself).

    Parameters
    ----------
    task : the task being prompted.
    pool : candidate examples: the training folds' tasks (or the built-in tasks). Tasks with
        an empty reference program are skipped.
    n : number of examples, >= 0.
    method : ``"similar"``: the pool tasks whose queries share most words with the task's
        query (Jaccard similarity of lower-cased word sets without common stop words; ties by
        task id, numeric ids in numeric order); ``"fixed"``: the same tasks for every query,
        the first ``n`` of the pool shuffled with ``random.Random(seed)`` (the task itself is
        skipped).
    seed : seed of the ``"fixed"`` shuffle.

    Returns
    -------
    Up to ``n`` tasks, most similar first (``"similar"``) or in shuffled order (``"fixed"``).

    Raises
    ------
    ValueError : n < 0 or an unknown method.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"the number of examples must be an integer >= 0, got {n!r}")
    if method not in ("similar", "fixed"):
        raise ValueError(f"unknown example selection {method!r}; expected 'similar' or 'fixed'")
    everyone = sorted((t for t in pool if t.program.strip()), key=lambda t: _sort_key(t.id))
    if method == "fixed":
        random.Random(seed).shuffle(everyone)
        return [t for t in everyone if t.id != task.id][:n]
    candidates = [t for t in everyone if t.id != task.id]
    if n == 0 or not candidates:
        return []
    target = _words(task.query)

    def similarity(other: Task) -> float:
        words = _words(other.query)
        union = target | words
        return len(target & words) / len(union) if union else 0.0

    scored = [(-similarity(t), i) for i, t in enumerate(candidates)]
    scored.sort()
    return [candidates[i] for _, i in scored[:n]]
