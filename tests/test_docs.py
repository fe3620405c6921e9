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


#: The pages whose links are checked: the README, every page of docs/ and the experiments' keys.
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "experiments" / "README.md"])
#: ``[text](target)`` and ``![alt](target)`` outside code; the target up to the first space or ``)``.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` removed,
    each space a hyphen (``"From answer to program: `extraction`"`` -> ``from-answer-to-program-extraction``)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(text: str) -> str:
    """``text`` without its fenced code blocks and inline code spans (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def page_anchors(text: str) -> set[str]:
    """The anchors of a Markdown page: one per heading outside code (a repeated heading gets
    ``-1``, ``-2``, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def test_slugs_and_anchors_are_githubs():
    assert slug("From answer to program: `extraction = \"primsel\" | \"aspera\"`") == \
        "from-answer-to-program-extraction--primsel--aspera"
    assert slug("ASPERA's figures") == "asperas-figures"
    assert slug("Reflection rounds: `rounds`, `feedback`, `reselect`") == "reflection-rounds-rounds-feedback-reselect"
    assert page_anchors("# A\n\n## B c\n\n```\n# not a heading\n```\n\n## B c\n") == {"a", "b-c", "b-c-1"}


def test_every_relative_link_and_anchor_of_the_documentation_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT).as_posix()}: {target}"
            if not file.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in page_anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{where} (no such heading)")
            elif ROOT not in file.parents and file != ROOT:
                broken.append(f"{where} (outside the repository)")
    assert broken == []


def test_the_readme_is_short_and_its_quick_start_leads_with_make_run_and_make_test():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    start = readme.split("## Quick start\n", 1)[1]
    first_block = start.split("```\n", 2)[1]
    assert [line.split()[:2] for line in first_block.splitlines()] == [["make", "run"], ["make", "test"]]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run: \$\(STAMP\)$", makefile, re.M) and re.search(r"^test: \$\(STAMP\)$", makefile, re.M)


def test_the_readme_and_the_user_guide_list_every_subcommand():
    from primsel.cli import SUBCOMMANDS

    for page, section in (("README.md", "## Commands\n"), ("docs/user-guide.md", "## Commands\n")):
        table = (ROOT / page).read_text(encoding="utf-8").split(section, 1)[1].split("\n\n", 1)[0]
        listed = re.findall(r"^\| `primsel (\w+)", table, re.M)
        assert sorted(listed) == sorted(SUBCOMMANDS), page


def test_the_documentation_names_no_machine_path():
    assert [p.relative_to(ROOT).as_posix() for p in PAGES
            if re.search(r"(?<![\w.])/(work|home|root|tmp)/", p.read_text(encoding="utf-8"))] == []
