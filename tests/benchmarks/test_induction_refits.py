"""benchmarks/induction_refits.py refits the pack's configuration on seed subsets of its
corpus and scores each fit on the same held-out problems; the subset of all the corpus's
seeds gives the pack's own figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aicf_induct.induction.corpus import corpus_meta
from aicf_induct.induction.space_io import parse_space
from tests.benchmarks.scripts import run_script
from tests.induction.helpers import (
    TINY_HELD_OUT,
    TINY_SPACE,
    build_tiny_corpus,
    build_tiny_pack,
)


def test_refits_on_seed_subsets_and_the_whole_corpus_gives_the_packs_figures(
        tmp_path: Path) -> None:
    pack = build_tiny_pack(build_tiny_corpus(tmp_path / "corpus"), tmp_path / "pack.parquet")
    held = tmp_path / "held_meta.parquet"
    corpus_meta(str(build_tiny_corpus(tmp_path / "held", TINY_HELD_OUT)))[0].to_parquet(
        held, index=False)

    default = ("--default", parse_space(TINY_SPACE).candidates()[0].key)
    done = run_script("induction_refits.py", "--meta", str(held), "--pack", str(pack),
                      *default, "--seeds", "01,0,1", "--save", str(tmp_path / "rows"))
    assert done.returncode == 0, done.stderr
    head = "| seeds | top-1 | top-3 | top-5 | gap closed | problems |"
    body = done.stdout.split(head, 1)[1].strip().splitlines()[1:4]
    assert [line.split(" | ")[0] for line in body] == ["| 01", "| 0", "| 1"]
    assert "Top-1 over the subsets: " in done.stdout
    # every fit's rows saved; the whole corpus's fit is the pack's own proposer
    shipped = run_script("induction_holdout.py", "--meta", str(held), "--pack", str(pack),
                         *default, "--save", str(tmp_path / "pack_rows"))
    assert shipped.returncode == 0, shipped.stderr
    mine = pd.read_csv(tmp_path / "rows" / "01" / "choices.csv")
    theirs = pd.read_csv(tmp_path / "pack_rows" / "choices.csv")
    pick = ["problem_id", "k", "candidate"]
    own = mine[mine["method"] == "proposer"][pick].sort_values(pick, ignore_index=True)
    ref = theirs[theirs["method"] == "proposer"][pick].sort_values(pick, ignore_index=True)
    assert own.astype(str).equals(ref.astype(str))
    for name in ("0", "1"):
        assert (tmp_path / "rows" / name / "choices.csv").is_file()

    refused = run_script("induction_refits.py", "--meta", str(held), "--pack", str(pack),
                         *default, "--seeds", "01,7")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "the corpus holds no seed 7 (it holds [0, 1])" in refused.stderr
    refused = run_script("induction_refits.py", "--meta", str(held), "--pack", str(pack),
                         *default, "--seeds", "0a")
    assert refused.returncode != 0 and "'0a' is not a run of seed digits" in refused.stderr
