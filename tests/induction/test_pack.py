"""The knowledge pack: built from a real (tiny) corpus, written, loaded, refitted."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import warehouse
from aicf_induct.errors import ConfigError
from aicf_induct.induction import pack as pack_mod
from aicf_induct.induction.corpus import corpus_meta
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.mined import write_mined
from aicf_induct.induction.mining import Miner
from aicf_induct.induction.pack import FORMAT, build_pack, load_pack, write_pack
from aicf_induct.induction.proposals import propose_dataset
from aicf_induct.induction.proposer import Proposer
from tests.induction.helpers import TINY_PROBLEMS, build_tiny_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_corpus(tmp_path_factory.mktemp("pack") / "wh")


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """No restored proposer from another test."""
    monkeypatch.setattr(pack_mod, "_RESTORED", {})


def _miner() -> Miner:
    return Miner(min_problems=2, n_bootstrap=200)


def _build(root: Path, out: Path, exclude: tuple[str, ...] = (),
           conformal_folds: int = 0) -> Path:
    """The tiny corpus's pack; by default without the conformal fits (most of a build's
    time), which only the tests of the whole pack's bytes and proposals need."""
    meta, _ = corpus_meta(root, exclude=exclude)
    return write_pack(build_pack(meta, _miner().fit(meta), exclude,
                                 conformal_folds=conformal_folds), out, ["test"])


def test_a_loaded_pack_s_digest_is_remembered_per_file(corpus: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path / "cache"))
    memo = tmp_path / "cache" / pack_mod.DIGESTS_FILE
    hashed: list[str] = []
    real = pack_mod.Pack._hash

    def counted(self: pack_mod.Pack) -> str:
        if self.path is not None:  # write_pack hashes the pack it is given, in memory
            hashed.append(str(self.path))
        return real(self)

    monkeypatch.setattr(pack_mod.Pack, "_hash", counted)
    path = _build(corpus, tmp_path / "p.parquet")
    first = load_pack(path).digest()
    assert len(hashed) == 1 and memo.exists()
    assert load_pack(path).digest() == first and len(hashed) == 1  # read, not hashed
    # the file rewritten with other content: another key, and the old entry is dropped
    _build(corpus, path, exclude=(TINY_PROBLEMS[0],))
    other = load_pack(path).digest()
    assert other != first and len(hashed) == 2
    assert list(json.loads(memo.read_text()).values()) == [other]
    memo.write_text("not json")  # a spoilt memo is hashed past and rewritten
    assert load_pack(path).digest() == other and len(hashed) == 3
    assert list(json.loads(memo.read_text()).values()) == [other]


def test_pack_round_trip_with_provenance(corpus: Path, tmp_path: Path) -> None:
    meta, _ = corpus_meta(corpus)
    miner = _miner().fit(meta)
    built = build_pack(meta, miner)
    path = write_pack(built, tmp_path / "p.parquet", ["aicf-induct", "induce", "fit"])
    got = load_pack(path)
    pd.testing.assert_frame_equal(got.table, built.table)
    pd.testing.assert_frame_equal(got.rules, built.rules)
    pd.testing.assert_frame_equal(got.correlations, built.correlations, check_dtype=False)
    assert got.digest() == built.digest()
    # one row per (problem, candidate) with means and stds over the seeds
    assert len(got.table) == len(TINY_PROBLEMS) * 4 and (got.table["n_seeds"] == 2).all()
    mean = meta.groupby(["problem_id", "candidate"])["test_score"].mean()
    assert got.table.set_index(["problem_id", "candidate"])["test_score"].sort_index() \
        .to_numpy() == pytest.approx(mean.sort_index().to_numpy())
    prov = json.loads(path.with_suffix(".json").read_text())
    assert prov["format"] == FORMAT and prov["command"] == "aicf-induct induce fit"
    assert prov["commit"] and prov["date"] and prov["library"]
    assert sorted(p["problem"] for p in prov["problem_list"]) == sorted(TINY_PROBLEMS)
    assert path.stat().st_size < 10e6


def test_rebuilding_from_the_same_corpus_gives_the_same_pack(corpus: Path,
                                                             tmp_path: Path) -> None:
    a = _build(corpus, tmp_path / "a.parquet", conformal_folds=pack_mod.CONFORMAL_FOLDS)
    b = _build(corpus, tmp_path / "b.parquet", conformal_folds=pack_mod.CONFORMAL_FOLDS)
    assert a.read_bytes() == b.read_bytes()
    pa_, pb = load_pack(a), load_pack(b)
    pd.testing.assert_frame_equal(pa_.table, pb.table)
    pd.testing.assert_frame_equal(pa_.rules, pb.rules)


