"""How a benchmark script ends on bad input: one line, "error: MESSAGE", on stderr and exit
status 2 (as argparse's own errors do), never a traceback. Imported by the benchmark scripts
(run as `python benchmarks/X.py`, which puts this folder on sys.path)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from aicf_induct.cli.options import int_at_least as at_least  # noqa: F401  (the scripts' counts)
from aicf_induct.errors import AicfError

# The GPU scripts import CuPy inside main(); without it they can do nothing at all.
NEEDS_CUPY = "needs CuPy and a CUDA GPU (pip install -e .[cuda] on a machine with one)"
CUPY_MODULES = ("cupy", "cupy_backends", "cupyx")


def fail(message: str) -> NoReturn:
    """Print "error: MESSAGE" to stderr and exit 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def missing_file(err: FileNotFoundError) -> str:
    """The path an open() or a reader could not find, said plainly."""
    return f"no such file or folder: {err.filename or err}"


def names_given(filename: object, argv: Sequence[str]) -> bool:
    """Whether a missing file is one the command line named, or lies inside a folder it named
    (a warehouse's part): bad input, said in a line. Any other missing file is the script's
    own fault and keeps its traceback."""
    if not isinstance(filename, (str, Path)) or not str(filename):
        return False
    missing = Path(filename).resolve()
    given = [Path(a.split("=", 1)[1] if a.startswith("--") and "=" in a else a).resolve()
             for a in argv if a and not (a.startswith("-") and "=" not in a)]
    return any(missing == g or g in missing.parents for g in given)


def run_main(main: Callable[[], int | None], no_cupy: str = NEEDS_CUPY) -> NoReturn:
    """Run a script's main() and exit with its status, turning the errors bad input causes
    (a missing warehouse, pack or file that the command line names, a bad option value —
    every AicfError, which includes WarehouseError — or no CuPy: `no_cupy` says what is
    missing) into one "error: " line and status 2."""
    try:
        code = main()
    except AicfError as err:
        fail(str(err))
    except FileNotFoundError as err:
        if not names_given(err.filename, sys.argv[1:]):
            raise  # a file the script itself should have found: a real fault, traced
        fail(missing_file(err))
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in CUPY_MODULES:
            raise  # a missing dependency of the project itself is a real fault
        fail(no_cupy)
    raise SystemExit(code)


def existing_file(text: str) -> str:
    """An argparse type: the path of a file that exists (argparse names the flag if not)."""
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return text


def comma_list(choices: Sequence[str]) -> Callable[[str], str]:
    """An argparse type: comma-separated values, each one of `choices` (argparse names the
    flag and the valid values if not); the text comes back as given."""
    def values(text: str) -> str:
        if bad := [v for v in text.split(",") if v not in choices]:
            raise argparse.ArgumentTypeError(f"{', '.join(bad)} not one of "
                                             f"{', '.join(choices)}")
        return text
    return values
