"""The one command line of the task-YAML generators (``tasks/_generate_metrics.py``,
``tasks/layered_vqa/_generate_config.py``; ``make task-yamls`` runs both): ``--out FOLDER``
and ``--check`` (write nothing; name every stale file and the command that regenerates it,
exit 1), else write and say what was written. A generator gives its own ``stale`` and
``write``; this module holds only the shared ``main``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def main(
    argv: list[str] | None,
    *,
    command: str,
    doc: str,
    default: Path,
    what: str,
    stale: Callable[[Path], list[str]],
    write: Callable[[Path], list[Path]],
    wrote: Callable[[list[Path], Path], str],
) -> int:
    """Parse ``argv`` and run ``stale`` (``--check``) or ``write`` on the ``--out`` folder.
    ``doc`` is the generator's docstring (its first paragraph describes the command),
    ``what`` names the files in the help text, ``wrote`` the sentence printed after writing."""
    parser = argparse.ArgumentParser(prog=command, description=doc.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=default, help=f"{what} (default: {default})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming every stale file")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(args.out)
        for problem in problems:
            print(f"stale: {args.out / problem}", file=sys.stderr)
        if problems:
            print(f"regenerate with: {command}", file=sys.stderr)
        return 1 if problems else 0
    print(wrote(write(args.out), args.out))
    return 0
