"""The induction benchmark's two draws of the seeds' noise as one (2-fold cross-fitting).

    .venv/bin/python benchmarks/induction_bench.py --pack --save A               # choose 0-3
    .venv/bin/python benchmarks/induction_bench.py --pack --swap-seeds --save B  # choose 4-7
    .venv/bin/python benchmarks/induction_crossfit.py A B

Each draw keeps choice and score on disjoint seeds; the cross-fit averages every (problem,
method, k)'s normalized error over the two (`evaluate.cross_fit`), so the score's seed noise
is halved. Prints, for each draw and for the cross-fit: the mean normalized error per method
at k = 1 and 3, the proposer's and the choice oracle's top-1 against kNN-3, portfolio-3 and
average-3 (Holm over the three), and the share of the default → full-search gap closed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from induction_bench import load_result, section
from script_errors import run_main

from aicf_induct.induction.evaluate import cross_fit


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("first", type=Path, help="--save folder of the draw choosing on the "
                                             "first half of the seeds")
    ap.add_argument("second", type=Path, help="--save folder of the --swap-seeds draw")
    args = ap.parse_args()
    a, b = load_result(args.first), load_result(args.second)
    print("\n".join([*section("choose on the first half, score on the second", a),
                     *section("choose on the second half, score on the first", b),
                     *section("cross-fit: both draws averaged per problem",
                              cross_fit(a, b))]))
    return 0


if __name__ == "__main__":
    run_main(main)
