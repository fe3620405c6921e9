"""Wall time of the LLM stages (LLM selector + program generation) against a local scripted server.

Usage: ``python benchmarks/llm_pipeline_speed.py [--data asper_bench.tgz] [--latency 0.2]
[--concurrency 16] [--no-execute]`` (default data: ``$PRIMSEL_ASPER_BENCH``, else the built-in
tasks).

A :class:`primsel.testing.fake_server.FakeOpenAIServer` on 127.0.0.1 (a separate process, so
it does not share the interpreter lock with the client) answers every request after ``latency``
seconds, as a perfect model would (:func:`primsel.testing.fake_server.pipeline_responder`):
selection requests with the task's gold primitives of the module, generation requests with the
reference program. The LLM selector sends 5 requests per task, the generator 1: 1,500 requests
for the 250 Asper-Bench tasks, through the real ``openai`` client, with an empty cache. The
ideal wall time is ``requests x latency / concurrency`` (18.75 s for 1,500 x 0.2 s / 16); the
target is within 1.2x of it. Program execution in the sandbox is timed separately.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time


def _start_server(data: str | None, latency: float, stats: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "primsel.testing.fake_server", "--latency", str(latency), "--stats", stats]
    if data:
        cmd += ["--data", data]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip() if server.stdout else ""
    if not url.startswith("http://127.0.0.1:"):
        server.terminate()
        raise SystemExit(f"the fake server did not start (got {url!r})")
    return server, url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="Asper-Bench archive (default $PRIMSEL_ASPER_BENCH, else built-in tasks)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per answer (default 0.2)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight (default 16)")
    parser.add_argument("--no-execute", action="store_true", help="skip running the programs in the sandbox")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="primsel-bench-") as tmp:
        os.environ["PRIMSEL_CACHE_DIR"] = os.path.join(tmp, "cache")  # empty cache: every request is sent
        from primsel.datasets import load_tasks, resolve_dataset
        from primsel.generation.generators import OpenAIGenerator
        from primsel.library import with_gold
        from primsel.simulator.library import build_library
        from primsel.retrieval.llm_selector import LLMSelector

        archive = resolve_dataset(args.data)
        library = build_library()
        tasks = with_gold(load_tasks(archive), library)
        stats_path = os.path.join(tmp, "stats.json")
        server, url = _start_server(str(archive) if archive else None, args.latency, stats_path)
        try:
            common = {"model": "bench", "base_url": url, "api_key": "unused", "concurrency": args.concurrency}
            print(f"data: {'Asper-Bench' if archive else 'built-in tasks'} ({len(tasks)} tasks); "
                  f"server latency {args.latency:g} s; concurrency {args.concurrency}; CPUs {os.cpu_count()}")

            selector = LLMSelector(**common).fit(library)
            start = time.perf_counter()
            run = selector.search({t.id: t.query for t in tasks}, k=len(library))
            select_s = time.perf_counter() - start
            selections = {t: [library[p] for p, s in ranked.items() if s > 0] for t, ranked in run.items()}
            select_requests = selector.usage_summary()["requests"]

            generator = OpenAIGenerator(examples=1, **common).fit(library, tasks)
            start = time.perf_counter()
            programs = generator.generate_many([(t, selections[t.id]) for t in tasks])
            generate_s = time.perf_counter() - start
            gen_requests = generator.usage_summary()["requests"]
        finally:
            server.terminate()
            server.wait()
        with open(stats_path, encoding="utf-8") as fh:
            stats = json.load(fh)

    requests = select_requests + gen_requests
    llm_s = select_s + generate_s
    ideal = requests * args.latency / args.concurrency
    exact = sum(1 for t in tasks if {p.id for p in selections[t.id]} == set(t.gold))
    ok = sum(1 for p in programs if p.status == "ok")
    print(f"LLM selector: {select_requests} requests in {select_s:.2f} s "
          f"(ideal {select_requests * args.latency / args.concurrency:.2f} s); selection = gold for {exact}/{len(tasks)}")
    print(f"generation:   {gen_requests} requests in {generate_s:.2f} s "
          f"(ideal {gen_requests * args.latency / args.concurrency:.2f} s); programs ok {ok}/{len(tasks)}")
    print(f"LLM stages:   {requests} requests in {llm_s:.2f} s; ideal {ideal:.2f} s "
          f"(requests x latency / concurrency); ratio {llm_s / ideal:.3f} (target <= 1.2)")
    rounds = sum(math.ceil(n / args.concurrency) for n in (select_requests, gen_requests)) * args.latency
    print(f"server: {stats['requests']} requests received, {stats['answered']} answered, "
          f"max in flight {stats['max_in_flight']}; round-limited floor {rounds:.2f} s")

    if not args.no_execute:
        from primsel.simulator.sandbox import Sandbox

        start = time.perf_counter()
        with Sandbox() as sandbox:
            results = list(sandbox.execute_many((t, p.code, p.entry_point) for t, p in zip(tasks, programs)))
        run_s = time.perf_counter() - start
        passed = sum(r.passed for r in results)
        print(f"execution (separate): {len(results)} programs in {run_s:.2f} s, passed {passed}/{len(tasks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
