"""Layers point down: every ``import`` statement in primsel names a module of its own layer or
of a lower one, and the packages of one layer (from datasets up to experiments) never import
each other.

The layers, bottom up (docs/architecture.md, "Layers"):

1. core: ``types``, ``checks``, ``registry``, ``spec``, ``files``, ``processes`` (and the package
   itself);
2. data and shared services: ``datasets``, ``library``, ``llm``;
3. stages: ``simulator``, ``retrieval``, ``generation``;
4. evaluation: ``eval`` (metrics, significance, failure attribution);
5. ``experiments``: settings, config, cells, store, runner, report;
6. views: what reads run folders or shows tasks: ``reporting``, ``explore``, ``tasks``;
7. the command line: ``cli``, ``__main__``, every command module ``primsel.cli.SUBCOMMANDS``
   names (wherever it lives), ``testing``, and ``experiments.report`` (the report's former
   module, which re-exports ``reporting`` for old imports).

(Registering the built-in components loads their packages by name at run time; that is the
registry's job, not an import statement.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import primsel
from primsel.cli import SUBCOMMANDS

ROOT = Path(primsel.__file__).parent
LAYERS = (
    ("primsel", "primsel.types", "primsel.checks", "primsel.registry", "primsel.spec", "primsel.files",
     "primsel.processes"),
    ("primsel.datasets", "primsel.library", "primsel.llm"),
    ("primsel.simulator", "primsel.retrieval", "primsel.generation"),
    ("primsel.eval",),
    ("primsel.experiments",),
    ("primsel.reporting", "primsel.explore", "primsel.tasks"),
    ("primsel.cli", "primsel.__main__", "primsel.testing", "primsel.experiments.report"),
)
NAMES = ("core", "data and services", "stages", "evaluation", "experiments", "views", "command line")
TOP = len(LAYERS) - 1
COMMANDS = frozenset(module for module, _, _ in SUBCOMMANDS.values())


def unit(module: str) -> tuple[int, str]:
    """(layer, unit) of a module: the longest unit of :data:`LAYERS` that is it or contains it;
    command modules are units of their own on the top layer."""
    if module in COMMANDS:
        return TOP, module
    best: tuple[int, str] | None = None
    for layer, units in enumerate(LAYERS):
        for name in units:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best[1])):
                best = (layer, name)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every primsel module a syntax tree imports (``from primsel.x import y``
    counts as ``primsel.x.y`` when that is a module)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "primsel"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "primsel":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                path = ROOT.parent.joinpath(*sub.split("."))
                is_module = path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
                out.append((node.lineno, sub if is_module else node.module))
    return list(dict.fromkeys(out))


def violations(module: str, source: str) -> list[str]:
    """The imports of ``module`` (its source text) that point up a layer or across to another
    unit of the same layer (layers 1 to 4)."""
    layer, own = unit(module)
    out = []
    for line, target in imported(ast.parse(source)):
        t_layer, t_unit = unit(target)
        if t_layer > layer:
            out.append(f"{module}:{line} imports {target} ({NAMES[t_layer]}) from the {NAMES[layer]} layer")
        elif t_layer == layer and 0 < layer < TOP and t_unit != own:
            out.append(f"{module}:{line} imports {target}, another package of the {NAMES[layer]} layer")
    return out


def test_every_import_points_down_a_layer():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += violations(module_name(path), path.read_text(encoding="utf-8"))
    assert found == []


@pytest.mark.parametrize(("module", "source", "problem"), [
    ("primsel.retrieval.bm25", "from primsel.experiments import runner\n", "(experiments) from the stages layer"),
    ("primsel.eval.metrics", "import primsel.experiments.runner\n", "(experiments) from the evaluation layer"),
    ("primsel.experiments.runner", "from primsel.reporting import write_report\n", "(views) from the experiments layer"),
    ("primsel.explore.site", "from primsel.reporting.style import Palette\n", "another package of the views layer"),
    ("primsel.types", "def f():\n    from primsel.library import Library\n", "(data and services) from the core layer"),
    ("primsel.retrieval.llm_selector", "from primsel.generation.prompts import render_primitives\n",
     "another package of the stages layer"),
])
def test_an_import_up_or_across_a_layer_is_found(module, source, problem):
    (found,) = violations(module, source)
    assert problem in found


def test_imports_down_and_within_a_unit_pass():
    assert violations("primsel.experiments.cell", "from primsel.retrieval import selector\n"
                                                  "from primsel.experiments.store import Retrieval\n") == []
    assert violations("primsel.simulator.verify", "from primsel.cli import UsageError\n") == []  # a command
