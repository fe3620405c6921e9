"""ASPERA's side of the parity tests: its own agents render their requests (a script, run in a subprocess).

Usage: ``python aspera_side.py JOB_JSON OUT_JSONL``. The job names the checkout of apple/ml-aspera
(``src``), a plans folder in ASPERA's format (``plans``) and the tasks (``tasks``: ``id``, ``query`` and,
for the oracle case, ``names``); for each task one JSON line is written with the requests of the agents the
job asks for (``agents``):

* ``cck``: ``CompleteCodebaseKnowledgeAgent._make_messages_and_imports`` (``[system, user]``);
* ``ps``: ``PrimitivesSelectionAgent._make_messages_and_imports`` with a completer that records the 12
  selection requests and answers them with :func:`scripted.answer`; ``ps_names`` are the names of the
  symbols the agent selected, in its order;
* ``given``: the PS agent's generation request had its selection been the symbols named ``names``
  (each name's first symbol of ASPERA's universe, as the agent keeps the first symbol of each name).

Nothing of primsel is imported here. ASPERA is imported as its entry point imports it
(``aspera.endpoints.agent_runner``, then the agent, parser and templates of its hydra configs), with
the third-party packages that rendering does not use replaced by import-only stand-ins (the model clients,
torch, the rate limiters, polars, hydra, omegaconf...), so nothing is downloaded or installed for them.
The agents are configured from ASPERA's own YAML files (``configs/agent/<agent>.yaml`` and the defaults they
name: ``parser/default.yaml``, ``guidelines/default.yaml``, ``primitives_selection_guidelines/no_guidelines.yaml``).
"""

from __future__ import annotations

import copy
import functools
import importlib
import importlib.abc
import importlib.machinery
import json
import sys
import types
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scripted  # noqa: E402  (beside this file)

#: Top-level packages ASPERA imports but its rendering never uses: stand-ins are imported instead.
STAND_INS = ("anthropic", "attrs", "beartype", "diskcache", "google", "huggingface_hub", "hydra", "omegaconf", "openai",
             "polars", "pyrate_limiter", "tenacity", "tiktoken", "torch", "transformers", "vertexai")


class _StandInType(type):
    """Classes that stand for any attribute of a stand-in package: calling one gives another, except that a
    single function argument comes back as it is (a decorator)."""

    def __getattr__(cls, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stand_in(name)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]
        return _stand_in(cls.__name__)

    def __getitem__(cls, item):
        return cls


def _stand_in(name: str) -> type:
    return _StandInType(name, (), {})


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stand_in(name)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STAND_INS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandInModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


def _remember_sources() -> None:
    """``inspect.findsource`` remembered per object (outcome or exception): ASPERA asks for the lines of the same
    definitions thousands of times a task (``CodeSymbol.line_no`` is a sort key), and CPython 3.11 parses the
    whole file for each class. The files do not change while this runs, so every answer is the same."""
    import inspect

    original = inspect.findsource
    remembered: dict[int, tuple[object, object, BaseException | None]] = {}

    def findsource(obj):
        key = id(obj)
        if key not in remembered:
            try:
                remembered[key] = (obj, original(obj), None)
            except BaseException as exc:  # noqa: BLE001 - the same exception is raised again below
                remembered[key] = (obj, None, exc)
        _, value, error = remembered[key]
        if error is not None:
            raise error
        lines, number = value
        return list(lines), number

    inspect.findsource = findsource


def _build(node, root):
    """A hydra node instantiated: ``_target_`` called (``functools.partial`` of it for ``_partial_``), the
    ``${..key}`` interpolations of ASPERA's parser config resolved against its root."""
    if isinstance(node, dict):
        arguments = {k: _build(v, root) for k, v in node.items() if k not in ("_target_", "_partial_")}
        if "_target_" not in node:
            return arguments
        module_name, _, attribute = node["_target_"].rpartition(".")
        target = getattr(importlib.import_module(module_name), attribute)
        if node.get("_partial_"):
            return functools.partial(target, **arguments)
        return target(**arguments)
    if isinstance(node, list):
        return [_build(v, root) for v in node]
    if isinstance(node, str) and node.startswith("${..") and node.endswith("}"):
        return _build(root[node[4:-1]], root)
    return node


class RecordingCompleter:
    """ASPERA's completer replaced: records each request's messages and answers with the scripted model."""

    def __init__(self) -> None:
        self.requests: list[list[dict[str, str]]] = []

    def complete(self, prompt) -> str:
        messages = [{"role": str(m["role"].value if hasattr(m["role"], "value") else m["role"]),
                     "content": m["content"]} for m in prompt.messages]
        self.requests.append(copy.deepcopy(messages))
        return scripted.answer(messages)


def _plain(messages) -> list[dict[str, str]]:
    return [{"role": str(getattr(m["role"], "value", m["role"])), "content": m["content"]} for m in messages]


def main(job_path: str, out_path: str) -> int:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    package = Path(job["src"]) / "src" / "aspera"
    sys.meta_path.insert(0, _StandInFinder())
    _remember_sources()
    sys.path.insert(0, str(package.parent))
    importlib.import_module("aspera.endpoints.agent_runner")
    configs = package / "configs" / "agent"

    def load(name: str) -> dict:
        return yaml.safe_load((configs / name).read_text(encoding="utf-8"))

    parser_root = load("parser/default.yaml")
    parser_config = types.SimpleNamespace(parser=_build(parser_root["parser"], parser_root))
    guidelines = load("guidelines/default.yaml")
    agents = {}
    for name, config_file in (("cck", "complete_codebase_knowledge.yaml"), ("ps", "primitives_selection.yaml")):
        config = load(config_file)["agent"]
        module_name, _, class_name = config["_target_"].rpartition(".")
        agent_class = getattr(importlib.import_module(module_name), class_name)
        keywords = {key: _build(config[key], config) for key in ("system", "user", "primitives_selection")
                    if key in config}
        if name == "ps":
            keywords["primitives_selection_guidelines"] = load("primitives_selection_guidelines/no_guidelines.yaml")
        completer = RecordingCompleter()
        agent = agent_class(queries_dir=job["plans"], parser=parser_config, completer=completer,
                            guidelines=guidelines, **keywords)
        agents[name] = (agent, completer)

    from aspera.code_utils.code_symbol import dedup_and_sort_symbols
    from aspera.code_utils.utils import _get_all_aspera_symbols

    ps_agent, ps_completer = agents["ps"]
    with open(out_path, "w", encoding="utf-8") as out:
        for task in job["tasks"]:
            datapoint = agents["cck"][0].evaluator.load_annotation(task["query"])
            row = {"id": task["id"]}
            if "cck" in job["agents"]:
                messages, _, _ = agents["cck"][0]._make_messages_and_imports(datapoint)
                row["cck"] = _plain(messages)
            if "ps" in job["agents"]:
                ps_completer.requests.clear()
                messages, _, symbols = ps_agent._make_messages_and_imports(datapoint)
                row["selections"] = list(ps_completer.requests)
                row["ps_generation"] = _plain(messages)
                row["ps_names"] = [s.obj_name for s in symbols]
            if "given" in job["agents"]:
                wanted = set(task["names"])
                given = dedup_and_sort_symbols([s for s in _get_all_aspera_symbols() if s.obj_name in wanted])
                ps_agent._get_import_symbols_from_agent = lambda query, chosen=given: list(chosen)
                messages, _, _ = ps_agent._make_messages_and_imports(datapoint)
                del ps_agent._get_import_symbols_from_agent
                row["given_generation"] = _plain(messages)
                row["given_found"] = sorted({s.obj_name for s in given})
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
