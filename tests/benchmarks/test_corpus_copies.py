"""benchmarks/corpus_copies.py finds the same rows under other names, order and columns,
and not tables that only share a grid of round values."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tests.benchmarks.scripts import run_script
from tests.induction.synthetic_meta import planted

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import corpus_copies


def _tables(folder: Path) -> list[str]:
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"a": rng.normal(size=600).round(4),
                         "b": (rng.uniform(size=600) * 50).round(3),
                         "kind": rng.choice(["p", "q"], size=600),
                         "y": rng.normal(size=600).round(5)})
    base.to_csv(folder / "base.csv", index=False)
    # the same rows: a subsample, shuffled, renamed, the categorical recoded, one more column
    copy = base.sample(450, random_state=1).rename(columns={"a": "alpha", "b": "beta",
                                                            "y": "target"})
    copy["kind"] = copy["kind"].map({"p": 1, "q": 2})
    copy["noise"] = rng.normal(size=len(copy))
    copy.to_parquet(folder / "copy.parquet", index=False)
    pd.DataFrame({"a": rng.normal(size=600), "y": rng.normal(size=600)}) \
        .to_csv(folder / "other.csv", index=False)
    # percentages on a 0.01 grid: every such table shares them, none is a copy
    for name in ("grid1", "grid2"):
        pd.DataFrame({"p": rng.integers(0, 101, size=600) / 100,
                      "q": rng.integers(0, 101, size=600) / 100,
                      "y": rng.normal(size=600)}).to_csv(folder / f"{name}.csv", index=False)
    return [f"file:{folder}/base.csv?target=y", f"file:{folder}/copy.parquet?target=target",
            f"file:{folder}/other.csv?target=y", f"file:{folder}/grid1.csv?target=y",
            f"file:{folder}/grid2.csv?target=y"]


def test_the_copy_is_found_and_nothing_else(tmp_path: Path) -> None:
    names = _tables(tmp_path)
    (tmp_path / "names.txt").write_text("\n".join(names) + "\n")
    done = run_script("corpus_copies.py", "--names", str(tmp_path / "names.txt"))
    assert done.returncode == 0, done.stderr
    assert ("5 tables; 1 pairs share at least 2 columns of values or of level counts (1 "
            "not grouped)") in done.stdout
    row = next(line for line in done.stdout.splitlines() if "base.csv" in line)
    assert "copy.parquet" in row and "| 3 | 0 | False |" in row  # a, b and the target


def test_a_copy_of_counts_and_categories_is_found_by_its_level_counts(tmp_path: Path) -> None:
    """A table with no measured column, copied with its rows shuffled, its columns renamed
    and its categories recoded, is found by its columns' level counts; two balanced designs
    of one size (every level counted alike) are not."""
    rng = np.random.default_rng(3)
    base = pd.DataFrame({"region": rng.choice(["n", "s", "e", "w"], 700, p=[.4, .3, .2, .1]),
                         "visits": rng.poisson(2.0, 700),
                         "grade": rng.choice(["a", "b", "c"], 700, p=[.5, .3, .2]),
                         "y": rng.choice(["yes", "no"], 700)})
    base.to_csv(tmp_path / "base.csv", index=False)
    copy = base.sample(frac=1.0, random_state=2).rename(columns={"region": "r", "grade": "g",
                                                                  "visits": "v"})
    copy["r"] = copy["r"].map({"n": 1, "s": 2, "e": 3, "w": 4})
    copy.to_csv(tmp_path / "copy.csv", index=False)
    for name in ("design1", "design2"):
        pd.DataFrame({"block": np.repeat(np.arange(5), 140), "dose": np.tile(np.arange(7), 100),
                      "y": rng.normal(size=700).round(4)}).to_csv(tmp_path / f"{name}.csv",
                                                                  index=False)
    names = [f"file:{tmp_path}/{n}.csv?target={t}" for n, t in
             (("base", "y"), ("copy", "y"), ("design1", "y"), ("design2", "y"))]
    prints = corpus_copies.table_prints(names, progress=False)
    assert len(prints[names[0]].counts) == 3 and not prints[names[0]].values  # y: 2 levels
    assert prints[names[2]].counts == []  # balanced: nothing to compare
    found = corpus_copies.copies(prints)
    assert len(found) == 1
    assert found.loc[0, "table"] == names[0] and found.loc[0, "copy"] == names[1]
    assert found.loc[0, "shared level counts"] == 3 and found.loc[0, "shared columns"] == 0


def test_one_table_is_a_one_line_error(tmp_path: Path) -> None:
    names = _tables(tmp_path)
    (tmp_path / "names.txt").write_text(names[0] + "\n")
    done = run_script("corpus_copies.py", "--names", str(tmp_path / "names.txt"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    done = run_script("corpus_copies.py", "--extra", str(tmp_path / "base.csv"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    done = run_script("corpus_copies.py", "--names", str(tmp_path / "names.txt"), "--effect")
    assert done.returncode == 2 and "--effect" in done.stderr.splitlines()[-1]


def test_a_copy_in_training_is_what_knn_finds() -> None:
    """A problem's exact copy under another name, in training or not: kNN-1 with the copy
    takes the copy's best candidate, the problem's own; what does not learn from other
    problems (the default, the searches) does not move."""
    meta = planted(P=12, seeds=4)
    first = meta[meta["problem"] == "p000"]
    copy = first.assign(problem="copy", problem_id="idcopy", group="copy")
    effect = corpus_copies.partner_effect(pd.concat([meta, copy], ignore_index=True),
                                          [("p000", "copy")],
                                          default=str(meta["candidate"].iloc[0]))
    assert set(effect["table"]) == {"p000", "copy"}
    rows = effect.set_index(["table", "method", "k"])
    for method in ("default", "full_search", "oracle", "choice_oracle"):
        assert (rows.xs(method, level="method")["without − with"] == 0).all()
    knn = rows.loc[("p000", "knn", 1)]
    assert knn["with"] < knn["without"]
