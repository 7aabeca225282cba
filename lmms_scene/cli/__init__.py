"""``lmms-scene``: the command line, and the only place in lmms-scene that parses arguments.

One module per command group; each defines ``register(subparsers)`` (top-level
commands) and/or ``register_build(subparsers)`` (``lmms-scene build NAME``), and handlers
``fn(args) -> int`` that call the library with validated arguments. A new module in this
package is picked up without editing this file.

Library errors (``ValueError``, ``KeyError``, ``FileNotFoundError``, ``RuntimeError``)
are printed as ``lmms-scene COMMAND: error: ...`` with exit status 2; ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from types import ModuleType

from lmms_scene import __version__

#: exit status for bad input or a failed command
EXIT_BAD_INPUT = 2


def command_modules() -> list[ModuleType]:
    """Every command module of this package, in name order."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{n}") for n in names]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lmms-scene",
        description="Scene-context benchmarks (COOCO, SNUS, Layered-VQA) and Pfram for the lmms-eval harness.",
    )
    p.add_argument("--version", action="version", version=f"lmms-scene {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in command_modules():
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return p


def error(command: str, message: object) -> int:
    print(f"lmms-scene {command}: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _reader_left() -> int:
    """Output piped to a reader that stopped early (``| head``): no traceback, and none from
    the interpreter's last flush either (stdout pointed at /dev/null); the shell's status
    for a closed pipe (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args, rest = p.parse_known_args(argv)
    if getattr(args, "passthrough", False):
        # `eval` hands everything after its name to the harness, `demo` what it does not know
        args.harness_args = argv[argv.index(args.command) + 1 :] if args.command == "eval" else rest
    elif rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return int(args.fn(args) or 0)
    except BrokenPipeError:
        return _reader_left()
    except (ValueError, KeyError, FileNotFoundError, RuntimeError) as exc:
        if args.debug:
            raise
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return error(getattr(args, "command_name", args.command), message)


if __name__ == "__main__":
    sys.exit(main())
