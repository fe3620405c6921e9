"""Layers point down: every ``import`` statement in primsel names a module of its own layer or
of a lower one, and the packages of one layer (from datasets up to views) never import each
other.

The layers, bottom up (docs/architecture.md, "Layers"):

1. core: ``types``, ``checks``, ``registry``, ``spec``, ``files``, ``processes``, ``progress`` (and
   the package itself);
2. data and shared services: ``aspera``, ``datasets``, ``library``, ``llm``;
3. stages: ``simulator``, ``retrieval``, ``generation``;
4. evaluation: ``eval`` (metrics, significance, failure attribution);
5. ``experiments``: settings, config, cells, reflection, runner, results;
6. views: what reads run folders or shows tasks: ``reporting``, ``explore``, ``tasks``;
7. the command line: ``commands`` (the dispatcher and every subcommand), ``cli`` and
   ``__main__`` (its entry points), ``testing``, and ``api`` (the same work as functions).

A folder tells its layer: no module is exempt. Loading a module by name counts as importing it:
a call of ``importlib.import_module`` (or ``import_module``, ``__import__``) whose first
argument is a string or an f-string naming a primsel module (its constant start, with
module-level string constants filled in: ``f"{APPS_PACKAGE}.{name}"``) is checked as an
``import`` of that module. So the simulator loading its own app modules, ``eval`` loading
them (a layer down), and a package loading the modules of its own folder (``primsel.datasets``
imports every module it holds, ``f"{__name__}.{name}"``, so that their loaders are
registered) pass: a load within one unit is no arrow between layers, and it is checked like
any other, so the same package loading another package's modules by name is found. Names held in variables are not followed: the registry loads the
packages of the built-in components from its table (``primsel.registry``), which is how
plug-ins are found, not an arrow between layers, and the dispatcher loads the subcommand modules
of its own package.

A package may load its own modules: ``import_module(f"{__name__}.{name}")`` in a package's
``__init__.py`` (``primsel.datasets`` importing every module of its folder, the loaders of
retrieval-only data) is checked as an import of each module in that folder. Those lie inside
the package's unit, so the load passes, unless the folder holds a unit of a higher layer: then
it is an arrow up like any other.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import primsel

ROOT = Path(primsel.__file__).parent
LAYERS = (
    ("primsel", "primsel.types", "primsel.checks", "primsel.registry", "primsel.spec", "primsel.files",
     "primsel.processes", "primsel.progress"),
    ("primsel.aspera", "primsel.datasets", "primsel.library", "primsel.llm"),
    ("primsel.simulator", "primsel.retrieval", "primsel.generation"),
    ("primsel.eval",),
    ("primsel.experiments",),
    ("primsel.reporting", "primsel.explore", "primsel.tasks"),
    ("primsel.commands", "primsel.cli", "primsel.__main__", "primsel.testing", "primsel.api"),
)
NAMES = ("core", "data and services", "stages", "evaluation", "experiments", "views", "command line")
TOP = len(LAYERS) - 1
#: Functions that load a module by name.
LOADERS = frozenset({"import_module", "__import__"})


def unit(module: str) -> tuple[int, str]:
    """(layer, unit) of a module: the longest unit of :data:`LAYERS` that is it or contains it."""
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


def imported(tree: ast.AST, module: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every primsel module a syntax tree imports (``from primsel.x import y``
    counts as ``primsel.x.y`` when that is a module) or loads by a name written in the code
    (:func:`loaded`; ``module``, the tree's own name, fills in ``__name__``)."""
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
    return list(dict.fromkeys(out + loaded(tree, module)))


def loaded(tree: ast.AST, module: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every call of a :data:`LOADERS` function whose first argument names a
    primsel module: a string, or the constant start of an f-string (module-level string
    constants filled in, and ``__name__`` when the tree's own ``module`` name is given), cut
    after its last whole dotted name."""
    constants = {target.id: node.value.value for node in getattr(tree, "body", [])
                 if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                 and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}
    if module is not None:
        constants["__name__"] = module
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name not in LOADERS:
            continue
        text = _constant_start(node.args[0], constants)
        if text is None:
            continue
        whole = text.endswith(".") or not isinstance(node.args[0], ast.JoinedStr) or text == _full(node.args[0], constants)
        module = text.rstrip(".") if whole else text.rpartition(".")[0]
        if module.split(".")[0] == "primsel":
            out.append((node.lineno, module))
    return out


def _constant_start(arg: ast.AST, constants: dict[str, str]) -> str | None:
    """The text an argument starts with, as far as the code alone tells it; None when nothing."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if not isinstance(arg, ast.JoinedStr):
        return None
    text = ""
    for part in arg.values:
        if isinstance(part, ast.Constant):
            text += str(part.value)
        elif isinstance(part.value, ast.Name) and part.value.id in constants and part.format_spec is None \
                and part.conversion == -1:
            text += constants[part.value.id]
        else:
            break
    return text or None


def _full(arg: ast.JoinedStr, constants: dict[str, str]) -> str | None:
    """The whole text of an f-string whose every part is known, else None."""
    known = all(isinstance(p, ast.Constant) or (isinstance(p.value, ast.Name) and p.value.id in constants)
                for p in arg.values)
    return _constant_start(arg, constants) if known else None


def violations(module: str, source: str) -> list[str]:
    """The imports of ``module`` (its source text) that point up a layer or across to another
    unit of the same layer (layers 1 to 4)."""
    layer, own = unit(module)
    out = []
    for line, loads in imported(ast.parse(source), module):
        # a load of the module itself is a package loading its own modules by f"{__name__}.{name}"
        for target in own_modules(module) if loads == module else [loads]:
            t_layer, t_unit = unit(target)
            if t_layer > layer:
                out.append(f"{module}:{line} imports {target} ({NAMES[t_layer]}) from the {NAMES[layer]} layer")
            elif t_layer == layer and 0 < layer < TOP and t_unit != own:
                out.append(f"{module}:{line} imports {target}, another package of the {NAMES[layer]} layer")
    return out


def own_modules(package: str) -> list[str]:
    """The modules and packages in the folder of a primsel package, sorted (none for a module)."""
    folder = ROOT.parent.joinpath(*package.split("."))
    return sorted(f"{package}.{info.name}" for info in pkgutil.iter_modules([str(folder)])) if folder.is_dir() else []


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
    ("primsel.simulator.verify", "from primsel.commands.common import UsageError\n",
     "(command line) from the stages layer"),
    ("primsel.experiments.cell", "from primsel.cli import main\n", "(command line) from the experiments layer"),
    ("primsel.library", "import importlib\nm = importlib.import_module('primsel.simulator.apps.time_utils')\n",
     "imports primsel.simulator.apps.time_utils (stages) from the data and services layer"),
    ("primsel.library", 'PACKAGE = "primsel.simulator.apps"\n'
                        'def f(name):\n    return importlib.import_module(f"{PACKAGE}.{name}")\n',
     "imports primsel.simulator.apps (stages) from the data and services layer"),
    ("primsel.datasets.beir", "from importlib import import_module\nimport_module(f'primsel.retrieval.{x}')\n",
     "imports primsel.retrieval (stages) from the data and services layer"),
    ("primsel.retrieval.bm25", "__import__('primsel.generation.prompts')\n", "another package of the stages layer"),
])
def test_an_import_up_or_across_a_layer_is_found(module, source, problem):
    (found,) = violations(module, source)
    assert problem in found


