"""``primsel tasks``: list task cards, filtered, or show one whole card (:mod:`primsel.tasks`).

``primsel tasks [--data PATH] [--module M] [--primitive ID] [--feature F] [--search TEXT]
[--json]`` lists the cards that match every filter given (a table, or a JSON list);
``primsel tasks show ID`` prints one whole card.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from primsel.commands.common import UsageError
from primsel.tasks import FEATURES, card, filter_cards, format_card


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``tasks`` options to ``parser``."""
    parser.add_argument(
        "action", nargs="?", choices=["show"], help="'show ID' prints one whole card"
    )
    parser.add_argument("task_id", nargs="?", metavar="ID", help="the task to show")
    parser.add_argument(
        "--data",
        metavar="PATH",
        help="Asper-Bench archive; default $PRIMSEL_ASPER_BENCH, else the built-in tasks",
    )
    parser.add_argument(
        "--module", metavar="M", help="only tasks whose gold primitives include module M"
    )
    parser.add_argument(
        "--primitive", metavar="ID", help="only tasks with this gold primitive (module.name)"
    )
    parser.add_argument(
        "--feature", metavar="F", help=f"only tasks with this feature: {', '.join(FEATURES)}"
    )
    parser.add_argument(
        "--search", metavar="TEXT", help="only tasks whose query or id contains TEXT (any case)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON (a list of cards; one card for show)"
    )


def _check_filters(args: argparse.Namespace, library: Any) -> None:
    """UsageError for ``show`` without an id, or a feature, module or primitive the library lacks."""
    if args.action == "show" and not args.task_id:
        raise UsageError("'tasks show' needs a task id, e.g. primsel tasks show builtin-01")
    if args.feature is not None and args.feature not in FEATURES:
        raise UsageError(
            f"--feature {args.feature!r} is not a feature; choose one of {', '.join(FEATURES)}"
        )
    modules = list(dict.fromkeys(p.module for p in library.values()))
    if args.module is not None and args.module not in modules:
        raise UsageError(
            f"--module {args.module!r} is not a library module; choose one of {', '.join(modules)}"
        )
    if args.primitive is not None and args.primitive not in library:
        hint = library.id_of(args.primitive) if hasattr(library, "id_of") else None
        if hint:
            advice = f"; did you mean {hint}?"
        else:
            advice = " (ids are module.name, e.g. work_calendar.add_event)"
        raise UsageError(f"--primitive {args.primitive!r} is not a library primitive id{advice}")


def main(args: argparse.Namespace) -> int:
    """List or show task cards; exit 2 on a bad filter value or an unknown task."""
    from primsel.datasets import DatasetError, load_tasks, resolve_dataset
    from primsel.simulator.library import build_library

    library = build_library()
    _check_filters(args, library)
    try:
        archive = resolve_dataset(args.data)
        tasks = load_tasks(archive)
    except DatasetError as exc:
        raise UsageError(str(exc)) from exc
    if archive is None:
        print(
            f"primsel tasks: no Asper-Bench archive (--data or $PRIMSEL_ASPER_BENCH); "
            f"the {len(tasks)} built-in tasks",
            file=sys.stderr,
        )
    if args.action == "show":
        found = [t for t in tasks if t.id == args.task_id]
        if not found:
            raise UsageError(f"no task with id {args.task_id!r} in the dataset")
        shown = card(found[0], library, details=True)
        print(json.dumps(shown, indent=2, ensure_ascii=False) if args.json else format_card(shown))
        return 0
    cards = filter_cards(
        [card(t, library) for t in tasks], args.module, args.primitive, args.feature, args.search
    )
    if args.json:
        print(json.dumps(cards, indent=2, ensure_ascii=False))
        return 0
    width = max([len(str(c["id"])) for c in cards] + [2])
    print(f"{'id':<{width}}  lines  pairs  gold  features / query")
    for c in cards:
        query = c["query"] if len(c["query"]) <= 100 else c["query"][:97] + "..."
        print(
            f"{c['id']:<{width}}  {c['lines']:>5}  {c['pairs']:>5}  {len(c['gold']):>4}  "
            f"{','.join(c['features']) or '-'}\n{'':<{width}}  {query}"
        )
    print(f"{len(cards)} of {len(tasks)} tasks", file=sys.stderr)
    return 0
