"""llama.cpp's threads on a shared machine: OpenMP's wait policy and the thread pool's polling, idle and loaded.

Usage: ``python benchmarks/local_threading.py [--load 0 2] [--policies PASSIVE ACTIVE] [--polls 0 50]
[--threads 1 2] [--prompt-tokens 1500] [--answer-tokens 128] [--repeats 2]``

For each number of server threads, each wait policy (``OMP_WAIT_POLICY`` of the server process: the packaged runtime is built with OpenMP) and
each ``poll`` (:attr:`primsel.llm.local.ServerSettings.poll`, llama.cpp's own thread pool), the packaged model is
served by :class:`primsel.llm.local.LocalServer`, and ``--repeats`` requests are sent, each a prompt of about
``--prompt-tokens`` tokens that the server has not seen (a fresh number first, so its prompt cache cannot help),
with exactly ``--answer-tokens`` answer tokens (``ignore_eos``). Printed: prompt and answer tokens per second by
the server's own ``timings``, and the wall time, median over the repeats. ``--load N`` adds N busy processes
(plain Python loops at nice 0) for the whole measurement: other work sharing the cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

#: A paragraph of filler words; repeated to reach the prompt length.
_FILLER = ("The calendar service keeps events with attendees, a start time, a duration and a location. "
           "Rooms are booked for meetings during working hours, and the directory knows every team. ")


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[None]:
    """``n`` processes spinning in a Python loop (nice 0) while the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def one_request(base_url: str, prompt_tokens: int, answer_tokens: int, nonce: int) -> dict[str, float]:
    """Send one chat request; returns the server's prompt and answer tokens per second and the wall seconds."""
    words = (_FILLER * (prompt_tokens // 30 + 1)).split()[: int(prompt_tokens * 0.75)]
    body = {"model": "local", "temperature": 0.0, "max_tokens": answer_tokens, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"{nonce}: " + " ".join(words) + "\nSummarise the text."}]}
    request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=3600) as response:
        answer = json.load(response)
    wall = time.perf_counter() - start
    timings = answer.get("timings", {})
    return {"prompt_tps": float(timings.get("prompt_per_second", 0.0)),
            "answer_tps": float(timings.get("predicted_per_second", 0.0)),
            "prompt_n": float(timings.get("prompt_n", 0)), "wall": wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, nargs="+", default=[0, 2], help="busy processes beside the server")
    parser.add_argument("--policies", nargs="+", default=["PASSIVE", "ACTIVE"])
    parser.add_argument("--polls", type=int, nargs="+", default=[0, 50])
    parser.add_argument("--prompt-tokens", type=int, default=1500)
    parser.add_argument("--answer-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, nargs="+", default=[2], help="server threads")
    args = parser.parse_args(argv)
    from primsel.llm.local import LocalServer, ServerSettings, resolve_gguf

    model = resolve_gguf(None)
    print(f"model {model.gguf.name}; prompt ~{args.prompt_tokens} tokens, answer {args.answer_tokens} tokens, "
          f"median of {args.repeats}; load average at start: {os.getloadavg()[0]:.1f}")
    print("| busy processes | threads | OMP_WAIT_POLICY | poll | prompt tok/s | answer tok/s | wall s |")
    print("|--:|--:|---|--:|--:|--:|--:|")
    nonce = int(time.time())
    settings_grid = [(load, threads, policy, poll) for load in args.load for threads in args.threads
                     for policy in args.policies for poll in args.polls]
    for load, threads, policy, poll in settings_grid:
        os.environ["OMP_WAIT_POLICY"] = policy
        settings = ServerSettings(threads=threads, n_ctx=4096, poll=poll)
        with LocalServer(model.gguf, name=model.name, port=0, settings=settings) as server, busy_processes(load):
            results = []
            for _ in range(args.repeats):
                nonce += 1
                results.append(one_request(server.base_url, args.prompt_tokens, args.answer_tokens, nonce))
        median = {key: statistics.median(r[key] for r in results) for key in results[0]}
        print(f"| {load} | {threads} | {policy} | {poll} | {median['prompt_tps']:.1f} | {median['answer_tps']:.1f} | "
              f"{median['wall']:.1f} |", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
