"""The process that renders ASPERA's requests with ASPERA's own code (run as ``python -m primsel.aspera.worker SRC``).

ASPERA's agents build their prompts with ``inspect`` on the imported ``aspera.apps`` modules: source text, line
numbers, the members of each module, and, for type aliases, a search through every module loaded in the process
for the object (``get_source_code_for_symbols_used_in_program`` in ``src/aspera/code_utils/utils.py``). That search
finds the first module in ``sys.modules`` holding an equal ``Literal[...]`` object, so the same call gives another
answer in a process that has loaded primsel's simulated apps (which define equal aliases) before ASPERA's. This
process therefore loads nothing of primsel but this module and :mod:`primsel.aspera.source`, then ASPERA's
``aspera.apps``, ``aspera.code_utils``, ``aspera.parser`` and ``aspera.prompting.*_templates`` modules from the
checkout, as a bare package: ASPERA's ``aspera/__init__.py`` (OmegaConf resolvers, a ``sys.path`` entry) is not
run, and neither its completers nor its agents are imported.

What is ASPERA's code here: the documentation stubs and worked examples (``inspect.getsource`` of the modules),
the import remover, the symbol finder (substring rule), the symbol de-duplication and sort, the symbol-to-source
walk of the PS generation prompt, the answer parser of the selection answers and the return-type extractor, and
the three prompt templates. What is primsel's (written from ``src/aspera/agent/*.py`` and
``src/aspera/prompting/*_prompts.py``): which of those are called with what, in which order, and the jinja2
rendering (``Environment()`` defaults: the final line break of every message dropped).

Protocol: one JSON object per line on stdin, ``{"op": NAME, ...}``; one JSON object per line on stdout, the result
``{"ok": RESULT}`` or ``{"error": MESSAGE}``. The operations are the methods ``op_*`` of :class:`Renderer`.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import logging
import sys
import types
from pathlib import Path
from typing import Any

from primsel.aspera.source import DENY_LIST, GUIDELINES_FILE, check_source

#: ASPERA's agent parser (``src/aspera/configs/agent/parser/default.yaml``): find the program, drop module-level
#: calls, split into import blocks and functions.
_PARSER_STEPS = ("ProgramStringFinder", "RemoveModuleLevelFunctionCalls")


def _memoise_inspect() -> None:
    """Make ``inspect.getmembers`` of a module and ``inspect.getsourcelines`` remember their answers in this process.

    ASPERA's documentation walk calls them thousands of times per request on the same objects (every member of
    every loaded module, for each type alias; the source lines of each symbol, to sort them): about 5 s a request
    unremembered, under 0.1 s remembered. In this process nothing changes a module or a source file once ASPERA's
    modules are loaded, so a remembered answer is the answer (an error, ``inspect``'s way of saying an enum built by
    a call or a type alias has no source, is raised anew each time as the same error); tests/aspera compare the
    requests with ASPERA's own agents'.
    """
    getmembers, getsourcelines = inspect.getmembers, inspect.getsourcelines
    members: dict[tuple[int, Any], tuple[Any, list[tuple[str, Any]]]] = {}
    lines: dict[int, tuple[Any, tuple[list[str], int] | Exception]] = {}

    def remembered_members(obj: Any, predicate: Any = None) -> list[tuple[str, Any]]:
        if not inspect.ismodule(obj):
            return getmembers(obj, predicate)
        key = (id(obj), predicate)
        if key not in members:
            members[key] = (obj, getmembers(obj, predicate))
        return list(members[key][1])

    def remembered_lines(obj: Any) -> tuple[list[str], int]:
        key = id(obj)
        if key not in lines or lines[key][0] is not obj:
            try:
                lines[key] = (obj, getsourcelines(obj))
            except (OSError, TypeError) as exc:
                lines[key] = (obj, exc)
        answer = lines[key][1]
        if isinstance(answer, Exception):
            raise type(answer)(*answer.args)
        source, number = answer
        return list(source), number

    inspect.getmembers = remembered_members
    inspect.getsourcelines = remembered_lines


def _load_package(package_dir: Path) -> types.ModuleType:
    """Register ``aspera`` as a bare package whose modules are those of ``package_dir`` (its ``__init__`` unrun)."""
    spec = importlib.machinery.ModuleSpec("aspera", loader=None, is_package=True)
    spec.submodule_search_locations = [str(package_dir)]
    package = importlib.util.module_from_spec(spec)
    sys.modules["aspera"] = package
    return package


class Renderer:
    """ASPERA's prompt machinery, loaded from a checkout. Each ``op_*`` method is one worker operation.

    Parameters
    ----------
    root : the checkout of apple/ml-aspera (the folder holding ``src/aspera``).

    Raises
    ------
    primsel.aspera.source.AsperaSourceError : the checkout lacks a file ASPERA's agents read.
    ImportError : ASPERA's modules fail to import (a dependency missing, another ``aspera`` already loaded).
    """

    def __init__(self, root: Path) -> None:
        package_dir = check_source(root)
        if "aspera" in sys.modules:
            raise ImportError("another module named 'aspera' is already loaded in this process")
        _memoise_inspect()
        _load_package(package_dir)
        # ASPERA logs a warning for every candidate block that does not parse; the agent runs would drown in them
        logging.getLogger("aspera").setLevel(logging.ERROR)
        self.utils = importlib.import_module("aspera.code_utils.utils")
        self.symbols = importlib.import_module("aspera.code_utils.code_symbol")
        self.parser = importlib.import_module("aspera.parser")
        self.apps = importlib.import_module("aspera.apps")
        self.constants = importlib.import_module("aspera.constants")
        system = importlib.import_module("aspera.prompting.system_turn_templates")
        user = importlib.import_module("aspera.prompting.user_turn_templates")
        selection = importlib.import_module("aspera.prompting.primitives_selection_templates")
        import jinja2
        import yaml

        environment = jinja2.Environment()
        self.system_template = environment.from_string(system.agent_system_turn_with_guidelines())
        self.user_template = environment.from_string(user.agent_user_turn_with_return_type_instruction())
        self.selection_template = environment.from_string(selection.agent_primitives_selection_template())
        with open(package_dir / GUIDELINES_FILE, encoding="utf-8") as fh:
            self.guidelines = list(yaml.safe_load(fh)["generation_labelling"])
        processors = [getattr(self.parser, name)() for name in _PARSER_STEPS]
        self.answer_parser = self.parser.ProgramParserWithImportHandling(
            preprocessor=self.parser.PipelineProcessor(processors=processors))
        self.selection_modules = [m for m in self.apps.module_names if m not in DENY_LIST]
        self._examples: dict[tuple[str, ...], tuple[str, list[Any]]] = {}

    # -- pieces shared by the agents ------------------------------------------------------------------------
    def _module(self, app: str) -> str:
        return f"{self.constants.APP_DOCS_ROOT}.{app}"

    def _examples_code(self, query_solution: list[str]) -> tuple[str, list[Any]]:
        """The worked examples as the system turn shows them, and the symbols they use (cached per module list)."""
        key = tuple(query_solution)
        if key not in self._examples:
            modules = [f"{self.constants.EXAMPLES_ROOT}.{m}" for m in query_solution]
            code = [self.utils.remove_import_statements(s) for s in self.utils.get_source_code_for_apps(modules)]
            text = "\n".join(code)
            self._examples[key] = (text, self.utils.get_apps_symbols_from_program(text))
        return self._examples[key]

    def _system(self, code: str, query_solution: list[str]) -> dict[str, str]:
        examples, _ = self._examples_code(query_solution)
        content = self.system_template.render(code=code, query_solution_examples=examples,
                                              guidelines={"generation_labelling": self.guidelines})
        return {"role": "system", "content": content}

    def _user(self, query: str, program: str) -> dict[str, str]:
        return_type = self.parser.ExtractFunctionReturnType()(program)
        return {"role": "user", "content": self.user_template.render(queries=[query], return_type=return_type)}

    def _universe_first(self) -> dict[str, Any]:
        """Name -> the first symbol of that name among all of ``aspera.apps`` (the one ASPERA's de-duplication keeps)."""
        first: dict[str, Any] = {}
        for symbol in self.utils._get_all_aspera_symbols():
            first.setdefault(symbol.obj_name, symbol)
        return first

    # -- operations -----------------------------------------------------------------------------------------
    def op_hello(self) -> dict[str, Any]:
        """The modules a PS agent asks about, in order, and the worked examples' modules of the tasks."""
        return {"selection_modules": self.selection_modules}

    def op_cck(self, query: str, apps: list[str], query_solution: list[str], program: str) -> list[dict[str, str]]:
        """The CCK agent's messages (``complete_codebase_knowledge.py`` with ``SystemTurnTemplate._get_code``)."""
        sources = self.utils.get_source_code_for_apps([self._module(app) for app in apps])
        code = "".join(self.utils.make_prompt_code_string(app, self.utils.remove_import_statements(source))
                       for source, app in zip(sources, apps))
        return [self._system(code.strip(), query_solution), self._user(query, program)]

    def op_selection(self, query: str) -> list[list[dict[str, str]]]:
        """The PS agent's selection requests, one per module (``_make_messages_for_primitives_selection``)."""
        out = []
        for module in self.selection_modules:
            dotted = self._module(module)
            source = self.utils.get_source_code_for_apps([dotted]).pop()
            code = self.utils.make_prompt_code_string(dotted, self.utils.remove_import_statements(source))
            out.append([{"role": "system", "content": self.selection_template.render(module=code, query=query)}])
        return out

    def op_parse_selection(self, answers: list[str | None]) -> dict[str, Any]:
        """Symbols the selection answers name, de-duplicated and sorted as the PS agent does
        (``_get_import_symbols_from_agent``): ``{"names": [...], "unparsed": n, "failed": n}``. An answer None (the
        request failed) selects nothing (``failed``); one that ASPERA's parser rejects counts as ``None``
        (``unparsed``); one that would stop ASPERA's agent with another exception counts as ``None`` too."""
        found: list[Any] = []
        unparsed = failed = 0
        for answer in answers:
            if answer is None:
                failed += 1
                continue
            try:
                pieces = self.answer_parser.parse(answer)
            except Exception:  # ProgramFinderError as in ASPERA; any other error would stop its agent
                unparsed += 1
                pieces = ["None"]
            for piece in pieces:
                found.extend(self.utils.get_apps_symbols_from_program(piece))
        kept = self.symbols.dedup_and_sort_symbols(found)
        return {"names": [s.obj_name for s in kept], "unparsed": unparsed, "failed": failed}

    def op_ps_generation(self, query: str, apps: list[str], query_solution: list[str], program: str,
                         names: list[str], agent_order: bool) -> list[dict[str, str]]:
        """The PS agent's generation request for the selected symbol ``names``
        (``_make_messages_and_imports`` with ``OracleSystemTurnTemplate._get_code``). With ``agent_order`` the names
        are in the order the agent's own selection gave them (:meth:`op_parse_selection`); else they are a set (a
        retriever's selection) and take the order ASPERA's agent would have given them had its answers named exactly
        these: the order of its universe of symbols (by their line in their own file; symbols without one, such as
        the enums built by a call, in the order the universe lists them). Names that are no symbol of
        ``aspera.apps`` are left out."""
        first = self._universe_first()
        if agent_order:
            selected = [first[name] for name in names if name in first]
        else:
            wanted = set(names)
            selected = [symbol for name, symbol in first.items() if name in wanted]
        _, example_symbols = self._examples_code(query_solution)
        symbols = selected + list(example_symbols)
        symbols.sort(key=lambda s: s.line_no)
        per_file = self.utils.get_source_code_for_symbols_used_in_program([self._module(a) for a in apps], symbols)
        code = ""
        for filename, source in per_file.items():
            source = self.utils.remove_import_statements(source)
            docs_root = self.constants.DOCS_ROOT
            as_module = filename.replace("/", ".").split(f"{docs_root}.")[1]
            code += f"# {as_module}\n\n"
            header = self.utils.get_imports_and_docstring_from_file(Path(filename))
            if header:
                code += f"{header}\n\n"
            code += f"{source}\n\n"
        return [self._system(code.strip(), query_solution), self._user(query, program)]

    def op_gold_names(self, program: str) -> list[str]:
        """Names ASPERA's PS metric takes as the gold of a program (``Evaluator.get_primitives_selection_feedback``)."""
        symbols = self.symbols.dedup_and_sort_symbols(self.utils.get_apps_symbols_from_program(program))
        return [s.obj_name for s in symbols]

    def op_library(self) -> list[dict[str, Any]]:
        """Every top-level definition of ``aspera.apps``' modules (not the names they import), in module order and
        line order: ``module``, ``name``, ``kind``, ``shown`` (the text ASPERA's PS generation prompt shows for
        it), ``doc`` (its docstring) and ``uses`` (the other definitions its text names, by ASPERA's rule)."""
        rows = []
        for module_name in self.apps.module_names:
            module = sys.modules[self._module(module_name)]
            for name, obj in _definitions(module):
                shown = _shown(name, obj)
                uses = [s.obj_name for s in self.utils.get_apps_symbols_from_program(shown)]
                rows.append({"module": module_name, "name": name, "kind": _kind(obj), "shown": shown,
                             "doc": inspect.getdoc(obj) if _kind(obj) in ("function", "class", "enum", "exception")
                             else "", "uses": list(dict.fromkeys(u for u in uses if u != name))})
        return rows

def _definitions(module: types.ModuleType) -> list[tuple[str, Any]]:
    """The top-level names a module defines itself, in source order."""
    import ast

    tree = ast.parse(inspect.getsource(module))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [(name, getattr(module, name)) for name in dict.fromkeys(names)]


def _kind(obj: Any) -> str:
    import enum

    if isinstance(obj, type) and issubclass(obj, BaseException):
        return "exception"
    if isinstance(obj, enum.EnumMeta):
        return "enum"
    if isinstance(obj, type):
        return "class"
    if callable(obj) and inspect.isfunction(obj):
        return "function"
    return "alias"


def _shown(name: str, obj: Any) -> str:
    """The text of one definition as the PS generation prompt shows it: its source, or, where ``inspect`` has none,
    the text ASPERA rebuilds (``Name = Enum("Name", [...])`` and its docstring for a functional enum,
    ``name = Literal[...]`` or ``name = list[X]`` for an alias)."""
    import enum
    import typing

    try:
        return inspect.getsource(obj).strip("\n")
    except OSError:
        if not isinstance(obj, enum.EnumMeta):
            raise
        text = f'{obj.__name__} = Enum("{obj.__name__}", {list(obj.__members__.keys())})'
        return f'{text}\n"""{obj.__doc__}"""' if obj.__doc__ else text
    except TypeError:
        origin = typing.get_origin(obj)
        if origin is typing.Literal:
            return f'{name} = Literal[{", ".join(map(repr, obj.__args__))}]'
        if origin is list:
            args = [a.__name__ if hasattr(a, "__name__") else str(a) for a in typing.get_args(obj)]
            return f"{name} = list[{', '.join(args)}]"
        raise


def serve(root: Path) -> None:
    """Answer operations on stdin until it closes (see the module docstring)."""
    try:
        renderer = Renderer(root)
        ready: dict[str, Any] = {"ok": renderer.op_hello()}
    except Exception as exc:
        renderer = None
        ready = {"error": f"{type(exc).__name__}: {exc}"}
    out = sys.stdout
    out.write(json.dumps(ready) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            if renderer is None:
                raise RuntimeError(ready["error"])
            reply = {"ok": getattr(renderer, f"op_{op}")(**request)}
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
