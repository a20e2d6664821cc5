"""Entry point of the `aicf-induct` console script.

Each command group lives in its own module with a `register(subparsers)` function that adds
its parser and sets `func` on it. Errors a user can cause (`AicfError`) print one line and
exit with status 2; nothing a user types should end in a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import NoReturn

from aicf_induct import __version__
from aicf_induct.errors import AicfError
from aicf_induct.interrupts import sigterm_interrupts

# Command-group modules, in the order `--help` lists them, with the top-level commands each
# registers (tests/cli/test_main.py checks the two agree): a command line naming one of them
# imports only its module, so that `propose` does not pay for the warehouse's or the
# runtime's imports.
COMMAND_MODULES = {
    "aicf_induct.cli.train": ("train",),
    "aicf_induct.cli.adapt": ("adapt",),
    "aicf_induct.cli.ir": ("ir",),
    "aicf_induct.cli.warehouse_cmds": ("sql", "runs", "report", "warehouse"),
    "aicf_induct.cli.problems": ("problems",),
    "aicf_induct.cli.sweep": ("sweep",),
    "aicf_induct.cli.space": ("space",),
    "aicf_induct.cli.corpus": ("corpus",),
    "aicf_induct.cli.induce": ("induce", "mine", "propose"),
    "aicf_induct.cli.serve": ("serve", "keys"),
    "aicf_induct.cli.push": ("push",),
    "aicf_induct.cli.plot": ("plot",),
}


def modules_for(argv: Sequence[str]) -> list[str]:
    """The command modules a command line needs: the one owning its command, or all of them
    (no command, `--help`, an unknown command: the full list is what the user sees)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    owner = [m for m, names in COMMAND_MODULES.items() if command in names]
    return owner or list(COMMAND_MODULES)


class UsageError(AicfError):
    """A command line argparse refused: an unknown option, a missing or bad value."""


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one `error:` line naming the argument (exit 2), as
    every other bad input gets, and `main` returning 2 rather than exiting; `--help` still
    shows the usage. Sub-command parsers are of this class too (`add_subparsers` makes its
    parsers of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """argparse's, but an unknown option names the help of the command it was given to
        (`aicf-induct induce fit --help`), not the top level's."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            raise UsageError(f"unrecognized arguments: {' '.join(extras)} "
                             f"(see {_command_parser(self, ns).prog} --help)")
        return ns


def _command_parser(parser: argparse.ArgumentParser,
                    ns: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost sub-command parser the parsed line chose."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(ns, action.dest, None) or "")
            if chosen is not None:
                return _command_parser(chosen, ns)
    return parser


def build_parser(modules: Sequence[str] = tuple(COMMAND_MODULES)) -> argparse.ArgumentParser:
    parser = Parser(
        prog="aicf-induct",
        description="Train models on the aicf_induct runtime, log them to the warehouse, "
                    "mine which structures suit which problems, and apply it live.",
    )
    parser.add_argument("--version", action="version", version=f"aicf-induct {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


@contextlib.contextmanager
def imports_frozen() -> Iterator[None]:
    """No garbage collection while the command modules import, and what they left frozen
    after (`gc.freeze`), so that later collections skip it: the ~250k objects the imports
    make live as long as the process, and collecting among them took ~0.25 s of `propose`'s
    2 s to free ~1000 objects."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    program = argv is None  # the process's own command line; a caller in-process keeps its GC
    # a diverging run's overflow in the kernels: the trainer stops it and says so in one line
    warnings.filterwarnings("ignore", category=RuntimeWarning,
                            module=r"aicf_induct\.(kernels|runtime)\.")
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        with imports_frozen() if program else contextlib.nullcontext():
            parser = build_parser(modules_for(argv))
    except KeyboardInterrupt:  # Ctrl-C while the command's modules import
        print("interrupted", file=sys.stderr)
        return 130
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        # SIGTERM (kill, timeout, a scheduler) stops a command as Ctrl-C does: its temporary
        # files are removed and it says "interrupted", where it died silently, leaving them
        with sigterm_interrupts():
            return int(args.func(args) or 0)
    except AicfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into `head`: not an error
        sys.stderr.close()
        return 0
    except FileNotFoundError as err:
        print(f"error: no such file: {err.filename}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno in NO_ROOM:  # a write that found no room, wherever it was
            print(f"error: a write failed: {NO_ROOM[err.errno]} ({err.strerror or err})",
                  file=sys.stderr)
            return 2
        if err.filename is None:  # not about a path the user gave: a bug to see whole
            raise
        print(f"error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if not query_interrupted(err):
            raise
        print("interrupted", file=sys.stderr)
        return 130


NO_ROOM = {  # what to do about it
    errno.ENOSPC: "the disk is full; free some space and run the command again",
    errno.EDQUOT: "the disk quota is used up; free some space and run the command again",
    errno.EFBIG: "a file reached the size limit of this process (ulimit -f) or of the file "
                 "system"}


def query_interrupted(err: BaseException) -> bool:
    """A Ctrl-C during a DuckDB query, which DuckDB raises as an error of its own (a
    RuntimeError "Query interrupted", or its InterruptException), not as KeyboardInterrupt.
    By name: this module does not import DuckDB (`propose` never loads it)."""
    return (type(err) is RuntimeError and str(err) == "Query interrupted") or \
        type(err).__name__ == "InterruptException"


if __name__ == "__main__":
    sys.exit(main())
