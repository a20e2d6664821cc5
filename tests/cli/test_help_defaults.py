"""Every option's help that states a numeric default states the one the command runs with
(`adapt --help` said early stopping was off by default while a run stopped after 10
evaluations without a new best). Options whose default is None are resolved later (from a
proposal, a pack, the data) and say so in words or name the value they fall back to."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from aicf_induct.cli.main import build_parser

STATED = re.compile(r"\(default:? (-?\d[\d_,]*(?:\.\d+)?(?:e-?\d+)?)(?![\d.])")


def _options(p: argparse.ArgumentParser, path: str = "aicf-induct"
             ) -> Iterator[tuple[str, argparse.Action]]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _options(sub, f"{path} {name}")
        else:
            yield path, a


def test_a_stated_numeric_default_is_the_default() -> None:
    checked, wrong = 0, []
    for command, a in _options(build_parser()):
        m = STATED.search(a.help or "")
        if m is None or a.default is None:
            continue
        checked += 1
        stated = float(m.group(1).rstrip(".").replace(",", "").replace("_", ""))
        if stated != float(a.default):
            wrong.append(f"{command} {'/'.join(a.option_strings)}: help says {m.group(1)}, "
                         f"default {a.default}")
    assert not wrong, wrong
    assert checked > 40  # the pattern reads the helps (68 state a numeric default today)
