"""`aicf-induct space show SPEC`: the candidates of a structure space, with fingerprints."""

from __future__ import annotations

import argparse
import json

from aicf_induct.cli import options
from aicf_induct.errors import ConfigError
from aicf_induct.induction.space_io import PRESETS, parse_space
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.words import counted


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("space", help="show the candidates of a structure space",
                       description="Structure spaces: presets, YAML/JSON files and the text "
                                   "form 'axis=v1,v2;...' that `sweep --space` takes.")
    cmds = p.add_subparsers(dest="space_command", metavar="COMMAND", required=True)
    show = cmds.add_parser("show", help="list a space's candidates, keys and fingerprints",
                           description="List the candidates of a structure space (a preset, "
                                       "a YAML/JSON file or 'axis=v1,v2;...'): its axes, "
                                       "then per candidate its key, fingerprint (for --in "
                                       "inputs and --out outputs), trainable parameters and "
                                       "structure key. What `sweep --space` would train.",
                           epilog="example: aicf-induct space show "
                                  "'depth=1,2;width=32,64;act=relu,gelu' --in 10 --out 3")
    show.add_argument("spec", metavar="SPEC",
                      help=f"a preset ({', '.join(PRESETS)}), a .yaml/.json file, or "
                           "'axis=v1,v2;...'")
    show.add_argument("--in", dest="n_in", type=options.positive_int, default=8, metavar="N",
                      help="input features the fingerprints are built for (default 8)")
    show.add_argument("--out", dest="n_out", type=options.positive_int, default=2, metavar="N",
                      help="outputs (classes, or 1 for regression) (default 2)")
    show.add_argument("--json", action="store_true", help="one JSON object per candidate")
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    spec = parse_space(args.spec)
    cands = spec.candidates()
    if not args.json:
        print(f"{spec.describe()}: {counted(len(cands), 'candidate')}; fingerprints for "
              f"{args.n_in} inputs, {args.n_out} outputs")
        for name, values in spec.space.axes.items():
            print(f"  {name}: {', '.join(map(str, values))}")
        if cands:  # the rows' columns (the key is the candidate's, as sweeps log it)
            print(f"{'key':{len(cands[0].key)}s}  {'fingerprint':12s}  {'params':>8s}  "
                  "structure")
    for c in cands:
        try:
            g = c.graph(args.n_in, args.n_out)
        except ConfigError as err:  # a cnn candidate for inputs that are no square image
            if args.json:
                print(json.dumps({"key": c.key, "fingerprint": None, "params": None,
                                  "structure_key": c.structure_key, "skipped": str(err)}))
            else:
                print(f"{c.key}  {'-':12s}  {'-':>8s}  {c.structure_key}  (skipped: {err})")
            continue
        fp = fingerprint(g)
        if args.json:
            print(json.dumps({"key": c.key, "fingerprint": fp, "params": g.param_count(),
                              "structure_key": c.structure_key}))
        else:
            print(f"{c.key}  {fp[:12]}  {g.param_count():>8d}  {c.structure_key}")
    return 0