def test_imports_down_and_within_a_unit_pass():
    assert violations("primsel.experiments.cell", "from primsel.retrieval import selector\n"
                                                  "from primsel.retrieval.store import Retrieval\n") == []
    assert violations("primsel.commands.verify", "from primsel.commands.common import UsageError\n"
                                                 "from primsel.simulator.verify import ROW_KEYS\n") == []
    assert violations("primsel.simulator.program",
                      'import importlib\nimportlib.import_module(f"primsel.simulator.apps.{name}")\n') == []
    assert violations("primsel.eval.attribution",
                      'import importlib\nimportlib.import_module(f"primsel.simulator.apps.{module}")\n') == []
    # a name held in a variable is not followed (the registry's table of built-in packages)
    assert violations("primsel.registry", "import importlib\nimportlib.import_module(PACKAGES[kind])\n") == []


DISCOVERY = ('import importlib\nimport pkgutil\n'
             'for info in pkgutil.iter_modules(__path__):\n'
             '    importlib.import_module(f"{__name__}.{info.name}")\n')


def test_a_package_may_load_its_own_modules_unless_one_is_a_unit_of_a_higher_layer(monkeypatch):
    assert loaded(ast.parse(DISCOVERY)) == []  # without the module's own name, __name__ is unknown
    assert loaded(ast.parse(DISCOVERY), "primsel.datasets") == [(4, "primsel.datasets")]
    assert "primsel.datasets.beir" in own_modules("primsel.datasets") and own_modules("primsel.datasets.beir") == []
    assert violations("primsel.datasets", DISCOVERY) == []
    assert violations("primsel.experiments", DISCOVERY) == []
    # a module of experiments/ counted in the command line: loading it is an arrow up
    monkeypatch.setitem(globals(), "LAYERS", (*LAYERS[:-1], (*LAYERS[-1], "primsel.experiments.runner")))
    assert violations("primsel.experiments", DISCOVERY) == [
        "primsel.experiments:4 imports primsel.experiments.runner (command line) from the experiments layer"]


def test_a_package_may_load_the_modules_of_its_own_folder_by_name():
    source = 'import importlib\nimportlib.import_module(f"primsel.retrieval.{name}")\n'
    assert [module for _, module in loaded(ast.parse(source))] == ["primsel.retrieval"]  # the load is read
    assert violations("primsel.retrieval", source) == []
    (found,) = violations("primsel.retrieval",
                          'import importlib\nimportlib.import_module(f"primsel.generation.{name}")\n')
    assert "imports primsel.generation, another package of the stages layer" in found
    (found,) = violations("primsel.retrieval",
                          'import importlib\nimportlib.import_module(f"primsel.experiments.{name}")\n')
    assert "imports primsel.experiments (experiments) from the stages layer" in found


def test_a_load_by_name_is_read_to_its_last_whole_module_name():
    source = ('import importlib\nAPPS = "primsel.simulator.apps"\n'
              'importlib.import_module("primsel.eval.metrics")\n'
              'importlib.import_module(f"{APPS}.{name}")\n'
              'importlib.import_module(f"primsel.simulator.{group}.{name}")\n'
              'importlib.import_module(f"primsel.retr{rest}")\n'
              'importlib.import_module(f"{APPS}")\n'
              'importlib.import_module(f"{unknown}.x")\n'
              'importlib.import_module("json")\n')
    assert loaded(ast.parse(source)) == [(3, "primsel.eval.metrics"), (4, "primsel.simulator.apps"),
                                         (5, "primsel.simulator"), (6, "primsel"), (7, "primsel.simulator.apps")]


def test_every_unit_of_the_layers_is_a_module_or_package():
    for units in LAYERS:
        for name in units:
            path = ROOT.parent.joinpath(*name.split("."))
            assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), name
