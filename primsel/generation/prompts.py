"""Prompts of the generator, rendered from editable template files (:mod:`primsel.llm.templates`).

The packaged generation templates are ``ps`` (program generation from the *selected*
primitives, the PS setting of ASPERA) and ``cck`` (complete codebase knowledge: the same
request, worded for documentation of the whole library; use it with the ``all`` retriever,
which selects every primitive, or call :func:`cck_messages`).

The packaged ``reflect`` template is the turn a reflection round adds after the model's answer:
the feedback on its program and the request for a corrected one (:func:`reflection_turn`;
placeholders ``feedback``, ``function_name``, ``return_annotation``, ``signature``).

Placeholders of generation templates: ``guidelines`` (the task's generation guidelines as a
bulleted list), ``modules`` (the modules shown), ``primitives`` (the stubs,
``Primitive.text("full")``, grouped by module in fenced blocks), ``examples`` (a section of
worked examples, or "" when there are none), ``query``, ``function_name``,
``return_annotation`` and ``signature`` (``def name() -> Return``).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from primsel.llm.templates import PromptTemplate, as_template
from primsel.types import Primitive, Task, task_sort_key

__all__ = [
    "DEFAULT_FUNCTION_NAME",
    "cck_messages",
    "choose_examples",
    "expected_function",
    "generation_messages",
    "reflection_turn",
    "render_primitives",
]

#: Function name asked for when a task has no reference program to take it from.
DEFAULT_FUNCTION_NAME = "fulfil_request"

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from hey i in is it me my of on or please the this to "
    "with you your assistant can could would will".split()
)


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
    return as_template(template).render(values)


def reflection_turn(
    task: Task,
    answer: str,
    feedback: str,
    template: str | os.PathLike[str] | PromptTemplate = "reflect",
) -> list[dict[str, str]]:
    """The messages one reflection round adds to the conversation of ``task``: the model's
    earlier answer (an ``assistant`` message) and the template's messages carrying the feedback.

    Parameters
    ----------
    task : the task (the function name and return annotation asked for).
    answer : the model's answer of the earlier round, as it was received ("(empty answer)" when
        blank, since an empty assistant message is refused by some endpoints).
    feedback : the feedback on that answer's program (:func:`primsel.eval.feedback.feedback_text`).
    template : packaged name (``"reflect"``), path or parsed template.

    Returns
    -------
    ``[{"role": "assistant", ...}, {"role": "user", ...}, ...]``

    Raises
    ------
    ValueError : unknown template or placeholder.
    """
    name, returns = expected_function(task)
    values = {"feedback": feedback.strip(), "function_name": name, "return_annotation": returns,
              "signature": f"def {name}() -> {returns}"}
    said = answer if answer.strip() else "(empty answer)"
    return [{"role": "assistant", "content": said}, *as_template(template).render(values)]


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


# ---------------------------------------------------------------------------------------------
# Few-shot examples
# ---------------------------------------------------------------------------------------------
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
    everyone = sorted((t for t in pool if t.program.strip()), key=lambda t: task_sort_key(t.id))
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
