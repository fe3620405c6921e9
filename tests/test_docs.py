"""References from the code to documents resolve inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "primsel").rglob("*.py"), *(ROOT / "tests").rglob("*.py")])
ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: ``(docs/architecture.md, "Folds")``: a reference to a heading or a bold term of the page.
REFERENCE = re.compile(r'docs/architecture\.md, \\?"([^"\\]+)\\?"')


def anchors(text: str) -> set[str]:
    """The headings and bold terms (``**Folds.**``) of a Markdown page."""
    headings = {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", text, re.M)}
    return headings | {m.group(1) for m in re.finditer(r"\*\*([^*]+?)\.?\*\*", text)}


def test_the_references_to_the_architecture_page_name_its_sections():
    known = anchors(ARCHITECTURE.read_text(encoding="utf-8"))
    found = {(path.relative_to(ROOT).as_posix(), m.group(1)) for path in SOURCES
             for m in REFERENCE.finditer(path.read_text(encoding="utf-8"))}
    assert found  # the code does point to the page
    assert sorted((path, name) for path, name in found if name not in known) == []


@pytest.mark.parametrize("outside", ["DESIGN.md", "spec section", "assistant-library spec"])
def test_no_reference_to_a_document_outside_the_repository(outside):
    this = Path(__file__).resolve()
    assert [p.relative_to(ROOT).as_posix() for p in SOURCES
            if p != this and outside in p.read_text(encoding="utf-8")] == []


def test_anchors_are_headings_and_bold_terms():
    assert anchors("# Top\n\n## What a run leaves\n\n- **Folds.** text **k**\n") == {"Top", "What a run leaves", "Folds", "k"}