def test_exclude_keeps_problems_out(corpus: Path, tmp_path: Path) -> None:
    p = load_pack(_build(corpus, tmp_path / "x.parquet", ("iris",)))
    assert "iris" not in p.problems and len(p.problems) == len(TINY_PROBLEMS) - 1
    assert p.header["excluded"] == ["iris"]


def test_the_pack_proposer_equals_one_fitted_on_the_warehouse(corpus: Path,
                                                              tmp_path: Path) -> None:
    """The pack holds the fitted model: the same proposals as a Proposer fitted on the
    per-seed meta-dataset, and the same again on a fresh load."""
    meta, _ = corpus_meta(corpus)
    miner = _miner().fit(meta)
    path = write_pack(build_pack(meta, miner), tmp_path / "p.parquet", ["t"])
    first = propose_dataset("wine", path, top_k=4)
    pack_mod._RESTORED.clear()
    again = propose_dataset("wine", path, top_k=4)
    assert again == first
    direct = Proposer(metamodel=MetaModel(), miner=miner).fit(meta)
    from aicf_induct.problems import extract_features, load_problem

    wine = load_problem("wine")
    ref = direct.propose(extract_features(wine), 4).as_dict()
    assert [c["candidate"] for c in first["candidates"]] == \
        [c["candidate"] for c in ref["candidates"]]
    assert [c["expected_norm_error"] for c in first["candidates"]] == pytest.approx(
        [c["expected_norm_error"] for c in ref["candidates"]])
    assert [(n["problem"], n["winner"]) for n in first["neighbors"]] == \
        [(n["problem"], n["winner"]) for n in ref["neighbors"]]
    assert [n["distance"] for n in first["neighbors"]] == pytest.approx(
        [n["distance"] for n in ref["neighbors"]])  # summation order: last bits only


def test_bad_packs_get_one_line_errors(corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    text = tmp_path / "text.parquet"
    text.write_text("not a pack\n")
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), plain)
    good = _build(corpus, tmp_path / "good.parquet")
    t = pq.read_table(good)
    header = json.loads(t.schema.metadata[b"aicf.pack"])
    future = tmp_path / "future.parquet"
    pq.write_table(t.replace_schema_metadata(
        {b"aicf.pack": json.dumps({**header, "format": "aicf.pack/99",
                                   "library": "9.0"}).encode()}), future)
    no_rows = tmp_path / "no_rows.parquet"
    pq.write_table(t.slice(0, 0), no_rows)
    no_model = tmp_path / "no_model.parquet"
    pq.write_table(t.replace_schema_metadata({b"aicf.pack": json.dumps(
        {k: v for k, v in header.items() if k != "metamodel"}).encode()}), no_model)
    cases = [(empty, "is empty"), (text, "not a knowledge pack (not a Parquet file"),
             (plain, "not a knowledge pack (a Parquet file without"),
             (future, "format 'aicf.pack/99' (written by aicf-induct 9.0) is not the "
                      f"'{FORMAT}'"),
             (no_rows, "holds no problems"), (no_model, "holds no fitted meta-model"),
             (tmp_path / "absent.parquet", "no knowledge pack at")]
    for path, words in cases:
        with pytest.raises(ConfigError) as info:
            load_pack(path)
        assert words in str(info.value) and "\n" not in str(info.value), path
    # a damaged tree (a root index past the end) is named when the proposer is restored
    bad = json.loads(json.dumps(header["metamodel"]))
    bad["models"]["low"]["roots"][0] = 10**9
    damaged = tmp_path / "damaged.parquet"
    pq.write_table(t.replace_schema_metadata({b"aicf.pack": json.dumps(
        {**header, "metamodel": bad}).encode()}), damaged)
    with pytest.raises(ConfigError, match=r"meta-model is damaged .*outside the ensemble"):
        load_pack(damaged).proposer()
    monkeypatch.setattr(pack_mod, "DEFAULT_PACK", tmp_path / "missing" / "kp.parquet")
    with pytest.raises(ConfigError, match=r"no knowledge pack is installed .*aicf-induct "
                                          r"corpus build.*induce fit --warehouse DIR"):
        load_pack(None)


