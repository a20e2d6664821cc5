"""Which split a warehouse's meta-features are of (`problem_features.split_seed`), and the
note `induce fit` prints when some are not of the split `propose` featurises."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from aicf_induct.induction.feature_splits import feature_splits
from aicf_induct.records import ProblemRecord
from warehouse import WarehouseRecorder, connect
from warehouse.catalog import frame
from warehouse.layout import visible_parts


def _problem(pid: str, split_seed: int | None) -> ProblemRecord:
    return ProblemRecord(pid, f"name-{pid}", "synthetic", "regression", 100, 4, 0, "y",
                         {"simple.n_rows": 100.0, "stat.skew": 0.5}, split_seed)


def _log(root: Path, *problems: ProblemRecord) -> None:
    rec = WarehouseRecorder(root)
    for p in problems:
        rec.problem(p)
    rec.close()


def test_each_feature_row_keeps_its_split_and_the_splits_are_named(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    _log(root, _problem("p0", 0), _problem("p3", 3), _problem("old", None))
    conn = connect(root)
    rows = frame(conn, "SELECT problem_id, coalesce(split_seed, -1) AS seed "
                       "FROM problem_features")
    conn.close()
    seeds = rows.groupby("problem_id")["seed"].agg(lambda s: sorted(set(s))).to_dict()
    assert seeds == {"old": [-1], "p0": [0], "p3": [3]}  # both features of each, one split

    found = feature_splits(root, ["p0", "p3", "old", "not-in-the-warehouse"])
    assert found.other == ("p3",)
    assert found.unrecorded == ("old",)
    note = found.note()
    assert note is not None and "\n" not in note
    assert "1 problem(s) logged without the split" in note
    assert "1 of another seed's split" in note and "--refeaturise" in note
    assert feature_splits(root, ["p0"]).note() is None  # only the problems asked about


def test_a_problem_with_one_feature_of_an_older_writer_counts_once(tmp_path: Path) -> None:
    """The view keeps each feature's last row: an older writer's feature the newer run did
    not log again stays of an unknown split, and the problem is named once."""
    root = tmp_path / "wh"
    older = ProblemRecord("p", "name-p", "synthetic", "regression", 100, 4, 0, "y",
                          {"stat.skew": 0.5, "stat.kurtosis": 2.0}, None)
    _log(root, older)
    _log(root, ProblemRecord("p", "name-p", "synthetic", "regression", 100, 4, 0, "y",
                             {"stat.skew": 0.4}, 3))
    found = feature_splits(root, ["p"])
    assert (found.unrecorded, found.other) == (("p",), ())


def test_a_warehouse_written_before_the_column_existed(tmp_path: Path) -> None:
    """Parts without a `split_seed` column at all (an older writer's): it reads NULL, every
    problem is of an unrecorded split, and nothing fails."""
    root = tmp_path / "wh"
    _log(root, _problem("p0", 0), _problem("p1", 0))
    for part in visible_parts(root, "problem_features"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["split_seed"]), part)
    conn = connect(root)  # the column the views name reads NULL (28d7f70: it failed them)
    assert frame(conn, "SELECT * FROM problem_features")["split_seed"].isna().all()
    conn.close()
    found = feature_splits(root, ["p0", "p1"])
    assert found.unrecorded == ("p0", "p1") and found.other == ()
