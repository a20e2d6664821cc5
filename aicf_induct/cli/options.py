"""Option-value checks for argparse's `type=`: a bad value stops the parser, before a command
reads data or writes a row, with one line naming the option (`main.Parser.error`).

Each checker takes the text the user typed and returns the value, or raises
`ArgumentTypeError`, whose message argparse prints after "argument --NAME: ".
"""

from __future__ import annotations

import math
import os
from argparse import Action, ArgumentParser, ArgumentTypeError, Namespace
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aicf_induct.atomic_file import unwritable as unwritable
from aicf_induct.errors import ConfigError
from aicf_induct.problems.splits import MAX_SEED

API_KEY_ENV = "AICF_API_KEY"  # the default of every --api-key


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ArgumentTypeError(f"expected an integer, got '{text}'") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not math.isfinite(value):
        raise ArgumentTypeError(f"expected a finite number, got '{text}'")
    return value


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer >= low (and <= high, when given)."""
    def check(text: str) -> int:
        value = _int(text)
        if value < low:
            raise ArgumentTypeError(f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise ArgumentTypeError(f"must be <= {high}, got {value}")
        return value

    check.__name__ = f"int >= {low}"
    return check


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def seed(text: str) -> int:
    """A seed: what NumPy and scikit-learn both take, 0 .. 2**32-1."""
    value = _int(text)
    if not 0 <= value <= MAX_SEED:
        raise ArgumentTypeError(f"must be in 0..{MAX_SEED}, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (a learning rate)."""
    value = _float(text)
    if value <= 0:
        raise ArgumentTypeError(f"must be > 0, got {value:g}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (weight decay, a clipping norm, a budget in seconds)."""
    value = _float(text)
    if value < 0:
        raise ArgumentTypeError(f"must be >= 0, got {value:g}")
    return value


def q_level(text: str) -> float:
    """A false discovery rate to keep rows at: a q-value in (0, 1]."""
    value = _float(text)
    if not 0 < value <= 1:
        raise ArgumentTypeError(f"must be in (0, 1], got {value:g}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1) (momentum, label smoothing)."""
    value = _float(text)
    if not 0 <= value < 1:
        raise ArgumentTypeError(f"must be in [0, 1), got {value:g}")
    return value


def service_url(text: str) -> str:
    """`--log-to`, `--service`: the service's base URL, http(s)://HOST[:PORT]."""
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ArgumentTypeError(f"expected http://HOST:PORT or https://..., got '{text}'")
    return text.rstrip("/")


def model_spec(text: str) -> str:
    """A model spec that parses (`mlp:depth=2,width=64`, `ftt:...`, `resmlp:...`, `cnn:...`);
    empty text is not the default."""
    from aicf_induct.frontend.families import parse_spec

    if not text.strip():
        raise ArgumentTypeError("empty model spec (e.g. mlp:depth=2,width=64)")
    try:
        parse_spec(text)
    except ConfigError as err:
        raise ArgumentTypeError(str(err)) from None
    return text.strip()


def check_new_file(path: str | os.PathLike[str], option: str) -> Path:
    """`path` as the file `option` writes: a ConfigError naming both when it cannot be
    written (`unwritable`)."""
    why = unwritable(path)
    if why:
        raise ConfigError(f"{option} {os.fspath(path)}: {why}")
    return Path(path)


def new_file(text: str) -> str:
    """A file to write (`unwritable`): in a folder that exists and takes files, and not a
    folder itself."""
    why = unwritable(text)
    if why:
        raise ArgumentTypeError(f"{text}: {why}" if text else why)
    return text


def warehouse_dir(text: str) -> str:
    """--warehouse DIR (and the options naming another warehouse): not empty, which would
    read as the working directory and log into it."""
    if not text:
        raise ArgumentTypeError("empty directory name")
    return text


# CPU ranks allowed on any machine: enough to check the data-parallel arithmetic (an uneven
# split over 3 ranks) on a small one
RANKS_FLOOR = 4


def max_ranks() -> int:
    """The most --ranks a run may have here: one process per CPU this process may use (a
    rank past them only waits its turn for one, holding its own copy of the data), or
    RANKS_FLOOR on a smaller machine."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1
    return max(cpus, RANKS_FLOOR)


def ranks(text: str) -> int:
    """--ranks N: 1 .. `max_ranks()`."""
    value = positive_int(text)
    cap = max_ranks()
    if value > cap:
        raise ArgumentTypeError(f"at most {cap} on this machine (one rank per CPU, "
                                f"{RANKS_FLOOR} on a machine with fewer), got {value}")
    return value


def recipe_options() -> dict[str, str]:
    """What a proposal's recipe sets, as options: option -> the recipe axis it gives (read
    when asked: the space's module is not imported by every command's start)."""
    from aicf_induct.induction.space import RECIPE_AXES

    return {"--" + axis.replace("_", "-"): axis for axis in RECIPE_AXES}


def given_recipe(args: Namespace) -> list[str]:
    """The recipe options (`recipe_options`) given on the command line."""
    return [o for o, name in recipe_options().items() if getattr(args, name, None) is not None]


GIVEN = "options_given"  # the namespace attribute `record_given` fills


def record_given(actions: Sequence[Action]) -> None:
    """Make each of `actions` note on the namespace (GIVEN: a tuple of its last option string)
    that the command line gave it: argparse does not tell an option given its default value
    (`--steps 2000`) from one left out."""
    for action in actions:
        action.__class__ = _recording(type(action))


def given_options(args: Namespace) -> tuple[str, ...]:
    """The options `record_given` saw on the command line, in the order given."""
    return tuple(getattr(args, GIVEN, ()))


_RECORDING: dict[type[Action], type[Action]] = {}


def _recording(base: type[Action]) -> type[Action]:
    if base not in _RECORDING:
        def __call__(self: Action, parser: ArgumentParser, namespace: Namespace,
                     values: Any, option_string: str | None = None) -> None:
            noted = given_options(namespace)
            if self.option_strings[-1] not in noted:
                setattr(namespace, GIVEN, (*noted, self.option_strings[-1]))
            base.__call__(self, parser, namespace, values, option_string)

        _RECORDING[base] = type(f"Recording{base.__name__}", (base,), {"__call__": __call__})
    return _RECORDING[base]