def test_mined_tables_are_readable_by_sql(corpus: Path) -> None:
    meta, _ = corpus_meta(corpus)
    miner = _miner().fit(meta)
    first = write_mined(corpus, miner)
    second = write_mined(corpus, miner)
    conn = warehouse.connect(corpus)
    rows = conn.execute("SELECT DISTINCT fit_id FROM rules").fetchall()
    assert rows == [(second,)]  # the view: the latest fit
    n = conn.execute("SELECT count(*) FROM raw_rules WHERE fit_id IN (?, ?)",
                     [first, second]).fetchone()
    assert n == (2 * len(miner.rules_),)
    got = conn.execute("SELECT trait, depth, problems, effect, ci_low, ci_high, q_value, text "
                       "FROM rules ORDER BY q_value, p_value, trait, depth").df()
    ref = miner.rules_[list(got.columns)]
    pd.testing.assert_frame_equal(got.reset_index(drop=True), ref.reset_index(drop=True),
                                  check_dtype=False)
    cols = {r[0] for r in conn.execute("DESCRIBE correlations").fetchall()}
    assert {"feature", "trait", "correlation", "ci_low", "ci_high", "q_value",
            "fit_id"} <= cols


def test_a_fit_that_mined_no_correlations_shows_none_not_an_older_fit_s(
        corpus: Path) -> None:
    """Each view kept the latest fit of its own table: after a fit that mined no
    correlations, `correlations` (the dashboard's heatmap, `plot correlations`) still showed
    an older fit's, beside the new fit's rules."""
    meta, _ = corpus_meta(corpus)
    miner = _miner().fit(meta)
    write_mined(corpus, miner)
    none = _miner().fit(meta)
    none.correlations_ = none.correlations_.iloc[0:0]
    latest = write_mined(corpus, none)
    conn = warehouse.connect(corpus)
    assert conn.execute("SELECT count(*) FROM correlations").fetchone() == (0,)
    assert conn.execute("SELECT DISTINCT fit_id FROM rules").fetchall() == [(latest,)]


def test_a_fit_that_mined_nothing_empties_both_views(corpus: Path) -> None:
    """A fit that mined neither correlations nor rules left no row to know it by, so both
    views went on showing the fit before it; each fit now writes a `fits` row."""
    meta, _ = corpus_meta(corpus)
    miner = _miner().fit(meta)
    first = write_mined(corpus, miner)
    none = _miner().fit(meta)
    none.correlations_ = none.correlations_.iloc[0:0]
    none.rules_ = none.rules_.iloc[0:0]
    latest = write_mined(corpus, none)
    conn = warehouse.connect(corpus)
    assert conn.execute("SELECT count(*) FROM correlations").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM rules").fetchone() == (0,)
    fits = conn.execute("SELECT fit_id, correlations, rules FROM fits WHERE fit_id IN (?, ?) "
                        "ORDER BY fitted_at", [first, latest]).fetchall()
    assert fits == [(first, len(miner.correlations_), len(miner.rules_)), (latest, 0, 0)]
    assert conn.execute("SELECT fit_id FROM latest_fit").fetchall() == [(latest,)]


def test_the_pack_gives_back_the_per_seed_meta_dataset(corpus: Path, tmp_path: Path) -> None:
    """The benchmarks run from the pack alone: its per-seed lists give back the very
    meta-dataset the warehouse gives, derived scores included, and fewer seeds on request
    renormalize as the warehouse's reader does."""
    meta, _ = corpus_meta(corpus)
    path = write_pack(build_pack(meta, _miner().fit(meta), conformal_folds=0),
                      tmp_path / "p.parquet", ["t"])
    pack = load_pack(path)
    pd.testing.assert_frame_equal(pack.seed_meta(), meta, check_dtype=False)
    one, _ = corpus_meta(corpus, n_seeds=1)
    assert set(one["seed"]) == {0}
    pd.testing.assert_frame_equal(pack.seed_meta(n_seeds=1), one, check_dtype=False)
    assert (meta["param_steps"] > 0).all()


def test_a_seed_whose_structure_differs_keeps_its_own_patterns(corpus: Path,
                                                               tmp_path: Path) -> None:
    """A seed's split can change the input width (categories), so a run's patterns may differ
    from its pair's other seeds: the pack keeps the difference and gives it back."""
    meta, _ = corpus_meta(corpus)
    row = meta.index[(meta["seed"] == 1)][0]
    meta.loc[row, ["p.params.count", "p.nodes"]] += [12.0, 1.0]
    path = write_pack(build_pack(meta, _miner().fit(meta), conformal_folds=0),
                      tmp_path / "p.parquet", ["t"])
    pack = load_pack(path)
    assert (pack.table["pattern_overrides"] != "").sum() == 1
    pd.testing.assert_frame_equal(pack.seed_meta(), meta, check_dtype=False)


