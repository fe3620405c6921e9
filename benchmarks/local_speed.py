"""Speed of generation with the local model: primsel's overhead, the prompt cache, the time per cell.

Usage: ``python benchmarks/local_speed.py [--data asper_bench.tgz] [--tasks 12] [--modes ps cck]
[--threads N] [--gguf PATH] [--no-reuse]`` (default data: ``$PRIMSEL_ASPER_BENCH``, else the
built-in tasks; default model: the packaged Qwen2.5-Coder-1.5B-Instruct, Q4_K_M).

llama.cpp's server (:class:`primsel.llm.local.LocalServer`) is started once; for each mode the
prompts of the first ``--tasks`` tasks (in task order, then sent in
:func:`primsel.generation.generators.prefix_order`, as a run sends them) go through primsel's
:class:`primsel.llm.client.ChatClient` with the answer cache off, one at a time:

``ps``   the ``ps`` template with the oracle selection at k = 15 (the gold primitives, then the
         rest of the library in library order), one worked example (the same for every task);
``cck``  the ``cck`` template with the whole library.

Printed per mode: requests; prompt tokens sent and computed (sent minus the tokens the server
took from its prompt cache) and the share from the cache; the server's own time (its
``timings``: prompt and generation) against the wall time primsel measured per request, and
their ratio (the overhead: HTTP, JSON, the client; goal within 1.05); prompt and generation
tokens per second by the server's timings; and the wall time of a cell of 250 tasks
extrapolated from the mean time per request after the first (the first computes the shared
prefix from scratch; it is added once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("PRIMSEL_ASPER_BENCH"))
    parser.add_argument("--tasks", type=int, default=12, help="requests per mode (default 12)")
    parser.add_argument("--modes", nargs="+", choices=("ps", "cck"), default=["ps", "cck"])
    parser.add_argument("--threads", type=int, default=None, help="server threads (default: every core)")
    parser.add_argument("--gguf", default=None, help="a GGUF file (default: the packaged model)")
    parser.add_argument("--no-reuse", action="store_true", help="n_cache_reuse = 0 (llama.cpp's chunk reuse off)")
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args(argv)

    from primsel.datasets import load_builtin_tasks, load_tasks
    from primsel.generation.generators import prefix_order
    from primsel.generation.prompts import cck_messages, generation_messages
    from primsel.library import with_gold
    from primsel.simulator.library import build_library
    from primsel.llm.client import ChatClient
    from primsel.llm.local import LocalServer, ServerSettings, prepare

    library = build_library()
    tasks = with_gold(load_tasks(args.data) if args.data else load_builtin_tasks(), library)
    example, chosen = tasks[-1], tasks[: args.tasks]
    prims = list(library.values())
    order = {p.id: i for i, p in enumerate(prims)}
    modules = list(dict.fromkeys(p.module for p in prims))

    def ps(task):
        shown = sorted(task.gold, key=order.get)[:15]
        shown += [p.id for p in prims if p.id not in set(shown)][: 15 - len(shown)]
        return generation_messages(task, sorted((library[i] for i in shown), key=lambda p: order[p.id]),
                                   [example], "ps", modules)

    def cck(task):
        return cck_messages(task, library, [example])

    model = prepare(args.gguf, log=sys.stderr)
    settings = ServerSettings(threads=args.threads, n_cache_reuse=0 if args.no_reuse else 256)
    print(f"model {model.name}; data {'Asper-Bench' if args.data else 'built-in tasks'}; {len(chosen)} tasks per mode; "
          f"threads {settings.resolved_threads()}; n_cache_reuse {settings.n_cache_reuse}; "
          f"load average {os.getloadavg()[0]:.1f}")
    with LocalServer(model.gguf, name=model.name, port=0, settings=settings) as server:
        for mode in args.modes:
            build = ps if mode == "ps" else cck
            prompts = [build(t) for t in chosen]
            client = ChatClient(model=model.name, base_url=server.base_url, cache=False, concurrency=1,
                                max_tokens=args.max_tokens, temperature=0.0, timeout_s=3600, max_retries=0)
            rows = []
            start = time.perf_counter()
            for i in prefix_order(prompts):
                c = client.complete(prompts[i])
                rows.append(c)
            wall = time.perf_counter() - start
            sent = sum(c.prompt_tokens for c in rows)
            cached = sum(c.prompt_tokens_cached for c in rows)
            server_s = sum(c.server_seconds for c in rows)
            client_s = sum(c.seconds for c in rows)
            later = [c.seconds for c in rows[1:]] or [rows[0].seconds]
            cell = rows[0].seconds + statistics.fmean(later) * 249
            print(f"\n[{mode}] {len(rows)} requests in {wall:.1f} s (load average now {os.getloadavg()[0]:.1f})")
            print(f"  prompt tokens sent {sent:,}, computed {sent - cached:,}, from the cache {cached / max(sent, 1):.1%}")
            print(f"  completion tokens {sum(c.completion_tokens for c in rows):,}")
            print(f"  server time {server_s:.1f} s, primsel's wall time per request {client_s:.1f} s: "
                  f"overhead ratio {client_s / max(server_s, 1e-9):.3f} (goal <= 1.05)")
            print(f"  first request {rows[0].seconds:.1f} s, later ones mean {statistics.fmean(later):.1f} s; "
                  f"a 250-task cell: about {cell / 60:.0f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
