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
    assert ("5 tables; 1 pairs share at least 2 columns of values or of level counts, or "
            "rows (1 not grouped)") in done.stdout
    row = next(line for line in done.stdout.splitlines() if "base.csv" in line)
    # a, b and the target; every row of the copy is a row of base, none shuffled
    assert "copy.parquet" in row and "| 3 | 0 | 1 | 0 | False |" in row


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


def _panel(rng: np.random.Generator, n: int = 3000) -> pd.DataFrame:
    """Persons over five years, of counts and categories: doctor visits, age, a binary or
    two, household income in round marks (on the 0.01 grid: no measured column)."""
    return pd.DataFrame({"docvis": rng.poisson(2.5, n), "year": rng.integers(1984, 1989, n),
                         "age": rng.integers(25, 65, n), "female": rng.integers(0, 2, n),
                         "kids": rng.integers(0, 2, n),
                         "hhninc": np.round(rng.lognormal(1.0, 0.5, n), 2),
                         "edlevel": rng.choice(["low", "mid", "high"], n, p=[.6, .3, .1])})


def test_a_row_subset_of_counts_is_found_by_its_rows(tmp_path: Path) -> None:
    """One year's rows of a panel (COUNT's rwm1984 of rwm5yr), its columns renamed,
    reordered and one recoded, the year dropped: neither values nor level counts see it,
    its rows do."""
    rng = np.random.default_rng(5)
    panel = _panel(rng)
    panel.to_csv(tmp_path / "panel.csv", index=False)
    year = panel[panel["year"] == 1984].drop(columns="year")
    year["edlevel"] = year["edlevel"].map({"low": 1, "mid": 2, "high": 3})
    year = year.rename(columns={"docvis": "visits", "hhninc": "income", "age": "years"})
    year[["edlevel", "income", "kids", "female", "years", "visits"]] \
        .to_csv(tmp_path / "year.csv", index=False)
    names = [f"file:{tmp_path}/panel.csv?target=docvis",
             f"file:{tmp_path}/year.csv?target=visits"]
    prints = corpus_copies.table_prints(names, progress=False)
    assert not prints[names[1]].values  # nothing measured
    small, large = prints[names[1]].rows, prints[names[0]].rows
    assert small is not None and large is not None
    match = corpus_copies.row_match(small, large)
    assert match.found and match.contained == 1.0 and match.chance < 0.2
    assert match.blocks >= 4  # visits, age, income, the binaries
    found = corpus_copies.copies(prints)
    assert len(found) == 1 and found.loc[0, "shared columns"] == 0
    assert found.loc[0, "shared level counts"] in (0, 1)
    assert found.loc[0, "rows contained"] == 1.0


def test_tables_sharing_only_columns_of_few_values_are_not_copies() -> None:
    """Two samples of one population, no row in common: their binary columns, ages and
    years (a dense grid) are found in each other's rows about as often shuffled as not;
    a count and its log are one block, not two columns of evidence."""
    rng = np.random.default_rng(7)
    one, two = _panel(rng, 4000), _panel(rng, 6000)
    for t in (one, two):
        t["enrol"] = rng.integers(100, 700, len(t))
        t["lenrol"] = np.log(t["enrol"])
    dense = {name: corpus_copies.table_print([t[c] for c in ("year", "age", "female", "kids",
                                                             "edlevel")])
             for name, t in (("one", one), ("two", two))}
    small, large = dense["one"].rows, dense["two"].rows
    assert small is not None and large is not None
    m = corpus_copies.row_match(small, large)
    assert m.contained >= corpus_copies.ROWS_CONTAINED  # contained: the rule alone would list
    assert m.chance > 0.5 and not m.found
    assert corpus_copies.copies(dense).empty
    logs = [corpus_copies.table_print([t["enrol"], t["lenrol"]]).rows for t in (one, two)]
    assert logs[0] is not None and logs[1] is not None
    m = corpus_copies.row_match(logs[0], logs[1])
    # every count is in the other table with its log; shuffled apart they would miss
    assert m.contained >= 0.9 and m.blocks == 1 and m.chance == m.contained and not m.found


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