def test_another_format_a_directory_or_a_lost_feature_column_is_named(
        corpus: Path, tmp_path: Path) -> None:
    """A newer pack asks for a newer aicf-induct (no rebuild can help), an older one for a
    rebuild; a directory is said to be one; a pack that lost a meta-feature column its
    meta-model was fitted on is refused (it loaded, and its neighbours moved)."""
    good = _build(corpus, tmp_path / "good.parquet")
    t = pq.read_table(good)
    header = json.loads(t.schema.metadata[b"aicf.pack"])

    def with_format(fmt: str) -> Path:
        out = tmp_path / f"{fmt.replace('/', '_')}.parquet"
        pq.write_table(t.replace_schema_metadata({b"aicf.pack": json.dumps(
            {**header, "format": fmt}).encode()}), out)
        return out

    number = int(FORMAT.split("/")[1])
    cases = [(with_format(f"aicf.pack/{number + 1}"),
              "made by a newer aicf-induct: upgrade aicf-induct, or use a pack of this version"),
             (with_format(f"aicf.pack/{number - 1}"),
              "rebuild it from its corpus with `aicf-induct induce fit --warehouse DIR`"),
             (tmp_path, "is a directory, not a knowledge pack")]
    lost, also = header["metamodel"]["feature_names"][3:5]
    dropped = tmp_path / "dropped.parquet"
    pq.write_table(t.drop_columns([lost, also]), dropped)
    cases.append((dropped, f"lacks the column '{lost}' (and 1 more) its meta-model was "
                           "fitted on"))
    for path, words in cases:
        with pytest.raises(ConfigError) as info:
            load_pack(path)
        assert words in str(info.value) and "\n" not in str(info.value), path
    with pytest.raises(ConfigError) as info:  # an older pack: no upgrade helps
        load_pack(with_format(f"aicf.pack/{number - 1}"))
    assert "newer" not in str(info.value)


def test_excluded_takes_a_str_as_one_name() -> None:
    """`excluded="iris"` was recorded as ['i', 'i', 'r', 's'] (one name per character)."""
    from tests.induction.synthetic_meta import planted

    meta = planted(P=12)
    miner = Miner(min_problems=2, n_bootstrap=50).fit(meta)
    pack = build_pack(meta, miner, excluded="iris", conformal_folds=2, conformal_repeats=1)
    assert pack.header["excluded"] == ["iris"]


def test_a_provenance_that_cannot_be_written_leaves_no_pack(tmp_path: Path) -> None:
    """PATH.json a directory: the .parquet was written, then the error named the .parquet."""
    pack = load_pack()
    (tmp_path / "pk" / "x.json").mkdir(parents=True)
    with pytest.raises(ConfigError) as info:
        write_pack(pack, tmp_path / "pk" / "x.parquet", ["test"])
    assert str(info.value) == (f"cannot write the knowledge pack to {tmp_path}/pk/x.parquet: "
                               f"its provenance {tmp_path}/pk/x.json: is a folder, not a file")
    assert sorted(p.name for p in (tmp_path / "pk").iterdir()) == ["x.json"]
    assert not any((tmp_path / "pk" / "x.json").iterdir())


