"""Walk installed packages and write their public, documented callables as JSON Lines.

Run as ``python -m primsel.datasets.pydoc_walk --out FILE [PACKAGE ...]`` by
:func:`primsel.datasets.pydoc.build_catalogue`, in a process of its own: importing every module
of an environment loads a lot of code, some of which prints, changes signal handlers or
crashes, and none of that may reach the caller.

What is walked: the given top-level packages, or by default the standard library's public
modules and the top-level packages of every installed distribution (:func:`default_roots`),
with every public submodule found by :func:`pkgutil.iter_modules` below them. A module is
skipped when a part of its dotted name starts with ``_``, is a test or example folder
(:data:`SKIPPED_PARTS`), or is in :data:`SKIPPED_MODULES` (modules that open windows, print
on import or install things); a module whose import fails is skipped and counted.

What is kept: in each module, the names of ``__all__`` (else every name without a leading
``_``) bound to a function, a built-in function, a class or another callable with a
docstring of its own, defined in the same top-level package (leading underscores ignored, so
``io.open`` from ``_io`` counts); and the public methods a kept class defines itself (with a
docstring of its own). An object reachable under several dotted paths is kept once, under
the shortest path (then the first in string order). Records are written sorted by id.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import os
import pkgutil
import signal
import sys
from collections.abc import Iterator
from importlib import metadata
from typing import Any

#: Module name parts that mark tests, examples and the like.
SKIPPED_PARTS = frozenset({"test", "tests", "testing", "conftest", "setup", "examples", "benchmarks",
                           "__main__", "main", "demo", "demos"})
#: Modules never imported (side effects on import: windows, printing, installers, the network).
SKIPPED_MODULES = frozenset({
    "antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "lib2to3", "ensurepip", "venv",
    "pydoc_data", "xxsubtype", "msilib", "winreg", "winsound", "nt", "msvcrt", "pip", "setuptools",
    "pkg_resources", "wheel", "distutils", "primsel", "pytest", "_pytest", "py", "xdist", "pytest_xdist",
    "sre_compile", "sre_constants", "sre_parse", "asyncio.__main__", "crypt", "nis", "spwd", "ossaudiodev",
    "readline", "curses", "dbm.gnu", "dbm.ndbm", "sqlite3.dump",
})
#: Longest docstring kept, in characters.
MAX_DOC = 4000
#: Longest signature kept, in characters.
MAX_SIGNATURE = 300
#: Seconds one module import may take before it is abandoned (a safety net against a hang).
IMPORT_TIMEOUT = 120


def default_roots() -> list[str]:
    """The standard library's public top-level modules and the top-level packages of every
    installed distribution, sorted, without private names and :data:`SKIPPED_MODULES`."""
    names = set(sys.stdlib_module_names)
    for top, _ in metadata.packages_distributions().items():
        names.add(top)
    return sorted(n for n in names if n.isidentifier() and not n.startswith("_") and n not in SKIPPED_MODULES)


def _skipped(name: str) -> bool:
    parts = name.split(".")
    if any(p.startswith("_") or p in SKIPPED_PARTS for p in parts):
        return True
    return any(".".join(parts[:i]) in SKIPPED_MODULES for i in range(1, len(parts) + 1))


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """File descriptors 1 and 2 on /dev/null (output of imported code, C level included)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _import(name: str) -> Any:
    def alarm(signum: int, frame: Any) -> None:
        raise _Timeout(name)

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(IMPORT_TIMEOUT)
    try:
        with _silenced():
            return importlib.import_module(name)
    except BaseException:  # noqa: BLE001 - any failure (SystemExit included) skips the module
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def walk_modules(roots: list[str]) -> tuple[list[tuple[str, Any]], int]:
    """Import every public module below ``roots``: ``([(name, module)], failed imports)``, in
    the order found (each root, then its submodules depth-first in name order)."""
    modules: list[tuple[str, Any]] = []
    failed = 0
    seen: set[str] = set()
    stack = list(reversed(roots))
    while stack:
        name = stack.pop()
        if name in seen or _skipped(name):
            continue
        seen.add(name)
        module = _import(name)
        if module is None:
            failed += 1
            continue
        modules.append((name, module))
        path = getattr(module, "__path__", None)
        if path is not None:
            try:
                children = sorted(info.name for info in pkgutil.iter_modules(list(path)))
            except Exception:  # noqa: BLE001 - a broken package path yields no children
                children = []
            stack.extend(f"{name}.{c}" for c in reversed(children))
    return modules, failed


