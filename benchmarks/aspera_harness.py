"""Time ASPERA's reference harness on every task's reference program (for ``verify_speed.py``).

Usage, with an interpreter that has ASPERA's dependencies installed (polars, jinja2, pydantic,
beartype, attrs, omegaconf, nestedtext, rapidfuzz, python-dateutil, black; see
docs/benchmarks.md)::

    ASPERA_PYTHON benchmarks/aspera_harness.py --aspera ml-aspera --data asper_bench.tgz

Imports nothing of primsel. Runs ASPERA's own ``Evaluator.get_solution_feedback`` (one process,
the tasks in order, as ASPERA's agents do) on each task's reference program, given the imports
ASPERA's agents put in front of a program (``get_imports(scenario, executable=True)``), and
prints one JSON line: ``tasks``, ``passed``, ``seconds`` (the whole script: imports, reading the
dataset, evaluating) and ``evaluation_seconds`` (the evaluation alone).

Two adjustments, neither in the evaluation itself: ``aspera.completer``'s package file imports
the LLM clients (torch, transformers, vertexai ...), which evaluating does not use, so the
package is registered without running it; and log warnings are switched off, because ASPERA
counts any line on stderr as a failed check and, unconfigured, Python's logging prints the
library's warnings there (ASPERA's own runs configure logging to files).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import logging
import sys
import tarfile
import tempfile
import time
import types
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aspera", required=True, help="a checkout of apple/ml-aspera")
    parser.add_argument("--data", required=True, help="the Asper-Bench archive (.tgz as released)")
    args = parser.parse_args(argv)
    source = Path(args.aspera) / "src"
    sys.path.insert(0, str(source))
    completer = types.ModuleType("aspera.completer")
    completer.__path__ = [str(source / "aspera" / "completer")]
    completer.__spec__ = importlib.machinery.ModuleSpec("aspera.completer", None, is_package=True)
    sys.modules["aspera.completer"] = completer
    logging.disable(logging.WARNING)
    from aspera.code_utils.utils import get_imports
    from aspera.evaluator import Evaluator, Solution

    with tempfile.TemporaryDirectory(prefix="aspera-harness-") as folder:
        with tarfile.open(args.data) as archive:
            members = [m for m in archive.getmembers() if "/plans/" in f"/{m.name.lstrip('./')}" and m.isfile()
                       and not Path(m.name).name.startswith("._")]
            archive.extractall(folder, members=members, filter="data")
        plans = next(Path(folder).rglob("plans"))
        evaluator = Evaluator(plans)
        evaluating = time.perf_counter()
        passed = 0
        for annotation in evaluator.annotations:
            program = "".join(get_imports(annotation.scenario, executable=True)) + annotation.program
            feedback = evaluator.get_solution_feedback(Solution(query=annotation.query, program=program))
            passed += all(message.tool_call_exception is None for message in feedback)
        done = time.perf_counter()
    print(json.dumps({"tasks": len(evaluator.annotations), "passed": passed, "seconds": done - start,
                      "evaluation_seconds": done - evaluating}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