def test_a_provenance_that_fails_to_write_leaves_no_pack(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the checks (a disk full, a permission): neither file, nor a temporary one."""
    pack = load_pack()
    real = Path.write_text

    def full(self: Path, *args: object, **kwargs: object) -> int:
        if ".json" in self.name:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(ConfigError, match=r"x\.parquet: its provenance \S*x\.json: No space "
                                          "left on device"):
        write_pack(pack, tmp_path / "x.parquet", ["test"])
    assert list(tmp_path.iterdir()) == []


def test_every_expected_error_lies_within_its_interval_and_in_0_1() -> None:
    """The mean model's estimate was shown as it came: 1.10 beside [0.42, 1.00] on one
    problem, −0.013 beside a low of 0 on another (68 of the corpus's 5,856 predictions lay
    outside their interval). It is now clipped into the interval, after the order."""
    pack = load_pack()
    mm = pack.proposer().metamodel_
    table = pack.table.drop_duplicates("problem").set_index("problem")
    names = [c for c in table.columns if c.startswith("f.")]
    outside = 0
    for problem in table.index[::4]:
        pred = mm.predict_problem(table.loc[problem, names].astype(float).to_dict())
        inside = (pred["low"] <= pred["expected"]) & (pred["expected"] <= pred["high"])
        outside += int((~inside).sum())
        assert pred["expected"].between(0.0, 1.0).all(), problem
    assert outside == 0


def test_a_pack_damaged_inside_is_one_line_too(corpus: Path, tmp_path: Path) -> None:
    """Four packs an audit made load_pack take, each then a traceback from propose (and a
    500 from the service): its first bytes gone (the footer intact), a header without
    'problems', a score column of text, a meta-model whose feature names are one string
    (said as "lacks the column 'o'", a character of it)."""
    good = _build(corpus, tmp_path / "good.parquet")
    t = pq.read_table(good)
    header = json.loads(t.schema.metadata[b"aicf.pack"])

    def with_header(name: str, h: dict) -> Path:
        out = tmp_path / f"{name}.parquet"
        pq.write_table(t.replace_schema_metadata({b"aicf.pack": json.dumps(h).encode()}), out)
        return out

    headless = tmp_path / "headless.parquet"
    headless.write_bytes(good.read_bytes()[100:])
    i = t.schema.get_field_index("test_norm_error")
    text = tmp_path / "text.parquet"
    pq.write_table(t.set_column(i, "test_norm_error", pa.array(
        [str(v) for v in t.column(i).to_pylist()])), text)
    model = {**header["metamodel"], "feature_names": "one string"}
    cases = [(headless, "the knowledge pack is damaged (its rows cannot be read: "),
             (with_header("no_problems", {k: v for k, v in header.items() if k != "problems"}),
              "the knowledge pack header is damaged (it lacks 'problems')"),
             (text, "the knowledge pack's column 'test_norm_error' holds"),
             (with_header("names", {**header, "metamodel": model}),
              "meta-model is damaged (its feature or pattern names are not a list)")]
    for path, words in cases:
        with pytest.raises(ConfigError) as info:
            load_pack(path)
        assert words in str(info.value) and "\n" not in str(info.value), path


def test_a_rule_met_through_a_missing_feature_says_so() -> None:
    """Wine has no `target_abs_cor_mean` (a regression feature), and a rule on
    `target_abs_cor_mean <= 0.1415` fired through the side its tree sent missing values:
    the sentence read as if wine met the threshold."""
    from aicf_induct.induction.mining import fired_text

    rule = {"text": "on problems with `a > 1` and `b <= 2`, X", "conditions": json.dumps(
        [{"feature": "a", "op": ">", "value": 1.0, "missing": False},
         {"feature": "b", "op": "<=", "value": 2.0, "missing": True}])}
    assert fired_text(rule, {"a": 3.0, "b": 1.0}) == rule["text"]
    assert fired_text(rule, {"a": 3.0}) == (
        f"{rule['text']} (met as this problem has no `b`: the rule's tree sent problems "
        "without it this way)")
    from aicf_induct.induction import featurise

    _, wine = featurise("wine")
    said = [r for c in load_pack().proposer().propose(wine, top_k=3).as_dict()["candidates"]
            for r in c["rules"] if "target_abs_cor_mean" in r]
    assert said and all("this problem has no `stat.target_abs_cor_mean`" in r for r in said)


@pytest.mark.parametrize("refused_file", ["pack", "provenance"])
def test_a_refused_rename_leaves_the_old_pack_and_provenance(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        refused_file: str) -> None:
    """The provenance was renamed into place before the pack: when the pack's rename then
    failed (or Ctrl-C came between the two), the old pack sat beside the new provenance,
    which said 5 problems where the pack held 4. Now the pair is replaced together."""
    import os

    path = _build(corpus, tmp_path / "p.parquet", exclude=("iris",))
    before = (path.read_bytes(), path.with_suffix(".json").read_bytes())
    replace = os.replace

    prov = path.with_suffix(".json")
    target = path if refused_file == "pack" else prov

    def refused(src: object, dst: object) -> None:
        if str(dst) == str(target):  # the other, renamed first, must be put back
            raise PermissionError(1, "Operation not permitted", str(src), None, str(dst))
        replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(ConfigError) as info:
        _build(corpus, path)
    its = "" if target == path else f"its provenance {prov}: "
    assert str(info.value) == (f"cannot write the knowledge pack to {path}: {its}"
                               "Operation not permitted")
    assert (path.read_bytes(), path.with_suffix(".json").read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.parquet"]