def _own_doc(obj: Any) -> str:
    try:
        doc = obj.__doc__
    except Exception:  # noqa: BLE001 - some descriptors raise on attribute access
        return ""
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else ""


def _root(name: Any) -> str:
    return name.split(".")[0].lstrip("_") if isinstance(name, str) else ""


def _signature(obj: Any, name: str, kind: str) -> str:
    prefix = "class " if kind == "class" else "def "
    try:
        text = f"{prefix}{name}{inspect.signature(obj)}"
    except (TypeError, ValueError, RecursionError):
        text = f"{prefix}{name}(...)"
    except Exception:  # noqa: BLE001 - signature() runs package code (annotations)
        text = f"{prefix}{name}(...)"
    return text if len(text) <= MAX_SIGNATURE else text[:MAX_SIGNATURE - 3] + "..."


def _public_names(module: Any) -> list[str]:
    names = getattr(module, "__all__", None)
    if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names):
        return sorted(set(names))
    return sorted(n for n in vars(module) if not n.startswith("_"))


def _is_method(value: Any) -> bool:
    if isinstance(value, (staticmethod, classmethod)):
        return True
    return inspect.isfunction(value) or inspect.ismethoddescriptor(value) or inspect.isbuiltin(value)


def collect(  # noqa: C901 (one walk applying the module docstring's rules in order, a branch each)
    modules: list[tuple[str, Any]],
) -> list[dict[str, str]]:
    """Records ``{"id", "name", "module", "kind", "signature", "doc"}`` of the public documented
    callables of ``modules`` (rules in the module docstring), sorted by id."""
    best: dict[int, tuple[str, str, Any]] = {}  # id(object) -> (dotted path, module name, object)
    keep: list[Any] = []  # keeps objects alive so ids stay unique
    for module_name, module in modules:
        root = _root(module_name)
        for name in _public_names(module):
            try:
                obj = getattr(module, name)
            except Exception:  # noqa: BLE001 - lazy modules may fail on access
                continue
            if not callable(obj) or inspect.ismodule(obj) or _root(getattr(obj, "__module__", None)) != root:
                continue
            if not _own_doc(obj):
                continue
            path = f"{module_name}.{name}"
            current = best.get(id(obj))
            if current is None or (len(path), path) < (len(current[0]), current[0]):
                best[id(obj)] = (path, module_name, obj)
                keep.append(obj)
    records = []
    for path, module_name, obj in best.values():
        kind = "class" if inspect.isclass(obj) else "function"
        name = path.rsplit(".", 1)[1]
        records.append({"id": path, "name": name, "module": module_name, "kind": kind,
                        "signature": _signature(obj, name, kind), "doc": _own_doc(obj)[:MAX_DOC]})
        if kind == "class":
            try:
                members = sorted(vars(obj).items())
            except TypeError:
                members = []
            for attr, value in members:
                if attr.startswith("_") or not _is_method(value):
                    continue
                doc = _own_doc(value.__func__ if isinstance(value, (staticmethod, classmethod)) else value)
                if doc:
                    target = getattr(obj, attr, value)
                    records.append({"id": f"{path}.{attr}", "name": attr, "module": module_name,
                                    "kind": "function", "signature": _signature(target, attr, "function"),
                                    "doc": doc[:MAX_DOC]})
    unique = {r["id"]: r for r in records}
    return [unique[k] for k in sorted(unique)]


def environment() -> dict[str, Any]:
    """Python's version and every installed distribution's version (sorted by name)."""
    versions = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            versions[name.lower()] = dist.version
    return {"python": sys.version.split()[0], "packages": dict(sorted(versions.items()))}


def main(argv: list[str] | None = None) -> int:
    """Walk, collect and write: a first line ``{"meta": {...}}`` then one record per line."""
    parser = argparse.ArgumentParser(prog="python -m primsel.datasets.pydoc_walk")
    parser.add_argument("--out", required=True, help="JSON Lines file to write")
    parser.add_argument("packages", nargs="*", help="top-level packages (default: the whole environment)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    roots = args.packages or default_roots()
    modules, failed = walk_modules(roots)
    records = collect(modules)
    meta = {**environment(), "roots": roots, "modules": len(modules), "failed_imports": failed,
            "callables": len(records)}
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"meta": meta}) + "\n")
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
