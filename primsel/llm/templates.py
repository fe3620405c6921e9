"""Prompt templates: chat messages with placeholders, read from editable text files.

A template is a text file split into chat messages by header lines ``=== system ===``,
``=== user ===`` and ``=== assistant ===``; text before the first header is a comment and is
ignored. Placeholders use :class:`string.Template` syntax (``${query}``; write ``$$`` for a
literal dollar sign); an unknown placeholder is an error. The packaged templates live in
``primsel/llm/templates``:

``ps``      program generation from the *selected* primitives (the PS setting of ASPERA;
            :mod:`primsel.generation.prompts`).
``cck``     program generation with complete codebase knowledge: the same request, worded for
            documentation of the whole library.
``select``  one module's documentation and the request; asks for a JSON list of symbol names
            (the LLM selector, :mod:`primsel.retrieval.llm_selector`).
``reflect`` the feedback on a failed program and the request for a corrected one (reflection
            rounds, :func:`primsel.generation.prompts.reflection_turn`).

A configuration's ``template`` value is a packaged name (``"ps"``) or a file path (absolute or
relative to the working directory); copy a packaged file to start a variant.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["PromptTemplate", "load_template", "packaged_templates", "as_template"]

#: Roles a template section may have.
ROLES = ("system", "user", "assistant")

_HEADER = re.compile(r"^=== (system|user|assistant) ===[ \t]*$", re.MULTILINE)


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
    """Names of the templates shipped with primsel (``cck``, ``ps``, ``reflect``, ``select``)."""
    folder = resources.files("primsel.llm") / "templates"
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
        resource = resources.files("primsel.llm") / "templates" / f"{text_spec}.txt"
        if resource.is_file():
            return PromptTemplate.parse(resource.read_text(encoding="utf-8"), name=text_spec)
    path = Path(text_spec).expanduser()
    if path.is_file():
        return PromptTemplate.parse(path.read_text(encoding="utf-8"), name=str(path))
    raise ValueError(
        f"template {text_spec!r} is neither a packaged template ({', '.join(packaged_templates())}) nor a readable file"
    )


def as_template(template: str | os.PathLike[str] | PromptTemplate) -> PromptTemplate:
    """``template`` itself when parsed already, else :func:`load_template` of it."""
    return template if isinstance(template, PromptTemplate) else load_template(template)
