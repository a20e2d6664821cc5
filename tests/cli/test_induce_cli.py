"""`aicf-induct corpus`, `induce fit|evaluate`, `mine`, `propose` on a tiny real corpus."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import warehouse
from aicf_induct.cli.main import main
from aicf_induct.errors import ConfigError
from aicf_induct.induction import pack as pack_mod
from aicf_induct.induction.meta_dataset import load_meta_dataset as warehouse_meta
from aicf_induct.induction.proposals import propose_dataset
from tests.induction.helpers import (
    TINY_CONFORMAL,
    TINY_HELD_OUT,
    TINY_PROBLEMS,
    TINY_SPACE,
    build_tiny_corpus,
    build_tiny_pack,
)

# a fit without the conformal fits (most of its time), where a test reads no interval
NO_CONFORMAL = ("--conformal-folds", "0")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_corpus(tmp_path_factory.mktemp("cli") / "wh")


@pytest.fixture(scope="module")
def pack(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_pack(corpus, tmp_path_factory.mktemp("pack") / "pack.parquet",
                           bootstrap=200)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(pack_mod, "_RESTORED", {})


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_fit_writes_the_pack_and_the_mined_tables(corpus: Path, pack: Path) -> None:
    assert pack.is_file() and pack.with_suffix(".json").is_file()
    prov = json.loads(pack.with_suffix(".json").read_text())
    assert prov["command"].startswith(f"aicf-induct induce fit --warehouse {corpus}")
    assert len(prov["problem_list"]) == len(TINY_PROBLEMS)
    conn = warehouse.connect(corpus)  # SQL through the catalog
    n_rules = conn.execute("SELECT count(*) FROM rules").fetchone()
    assert n_rules is not None and n_rules[0] == len(pack_mod.load_pack(pack).rules) > 0
    assert conn.execute("SELECT count(DISTINCT fit_id) FROM correlations").fetchone() == (1,)


def test_fit_adds_the_features_an_older_corpus_lacks(
        pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pack whose corpus was swept before some features existed gains them with
    `--add-features` (seed 0's split of each problem), and says so in its provenance; a
    pack that has them all refits with the flag to the same bytes."""
    import pyarrow.parquet as pq

    from aicf_induct.induction.new_features import problem_features

    table = pq.read_table(pack)
    lacking = ["f.landmark.nonlinearity", "f.landmark.knn10"]
    older = tmp_path / "older.parquet"
    # the pack header kept, its meta-model fitted without them, as an older pack's was
    header = json.loads(table.schema.metadata[pack_mod.META_KEY])
    model = header["metamodel"]
    model["feature_names"] = [f for f in model["feature_names"] if f not in lacking]
    pq.write_table(table.drop_columns(lacking).replace_schema_metadata(
        {pack_mod.META_KEY: json.dumps(header).encode()}), older)
    out = tmp_path / "out.parquet"
    rc, _, err = _run(["induce", "fit", "--pack", str(older), "--add-features",
                       "--min-problems", "2", "--bootstrap", "200", "-o", str(out),
                       *NO_CONFORMAL], capsys)
    assert rc == 0 and "features added: landmark.knn10, landmark.nonlinearity" in err
    assert "\x1b[" not in err  # stderr is not a terminal: no bar moves the cursor
    got = pack_mod.load_pack(out)
    assert "--add-features" in got.provenance["command"]
    rows = got.table.drop_duplicates("problem").set_index("problem")
    for name in TINY_PROBLEMS:
        assert rows.loc[name, lacking].tolist() == [problem_features(name)[c] for c in lacking]
    same = tmp_path / "same.parquet"
    rc, _, err = _run(["induce", "fit", "--pack", str(pack), "--add-features",
                       "--min-problems", "2", "--bootstrap", "200", "-o", str(same),
                       "--quiet", *TINY_CONFORMAL], capsys)
    assert rc == 0 and "features added: none" in err
    assert same.read_bytes() == pack.read_bytes()


def test_fit_says_when_the_corpus_features_are_not_of_seed_0s_split(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A warehouse whose features were logged without their split (an older writer's
    parts, no `split_seed` column) gets one line naming `--refeaturise`; the fresh sweep's,
    all of seed 0's split, gets none."""
    import shutil

    import pyarrow.parquet as pq

    from warehouse.layout import visible_parts

    fit = ["--min-problems", "2", "--bootstrap", "50", "--no-write", "--quiet", *NO_CONFORMAL]
    rc, _, err = _run(["induce", "fit", "--warehouse", str(corpus), *fit,
                       "-o", str(tmp_path / "a.parquet")], capsys)
    assert rc == 0 and "note: the meta-features" not in err
    older = tmp_path / "older"
    shutil.copytree(corpus, older)
    for part in visible_parts(older, "problem_features"):
        pq.write_table(pq.read_table(part).drop_columns(["split_seed"]), part)
    rc, _, err = _run(["induce", "fit", "--warehouse", str(older), *fit,
                       "-o", str(tmp_path / "b.parquet")], capsys)
    notes = [ln for ln in err.splitlines() if ln.startswith("note: the meta-features")]
    assert rc == 0 and len(notes) == 1
    assert f"of {len(TINY_PROBLEMS)} problem(s) logged without the split" in notes[0]
    assert "--refeaturise" in notes[0]


def _stored_features(pack_path: Path, name: str) -> dict[str, float]:
    rows = pack_mod.load_pack(pack_path).table.drop_duplicates("problem").set_index("problem")
    return {c: rows.loc[name, c] for c in rows.columns
            if c.startswith("f.") and pd.notna(rows.loc[name, c])}


def test_a_sweeps_pack_holds_the_features_propose_computes(pack: Path) -> None:
    """The tiny corpus trains every problem on seeds 0 and 1; each run logs seed 0's split's
    features, so the pack holds exactly what `propose` computes for each problem."""
    from aicf_induct.induction.new_features import problem_features

    for name in TINY_PROBLEMS:
        assert _stored_features(pack, name) == problem_features(name)


def test_refeaturise_puts_every_feature_on_the_split_propose_uses(
        pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--refeaturise`: every meta-feature of every corpus problem becomes the one
    `propose` computes (seed 0's split), whatever split the sweep logged; the provenance
    says so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aicf_induct.induction.new_features import problem_features

    table = pq.read_table(pack)
    stale = tmp_path / "stale.parquet"  # as if logged from another split
    skew = pa.compute.add(table.column("f.stat.skewness_mean"), 0.5)
    pq.write_table(table.set_column(table.schema.get_field_index("f.stat.skewness_mean"),
                                    "f.stat.skewness_mean", skew), stale)
    out = tmp_path / "out.parquet"
    rc, _, err = _run(["induce", "fit", "--pack", str(stale), "--refeaturise",
                       "--min-problems", "2", "--bootstrap", "200", "-o", str(out),
                       "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0 and "features recomputed on seed 0's split" in err
    assert "--refeaturise" in pack_mod.load_pack(out).provenance["command"]
    for name in TINY_PROBLEMS:
        assert _stored_features(out, name) == problem_features(name)


def test_fit_from_a_pack_gives_the_pack_the_warehouse_gives(
        corpus: Path, pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`induce fit --pack` refits from the pack's per-seed corpus: the same bytes as the
    pack built from the warehouse, with the chain in the provenance; `--exclude` works on
    a fresh clone's pack and adds to what the source pack left out."""
    again = tmp_path / "again.parquet"
    rc, out, _ = _run(["induce", "fit", "--pack", str(pack), "--min-problems", "2",
                       "--bootstrap", "200", "-o", str(again), "--quiet", *TINY_CONFORMAL],
                      capsys)
    assert rc == 0 and "mined tables written" not in out
    assert again.read_bytes() == pack.read_bytes()
    prov = json.loads(again.with_suffix(".json").read_text())
    source = json.loads(pack.with_suffix(".json").read_text())
    assert prov["command"].startswith(f"aicf-induct induce fit --pack {pack}")
    assert prov["digest"] == source["digest"]
    assert prov["refit_of"] == {k: source[k] for k in ("digest", "command", "commit", "date")}
    less = tmp_path / "less.parquet"
    assert main(["induce", "fit", "--pack", str(pack), "--exclude", TINY_PROBLEMS[0],
                 "--min-problems", "2", "--bootstrap", "200", "-o", str(less),
                 "--quiet", *NO_CONFORMAL]) == 0
    fewer = tmp_path / "fewer.parquet"
    assert main(["induce", "fit", "--pack", str(less), "--exclude", TINY_PROBLEMS[1],
                 "--min-problems", "2", "--bootstrap", "200", "-o", str(fewer),
                 "--quiet", *NO_CONFORMAL]) == 0
    got = pack_mod.load_pack(fewer)
    assert set(got.problems) == set(TINY_PROBLEMS) - set(TINY_PROBLEMS[:2])
    assert got.header["excluded"] == sorted(TINY_PROBLEMS[:2])
    # the command is what was run: only its own --exclude
    assert f"--exclude {TINY_PROBLEMS[1]} " in got.provenance["command"]
    assert TINY_PROBLEMS[0] not in got.provenance["command"]
    assert json.loads(fewer.with_suffix(".json").read_text())["refit_of"]["refit_of"][
        "digest"] == source["digest"]


def test_fit_grows_a_pack_by_a_warehouse_of_problems_swept_as_its_corpus_was(
        pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`induce fit --pack P --warehouse W`: the pack's corpus and W's problems in one pack,
    W's runs as W holds them (a problem in both is W's), refused in one line when W was
    swept otherwise or not over every candidate and seed."""
    mine = build_tiny_corpus(tmp_path / "mine", ("wine", TINY_PROBLEMS[0]))
    grown = tmp_path / "grown.parquet"
    rc, out, err = _run(["induce", "fit", "--pack", str(pack), "--warehouse", str(mine),
                         "--min-problems", "2", "--bootstrap", "200", "-o", str(grown),
                         "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0 and f"mined tables written to {mine}" in out
    assert f"note: 1 problem of {mine} the pack holds too, {mine}'s runs taken: " \
           f"{TINY_PROBLEMS[0]}\n" in err
    assert f"growing the pack's {len(TINY_PROBLEMS)} problems by 1 of {mine}\n" in err
    got = pack_mod.load_pack(grown)
    assert set(got.problems) == {*TINY_PROBLEMS, "wine"}
    source = pack_mod.load_pack(pack)
    assert got.provenance["protocol"] == source.provenance["protocol"]
    assert got.provenance["command"].startswith(
        f"aicf-induct induce fit --pack {pack} --warehouse {mine} ")
    # each problem's rows are its source's: W's for wine and the one in both, else the pack's
    mine_meta = warehouse_meta(mine)
    cols = ["problem", "candidate", "seed", "val_score", "test_score"]
    rows = got.seed_meta()[cols]
    for name, want in ((n, mine_meta) for n in ("wine", TINY_PROBLEMS[0])):
        pd.testing.assert_frame_equal(rows[rows["problem"] == name].reset_index(drop=True),
                                      want.loc[want["problem"] == name, cols]
                                      .reset_index(drop=True))
    theirs = source.seed_meta()[cols]
    pd.testing.assert_frame_equal(rows[rows["problem"] == TINY_PROBLEMS[1]].reset_index(
        drop=True), theirs[theirs["problem"] == TINY_PROBLEMS[1]].reset_index(drop=True))
    # swept otherwise: another protocol (more epochs), or not every seed of the pack
    other = build_tiny_corpus(tmp_path / "other", ("wine",), extra=["--epochs", "4"])
    short = build_tiny_corpus(tmp_path / "short", ("wine",), extra=["--seeds", "1"])
    want_protocol = source.provenance["protocol"]
    capsys.readouterr()  # the sweeps' own lines
    for wh, words in ((other, f"{other} holds no sweep under the pack's protocol "
                              f"{want_protocol} (found: "),
                      (short, f"no problem of {short} is swept over every candidate and seed "
                              "of the pack (wine)")):
        rc, out, err = _run(["induce", "fit", "--pack", str(pack), "--warehouse", str(wh),
                             "-o", str(tmp_path / "no.parquet"), "--quiet"], capsys)
        assert rc == 2 and out == "" and err.startswith(f"error: {words}")
        assert err.count("\n") == 1 and not (tmp_path / "no.parquet").exists()


def test_a_packs_excluded_lists_only_the_problems_kept_out_of_it(
        pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The provenance's `excluded`: an --exclude name that matched no problem is not in it
    (only noted), nor is a problem the source pack left out that a warehouse growing it
    brings back."""
    left = TINY_PROBLEMS[1]
    less = tmp_path / "less.parquet"
    rc, _, err = _run(["induce", "fit", "--pack", str(pack), "--exclude", f"{left},nosuch",
                       "--min-problems", "2", "--bootstrap", "200", "-o", str(less),
                       "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0 and "note: --exclude 'nosuch' matches no problem of the corpus\n" in err
    assert json.loads(less.with_suffix(".json").read_text())["excluded"] == [left]
    back = build_tiny_corpus(tmp_path / "back", (left,))
    grown = tmp_path / "grown.parquet"
    rc, _, err = _run(["induce", "fit", "--pack", str(less), "--warehouse", str(back),
                       "--min-problems", "2", "--bootstrap", "200", "-o", str(grown),
                       "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0, err
    prov = json.loads(grown.with_suffix(".json").read_text())
    assert left in {p["problem"] for p in prov["problem_list"]}
    assert prov["excluded"] == []


def test_propose_json_round_trip_is_the_library_dict(
        pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.perf_counter()
    rc, out, err = _run(["propose", "--dataset", "wine", "--pack", str(pack), "--top", "3",
                         "--json"], capsys)
    took = time.perf_counter() - t0
    assert rc == 0, err
    got = json.loads(out)
    assert got == json.loads(json.dumps(propose_dataset("wine", pack, 3)))
    assert got["dataset"]["name"] == "wine" and len(got["candidates"]) == 3
    assert [c["rank"] for c in got["candidates"]] == [1, 2, 3]
    for c in got["candidates"]:
        assert c["ir"]["format"] == "aicf.ir/1" and c["model"].startswith("mlp:")
        assert 0 <= c["low"] <= c["high"] <= 1
        assert set(c["recipe"]) == {"optimizer", "lr", "weight_decay", "batch_size"}
    assert len(got["neighbors"]) == 3 and "answered in" in err
    t0 = time.perf_counter()
    rc, again, _ = _run(["propose", "--dataset", "wine", "--pack", str(pack), "--top", "3",
                         "--json"], capsys)
    warm = time.perf_counter() - t0
    assert rc == 0 and again == out  # deterministic
    with capsys.disabled():  # timings are reported, not asserted
        print(f"\npropose --dataset wine: {took:.2f} s cold (restores the proposer), "
              f"{warm:.2f} s warm")


def test_aicf_pack_is_the_pack_commands_read_when_given_none(
        pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`$AICF_PACK` (a grown pack, say) in place of the shipped one, for `propose` and the
    server `serve` starts; --pack still wins; a path with no pack is one line naming it."""
    from aicf_induct.cli import serve
    from aicf_induct.cli.main import build_parser

    monkeypatch.setenv("AICF_PACK", str(pack))
    rc, out, err = _run(["propose", "--dataset", "wine", "--top", "1"], capsys)
    assert rc == 0, err
    assert f"pack {pack.name}: {len(TINY_PROBLEMS)} problems × 4 candidates" in out
    root = tmp_path / "wh"
    args = build_parser().parse_args(["serve", "--warehouse", str(root)])
    assert serve._env(args, root)["AICF_SERVICE_PACK"] == str(pack.resolve())
    monkeypatch.setenv("AICF_SERVICE_PACK", str(tmp_path / "theirs.parquet"))
    assert "AICF_SERVICE_PACK" not in serve._env(args, root)  # the service's own setting
    monkeypatch.delenv("AICF_SERVICE_PACK")
    missing = tmp_path / "none.parquet"
    monkeypatch.setenv("AICF_PACK", str(missing))
    rc, out, err = _run(["propose", "--dataset", "wine"], capsys)
    assert (rc, out, err) == (2, "", f"error: $AICF_PACK: no knowledge pack at {missing}\n")
    with pytest.raises(ConfigError, match=r"^\$AICF_PACK: no knowledge pack at "):
        serve._env(args, root)
    rc, out, _ = _run(["propose", "--dataset", "wine", "--pack", str(pack), "--top", "1"],
                      capsys)
    assert rc == 0 and f"pack {pack.name}: " in out


def test_propose_on_a_csv_prints_evidence(pack: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    csv = tmp_path / "my.csv"
    pd.DataFrame({**{f"x{i}": X[:, i] for i in range(4)},
                  "y": np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")}).to_csv(csv, index=False)
    t0 = time.perf_counter()
    rc, out, err = _run(["propose", "--dataset", f"file:{csv}?target=y", "--pack", str(pack),
                         "--top", "2"], capsys)
    with capsys.disabled():
        print(f"\npropose --dataset file:my.csv: {time.perf_counter() - t0:.2f} s")
    assert rc == 0, err
    assert "classification, 200 rows, 4 features" in out
    assert "Proposals" in out and "Nearest corpus problems" in out
    assert out.count("\n#") == 2


def test_propose_prints_the_rules_for_and_against_each_proposal(
        capsys: pytest.CaptureFixture[str]) -> None:
    # the shipped pack: wine's proposals fire more rules than a screen holds
    from aicf_induct.induction.mining import rule_raises

    rc, out, err = _run(["propose", "--dataset", "wine", "--top", "3", "--json"], capsys)
    assert rc == 0, err
    rules = [c["rules"] for c in json.loads(out)["candidates"]]
    assert max(len(r) for r in rules) > 2
    rc, all_rules, _ = _run(["propose", "--dataset", "wine", "--top", "3", "--rules", "0"],
                            capsys)
    rc, one, _ = _run(["propose", "--dataset", "wine", "--top", "3", "--rules", "1"], capsys)
    assert rc == 0
    blocks = all_rules.split("\n#")[1:4]
    for fired, block, short in zip(rules, blocks, one.split("\n#")[1:4], strict=True):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip().startswith("rule ")]
        assert lines == [f"rule {'for' if rule_raises(r) else 'against'}: {r}" for r in fired]
        n_for = sum(rule_raises(r) for r in fired)
        for side, n in (("for", n_for), ("against", len(fired) - n_for)):
            assert short.count(f"rule {side}: ") == min(n, 1)
            assert (f"... and {n - 1} more {side} (--rules 0" in short) == (n > 1)
    refused = _run(["propose", "--dataset", "wine", "--rules", "-1"], capsys)
    assert refused[0] != 0


def test_mine_prints_tables_from_a_pack_and_a_warehouse(
        corpus: Path, pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["mine", "--pack", str(pack), "--fdr", "1", "--min-problems", "2"],
                        capsys)
    assert rc == 0, err
    assert "Correlations" in out and "Rules" in out and "95% CI" in out
    from aicf_induct.induction.pack import load_pack

    p = load_pack(pack)
    n_corr = int((p.correlations["problems"] >= 2).sum())
    n_rules = int((p.rules["problems"] >= 2).sum())
    assert out.splitlines()[0].endswith(f": 20 of {n_corr} correlations and {n_rules} rules "
                                        "with q <= 1 on >= 2 problems (the most significant "
                                        "first; --top 0 shows all)")  # --top's default: 20
    rc, out, err = _run(["mine", "--pack", str(pack), "--fdr", "1", "--min-problems", "2",
                         "--top", "0"], capsys)
    assert out.splitlines()[0].endswith(f": {n_corr} correlations and {n_rules} rules with "
                                        f"q <= 1 on >= 2 problems")
    rc, out, err = _run(["mine", "--pack", str(pack), "--fdr", "1", "--min-problems", "2",
                         "--top", "1"], capsys)  # the header says what --top left out
    assert rc == 0 and n_corr > 1 and n_rules > 1
    assert out.splitlines()[0].endswith(
        f": 1 of {n_corr} correlations and 1 of {n_rules} rules with q <= 1 on >= 2 problems "
        "(the most significant first; --top 0 shows all)")
    rc, out, err = _run(["mine", "--warehouse", str(corpus), "--fdr", "1", "--min-problems",
                         "2", "--json"], capsys)
    assert rc == 0, err
    rules = json.loads(out)["rules"]
    assert rules and all(r["q_value"] <= 1 and r["problems"] >= 2 for r in rules)


def test_induce_evaluate_runs_the_lopo_table(corpus: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from aicf_induct.induction.space_io import parse_space

    default = parse_space(TINY_SPACE).candidates()[0].key
    rc, out, err = _run(["induce", "evaluate", "--warehouse", str(corpus), "--default", default,
                         "--ks", "1,3", "--baselines", "default,knn,portfolio,oracle",
                         "--json", "--quiet"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    assert {r["method"] for r in got["summary"]} == {"proposer", "default", "knn",
                                                     "portfolio", "oracle"}
    assert {r["baseline"] for r in got["comparisons"]} == {"default", "knn", "portfolio"}
    assert set(got["gap_closed"]) == set(got["gap_closed_ci"]) == {"1", "3"}
    for k, share in got["gap_closed"].items():  # its interval holds it (null: no gap there)
        lo, hi = got["gap_closed_ci"][k]
        if share is None:
            assert lo is None and hi is None
        else:
            assert (lo is None or lo <= share) and (hi is None or share <= hi)
    # the goal line: one untrained pick against three trained ones of each warm start named
    goal = got["top1_vs_three"]
    assert {(r["baseline"], r["k"], r["baseline_k"]) for r in goal} == {
        ("knn", 1, 3), ("portfolio", 1, 3)}
    assert got["ceilings_vs_three"] == []  # neither the full search nor the choice oracle named
    assert got["by_group"] is None  # each tiny problem is its own group


def test_induce_evaluate_prints_the_goal_line_again_by_group(
        capsys: pytest.CaptureFixture[str]) -> None:
    from aicf_induct.cli.induce import _print_group_unit
    from aicf_induct.induction.evaluate import evaluate_holdout
    from aicf_induct.induction.metamodel import MetaModel
    from tests.induction.test_lopo import random_corpus

    meta, _ = random_corpus(5)
    held = meta[meta["group"].isin(sorted(meta["group"].unique())[:3])].assign(group="g")
    ev = evaluate_holdout(meta[~meta["problem_id"].isin(held["problem_id"])], held,
                          ks=(1, 3), metamodel=MetaModel(max_iter=10, min_samples_leaf=5),
                          n_boot=50, default="c00")
    assert ev.groups is not None
    _print_group_unit(ev.groups)
    out = capsys.readouterr().out
    assert "each group as one unit (1 groups" in out
    assert "Share of the default -> full-search gap closed: k = 1: " in out


def test_induce_evaluate_notes_a_k_past_the_corpus_s_candidates(
        corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aicf_induct.induction.space_io import parse_space

    cands = parse_space(TINY_SPACE).candidates()
    rc, _, err = _run(["induce", "evaluate", "--warehouse", str(corpus), "--default",
                         cands[0].key, "--ks", "1,9,100", "--baselines", "default",
                         "--quiet", "--json"], capsys)
    assert rc == 0, err
    assert f"note: the corpus has {len(cands)} candidates: k = 9, 100 propose every one of " \
           f"them, as k = {len(cands)} does" in err


def test_induce_evaluate_plot_draws_every_method_and_k_the_table_holds(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from matplotlib.axes import Axes
    from matplotlib.container import ErrorbarContainer

    from aicf_induct.induction.space_io import parse_space
    from aicf_induct.plots import evaluation_figure

    default = parse_space(TINY_SPACE).candidates()[0].key
    out = tmp_path / "eval.png"
    argv = ["induce", "evaluate", "--warehouse", str(corpus), "--default", default, "--ks",
            "1,3", "--baselines", "default,knn,portfolio,average,full_search", "--quiet"]
    rc, text, err = _run([*argv, "--json", "--plot", str(out)], capsys)
    assert rc == 0, err
    assert f"wrote {out}" in err and out.read_bytes().startswith(b"\x89PNG")
    got = json.loads(text)  # stdout stays the JSON alone
    summary, versus = pd.DataFrame(got["summary"]), pd.DataFrame(got["top1_vs_three"])
    # the full search held against the warm starts as the top-1 is: its mean difference is
    # its mean at k = 1 less each one's at k = 3, over the same problems
    ceilings = pd.DataFrame(got["ceilings_vs_three"])
    assert list(ceilings["method"]) == ["full_search"] * 3
    assert list(ceilings["baseline"]) == ["knn", "portfolio", "average"]
    mean = summary.set_index(["method", "k"])["norm_error"]
    for r in ceilings.itertuples():
        assert r.problems == summary["problems"].max()
        assert r.mean_diff == pytest.approx(mean["full_search", 1] - mean[r.baseline, 3])
    fig = evaluation_figure(summary, versus, {1: 0.5}, "t", ceilings)
    left, right = (a for a in fig.axes if isinstance(a, Axes))
    bars = [c for c in left.containers if isinstance(c, ErrorbarContainer)]
    assert [b.get_label() for b in bars] == ["k = 1", "k = 3"]
    for bar, k in zip(bars, (1, 3), strict=True):
        xs = sorted(bar.lines[0].get_xdata())
        rows = summary[summary["k"] == k]
        if k == 3:  # the default and the full search pick one candidate whatever k: once
            rows = rows[~rows["method"].isin(["default", "full_search"])]
        assert xs == pytest.approx(sorted(rows["norm_error"]))
    assert [t.get_text() for t in left.get_yticklabels()][-1] == "propose"
    diffs, scale = (c for c in right.containers if isinstance(c, ErrorbarContainer))
    assert sorted(diffs.lines[0].get_xdata()) == pytest.approx(sorted(versus["mean_diff"]))
    # the full search beside the top-1, for scale: its differences, below each warm start
    assert list(scale.lines[0].get_xdata()) == pytest.approx(list(ceilings["mean_diff"]))
    assert [y % 1 for y in scale.lines[0].get_ydata()] == pytest.approx([0.78] * 3)
    assert scale.get_label() == "full search (validation), for scale"
    assert "closes 50% of the default" in fig.get_suptitle()
    # a file that cannot be written: one line, before anything is evaluated
    rc, _, err = _run([*argv, "--plot", str(tmp_path / "eval.txt")], capsys)
    assert rc == 2 and "--plot" in err and ".png, .svg, .pdf" in err
    assert "Traceback" not in err


def test_induce_evaluate_all_splits_averages_every_split_of_the_seeds(
        corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aicf_induct.induction.space_io import parse_space

    default = parse_space(TINY_SPACE).candidates()[0].key
    argv = ["induce", "evaluate", "--warehouse", str(corpus), "--default", default, "--ks",
            "1", "--baselines", "default,full_search", "--quiet", "--all-splits"]
    rc, out, err = _run([*argv, "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    # 2 seeds: choose 0 / score 1, and choose 1 / score 0
    assert got["splits"] == 2 and got["calibration"] == []
    # each figure is the mean of the two splits' (the usual and the swapped), the proposer
    # ranking on every seed in both
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.evaluate import evaluate_corpus

    meta, _ = corpus_meta(corpus, None)
    runs = [evaluate_corpus(meta, default=default, ks=(1,), swap_seeds=swap,
                            rank_seeds="all").result.choices
            for swap in (False, True)]
    both = pd.concat(runs).groupby("method")["norm_error"].mean()
    for r in got["summary"]:
        assert r["norm_error"] == pytest.approx(both[r["method"]]), r["method"]
    rc, out, err = _run(argv, capsys)
    assert rc == 0, err
    assert "every (2) split of the seeds" in out and "No calibration" in out


@pytest.fixture(scope="module")
def held_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse of problems the tiny corpus does not hold, trained as it was, and iris
    again under other names (a CSV copy, its columns renamed: the same content would be the
    same problem): a near-duplicate the groups cannot see."""
    tmp = tmp_path_factory.mktemp("held")
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).frame
    frame.columns = [f"c{i}" for i in range(frame.shape[1] - 1)] + ["target"]
    frame.to_csv(tmp / "iris_copy.csv", index=False)
    return build_tiny_corpus(tmp / "wh", [*TINY_HELD_OUT,
                                          f"file:{tmp / 'iris_copy.csv'}?target=target"])


def test_induce_evaluate_holdout_scores_the_pack_on_problems_it_never_saw(
        corpus: Path, pack: Path, held_out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aicf_induct.induction.space_io import parse_space

    default = parse_space(TINY_SPACE).candidates()[0].key
    argv = ["induce", "evaluate", "--holdout", str(held_out), "--pack", str(pack),
            "--default", default, "--ks", "1,3", "--quiet"]
    rc, out, err = _run([*argv, "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    assert got["splits"] == 2  # 2 seeds: choose 0 / score 1, and the swap
    assert {r["problems"] for r in got["summary"]} == {2}
    # the pack's own intervals, checked on each problem's mean over its seeds: every
    # candidate of both problems
    assert got["calibration"][0]["candidates"] == "all" and got["calibration"][0]["n"] == 8
    # the proposer's top-1 is the shipped proposer's, as `propose` gives it
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.evaluate import evaluate_holdout

    held, _ = corpus_meta(held_out)
    loaded = pack_mod.load_pack(pack)
    ev = evaluate_holdout(loaded.seed_meta(), held, fitted=loaded.proposer().metamodel_,
                          default=default, ks=(1,))
    picks = ev.result.choices.query("method == 'proposer' and k == 1") \
        .set_index("problem")["candidate"]
    for name in TINY_HELD_OUT:
        top = propose_dataset(name, pack=loaded, top_k=1)["candidates"][0]["candidate"]
        assert picks[name] == top, name
    rc, out, err = _run(argv, capsys)
    assert rc == 0, err
    assert "2 held-out problems in 2 groups × 4 candidates, scored against" in out
    # the copy of iris is left out, and said so, naming what it copies
    assert "iris_copy.csv?target=target left out, a near-duplicate of the pack's iris (" in err
    assert [r["nearest"] for r in got["near_duplicates"]] == ["iris"]
    assert "Calibration of the 80% intervals" in out
    # the corpus's own problems are not held out
    rc, out, err = _run(["induce", "evaluate", "--holdout", str(corpus), "--pack", str(pack),
                         "--default", default, "--quiet"], capsys)
    assert rc == 2 and "so not held out" in err and "iris" in err


def test_a_meta_file_carried_from_the_sweep_scores_as_its_warehouse(
        pack: Path, held_out: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.meta_file import read_meta_file
    from aicf_induct.induction.space_io import parse_space

    out_file = tmp_path / "held.parquet"
    rc, out, err = _run(["corpus", "meta", "--warehouse", str(held_out), "-o",
                         str(out_file)], capsys)
    assert rc == 0, err
    assert out.startswith(f"wrote {out_file} (") and \
        "3 problems × 4 candidates × 2 seeds, 24 runs" in out
    pd.testing.assert_frame_equal(read_meta_file(out_file), corpus_meta(held_out)[0])
    default = parse_space(TINY_SPACE).candidates()[0].key
    argv = ["induce", "evaluate", "--pack", str(pack), "--default", default, "--ks", "1,3",
            "--quiet", "--json"]
    rc, from_file, err = _run([*argv, "--holdout", str(out_file)], capsys)
    assert rc == 0, err
    rc, from_warehouse, err = _run([*argv, "--holdout", str(held_out)], capsys)
    assert rc == 0, err
    assert json.loads(from_file) == json.loads(from_warehouse)


def test_corpus_list_and_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["corpus", "list", "--problems", "iris,breast_cancer", "--quiet"],
                        capsys)
    assert rc == 0, err
    assert "breast_cancer" in out and "569" in out
    assert "2 problems in 2 groups: 2 classification, 0 regression" in out
    rc, out, err = _run(["corpus", "build", "--problems", "iris,wine", "--exclude", "wine",
                         "--dry-run", "--quiet"], capsys)
    assert rc == 0, err
    assert "1 problem × 32 candidates × 4 seeds = 128 runs; corpus32" in out


def test_corpus_build_resumes_without_duplicates(corpus: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["corpus", "build", "--problems", ",".join(TINY_PROBLEMS), "--space",
                         TINY_SPACE, "--seeds", "2", "--epochs", "3", "--patience", "2",
                         "--workers", "1", "--warehouse", str(corpus), "--quiet", "--json"],
                        capsys)
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["skipped"] == rep["planned"] == len(TINY_PROBLEMS) * 4 * 2 and rep["ran"] == 0
    # the next step it names writes a pack of its own, not over the package's
    rc, out, err = _run(["corpus", "build", "--problems", ",".join(TINY_PROBLEMS), "--space",
                         TINY_SPACE, "--seeds", "2", "--epochs", "3", "--patience", "2",
                         "--workers", "1", "--warehouse", str(corpus), "--quiet"], capsys)
    assert rc == 0, err
    assert out.strip().endswith(f"next: aicf-induct induce fit --warehouse {corpus} "
                                "-o pack.parquet")


@pytest.mark.parametrize("argv, words", [
    (["propose", "--dataset", "no_such_dataset", "--pack", "{tmp}/p.parquet"],
     "unknown dataset 'no_such_dataset'"),
    (["propose", "--dataset", "file:{tmp}/text.csv?target=y", "--pack", "{tmp}/p.parquet"],
     "column 'note'"),
    (["propose", "--dataset", "file:{tmp}/absent.csv?target=y", "--pack", "{tmp}/p.parquet"],
     "absent.csv"),
    (["propose", "--dataset", "wine", "--top", "0"], "--top: must be >= 1"),
    (["propose", "--dataset", "wine", "--pack", "{tmp}/empty.parquet"], "is empty"),
    (["propose", "--dataset", "wine", "--pack", "{tmp}/text.csv"], "not a knowledge pack"),
    (["mine", "--pack", "{tmp}/text.csv"], "not a knowledge pack"),
    (["corpus", "build", "--space", "nope", "--problems", "iris"], "unknown space 'nope'"),
    (["corpus", "build", "--problems", "corpus:x"], "corpus:N with N a number"),
    (["induce", "evaluate", "--warehouse", "{tmp}", "--baselines", "knn,magic"],
     "unknown baseline 'magic'"),
    (["induce", "evaluate", "--holdout", "{tmp}", "--warehouse", "{tmp}"],
     "--warehouse is for leave-one-out"),
    (["induce", "evaluate", "--warehouse", "{tmp}", "--pack", "{tmp}/p.parquet"],
     "--pack is for --holdout"),
    (["induce", "evaluate", "--holdout", "{tmp}/none"], "no warehouse at"),
    (["induce", "evaluate", "--holdout", "{tmp}/none.parquet"], "no such meta-dataset file"),
    (["induce", "evaluate", "--holdout", "{tmp}/empty.parquet"], "empty file (0 bytes)"),
    (["induce", "evaluate", "--holdout", "{tmp}/text.csv"], "text.csv: not a Parquet file"),
    (["induce", "evaluate", "--holdout", "{tmp}/p.parquet"],
     "p.parquet is a knowledge pack, not a meta-dataset: a pack to score goes to --pack"),
    (["induce", "evaluate", "--holdout", "{tmp}/text.parquet"],
     "text.parquet: not a meta-dataset: no column"),
    (["propose", "--dataset", "wine", "--pack", "{tmp}"], "is a directory, not a knowledge pack"),
    (["induce", "fit", "--pack", "{tmp}/p.parquet", "--conformal-folds", "1"],
     "--conformal-folds: must be 0 (no conformal fits) or >= 2"),
    (["corpus", "meta", "--warehouse", "{tmp}/none", "-o", "{tmp}/h.csv"],
     "h.csv: a meta-dataset file is Parquet: name it .parquet"),
    (["induce", "evaluate", "--holdout", "{tmp}/p.parquet", "--protocol", "x"],
     "--protocol reads a warehouse"),
    (["corpus", "meta", "--warehouse", "{tmp}/none", "-o", "{tmp}/m.parquet"],
     "no warehouse at"),
    (["corpus", "build", "--problems", "holdout:x"], "holdout:N with N a number"),
    (["induce", "fit", "--warehouse", "{tmp}/none"], "no warehouse at"),
    (["induce", "fit", "--pack", "{tmp}/empty.parquet"], "is empty"),
    (["induce", "fit", "--pack", "{tmp}/p.parquet", "--protocol", "x"],
     "--protocol reads a warehouse"),
    (["mine", "--protocol", "x"], "--protocol reads a warehouse (--warehouse)"),
    (["mine", "--pack", "{tmp}/p.parquet", "--protocol", "x"], "--protocol reads a warehouse"),
    (["induce", "fit", "--pack", "{tmp}/p.parquet", "--warehouse", "{tmp}"],
     "is not a warehouse"),  # (both: the pack grown by the warehouse's problems)
    (["mine", "--pack", "{tmp}/p.parquet", "--fdr", "0"], "--fdr: must be in (0, 1]"),
    (["mine", "--pack", "{tmp}/p.parquet", "--top", "-3"], "--top: must be >= 0, got -3"),
    (["mine", "--pack", "{tmp}/p.parquet", "--min-problems", "0"], "--min-problems: must be >= 1"),
    (["induce", "fit", "--pack", "{tmp}/p.parquet", "--bootstrap", "0"],
     "--bootstrap: must be >= 1"),
    (["induce", "fit", "--pack", "{tmp}/p.parquet", "--min-problems", "-1"],
     "--min-problems: must be >= 1"),
    (["induce", "fit", "--pack", "{tmp}/p.parquet", "--refeaturise", "--add-features"],
     "not allowed with argument --refeaturise"),
])
def test_bad_input_is_one_error_line(argv: list[str], words: str, tmp_path: Path, pack: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.parquet").write_bytes(b"")
    pd.DataFrame({"note": [f"free text {i}" for i in range(60)],
                  "y": [i % 2 for i in range(60)]}).to_csv(tmp_path / "text.csv", index=False)
    (tmp_path / "p.parquet").write_bytes(pack.read_bytes())
    pd.DataFrame({"a": [1, 2]}).to_parquet(tmp_path / "text.parquet")
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc, out, err = _run(args, capsys)
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], err


def test_a_pack_that_cannot_be_written_leaves_the_warehouse_alone(
        corpus: Path, pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def fits() -> object:
        return warehouse.connect(corpus).execute(
            "SELECT count(DISTINCT fit_id) FROM raw_rules").fetchone()

    before = fits()
    (tmp_path / "file").write_text("x")
    rc, _, err = _run(["induce", "fit", "--warehouse", str(corpus), "--min-problems", "2",
                       "--bootstrap", "50", "-o", str(tmp_path / "file" / "p.parquet"),
                       "--quiet"], capsys)
    assert rc == 2 and "error: cannot write the knowledge pack to" in err
    # one error line (besides the note on how little four problems say)
    assert len([ln for ln in err.strip().splitlines() if not ln.startswith("note: ")]) == 1
    assert fits() == before


def test_propose_without_a_pack_says_how_to_build_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(pack_mod, "DEFAULT_PACK", tmp_path / "knowledge_pack.parquet")
    rc, _, err = _run(["propose", "--dataset", "wine"], capsys)
    assert rc == 2
    assert "no knowledge pack is installed" in err and "induce fit --warehouse DIR" in err


def test_a_pack_takes_its_rewrite_table_from_a_history_of_adaptive_runs(
        pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`corpus build --seeds 0 --adaptive N` trains the adaptive runs alone; `induce fit
    --pack P --history DIR` puts their aggregate into the refit pack (what the learned
    rewrite proposer reads), with --exclude applied to them and the provenance saying what
    the table aggregates; a refit of that pack keeps table and provenance."""
    from aicf_induct.induction.learned_effects import learned_effects
    from aicf_induct.induction.rewrite_history import load_rewrite_history

    hist = tmp_path / "history_wh"
    rc, out, err = _run(["corpus", "build", "--problems", "iris,diabetes", "--seeds", "0",
                         "--adaptive", "2", "--adaptive-steps", "150", "--workers", "1",
                         "--warehouse", str(hist), "--quiet"], capsys)
    assert rc == 0, err
    assert "adaptive runs: 4 trained, 0 already there" in out
    sweep_runs = warehouse.connect(hist).execute(
        "SELECT count(*) FROM runs WHERE origin <> 'adapt'").fetchone()
    assert sweep_runs == (0,)  # no sweep run: the adaptive runs alone
    history = load_rewrite_history(hist)
    assert len(history) > 0

    out_pack = tmp_path / "p.parquet"
    rc, out, err = _run(["induce", "fit", "--pack", str(pack), "--history", str(hist),
                         "--min-problems", "2", "--bootstrap", "50", "-o", str(out_pack),
                         "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0, err
    assert f"rewrite history: {len(history)} decisions of adaptive runs" in out
    made = pack_mod.load_pack(out_pack)
    assert made.header["rewrite_decisions"] == len(history)
    assert made.provenance["rewrite_history"] == {
        "runs": history["run_id"].nunique(), "problems": history["problem_id"].nunique(),
        "decisions": len(history)}
    assert f"--history {hist}" in made.provenance["command"]
    _, source = learned_effects(out_pack)
    assert source["pack_decisions"] == len(history)
    # the corpus is the source pack's: only the rewrite table is new
    assert made.table.equals(pack_mod.load_pack(pack).table)

    # --exclude leaves a problem's runs out of the table as well
    rc, out, err = _run(["induce", "fit", "--pack", str(pack), "--history", str(hist),
                         "--exclude", "iris", "--min-problems", "2", "--bootstrap", "50",
                         "-o", str(tmp_path / "x.parquet"), "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0, err
    kept = history[history["problem"] != "iris"]
    assert pack_mod.load_pack(tmp_path / "x.parquet").header["rewrite_decisions"] == len(kept)

    # a refit of the new pack keeps its table and says what it aggregates
    rc, _, err = _run(["induce", "fit", "--pack", str(out_pack), "--min-problems", "2",
                       "--bootstrap", "50", "-o", str(tmp_path / "again.parquet"), "--quiet",
                       *NO_CONFORMAL], capsys)
    assert rc == 0, err
    again = pack_mod.load_pack(tmp_path / "again.parquet")
    assert again.header["rewrite_decisions"] == len(history)
    assert again.provenance["rewrite_history"] == made.provenance["rewrite_history"]

    # without --history, leaving a problem out drops the table (an aggregate over every
    # problem cannot leave one out), says so, and the provenance counts nothing
    rc, out, err = _run(["induce", "fit", "--pack", str(out_pack), "--exclude", "iris,nosuch",
                         "--min-problems", "2", "--bootstrap", "50", "-o",
                         str(tmp_path / "less.parquet"), "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0, err
    notes = [ln for ln in err.splitlines() if "rewrite table" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: the new pack has no rewrite table")
    assert "cannot leave iris out" in notes[0] and "--from-proposal" in notes[0]
    assert "--history DIR" in notes[0] and "rewrite history:" not in out
    less = pack_mod.load_pack(tmp_path / "less.parquet")
    assert less.rewrites.empty and "rewrite_decisions" not in less.header
    assert "rewrite_history" not in less.provenance and "iris" not in less.problems
    # a name that leaves nothing out keeps the table
    rc, _, err = _run(["induce", "fit", "--pack", str(out_pack), "--exclude", "nosuch",
                       "--min-problems", "2", "--bootstrap", "50", "-o",
                       str(tmp_path / "same.parquet"), "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0 and "rewrite table" not in err
    assert pack_mod.load_pack(tmp_path / "same.parquet").header["rewrite_decisions"] == \
        len(history)

    # a warehouse without adaptive runs is no history
    empty = tmp_path / "empty_wh"
    empty.mkdir()
    rc, _, err = _run(["induce", "fit", "--pack", str(pack), "--history", str(empty),
                       "-o", str(tmp_path / "y.parquet"), "--quiet"], capsys)
    assert rc == 2 and "holds no adaptive run's decisions" in err
    rc, _, err = _run(["corpus", "build", "--problems", "iris", "--seeds", "0"], capsys)
    assert rc == 2 and "0 only with --adaptive N" in err


def test_fit_without_o_never_replaces_the_package_pack_by_a_smaller_one(
        corpus: Path, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without -o a fit writes the package's own pack: one of fewer problems (a small
    sweep's, the hint after `corpus build`) is refused before the mining, naming both
    counts and -o; one of as many problems (the documented rebuild) replaces it with the
    same bytes; -o with the package's path replaces it on purpose."""
    own = tmp_path / "data" / "knowledge_pack.parquet"
    own.parent.mkdir()
    own.write_bytes(pack.read_bytes())
    monkeypatch.setattr(pack_mod, "DEFAULT_PACK", own)
    fit = ["--min-problems", "2", "--bootstrap", "200", "--quiet", *TINY_CONFORMAL]
    rc, out, err = _run(["induce", "fit", "--warehouse", str(corpus), "--exclude", "iris",
                         "--no-write", *fit], capsys)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: without -o, induce fit replaces the package's pack "
                          f"({len(TINY_PROBLEMS)} problems) with this one of "
                          f"{len(TINY_PROBLEMS) - 1}: write it elsewhere with -o PACK "
                          f"(`propose --pack PACK` reads it), or give -o {own}")
    assert own.read_bytes() == pack.read_bytes()
    rc, out, err = _run(["induce", "fit", "--pack", str(own), *fit], capsys)
    assert rc == 0 and f"pack {own} " in out, err
    assert own.read_bytes() == pack.read_bytes()
    assert " -o " not in pack_mod.load_pack(own).provenance["command"]
    rc, _, err = _run(["induce", "fit", "--pack", str(own), "--exclude", "iris", "-o",
                       str(own), *fit, *NO_CONFORMAL], capsys)
    assert rc == 0, err
    assert len(pack_mod.load_pack(own).problems) == len(TINY_PROBLEMS) - 1


def test_fit_notes_seeds_past_the_corpus_and_how_little_few_problems_say(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # one assignment of the groups to the folds: the note is about the folds' number
    rc, _, err = _run(["induce", "fit", "--warehouse", str(corpus), "--seeds", "5",
                       "--min-problems", "2", "--bootstrap", "50", "--no-write", "-o",
                       str(tmp_path / "p.parquet"), "--quiet", "--conformal-repeats", "1"],
                      capsys)
    assert rc == 0, err
    assert "note: --seeds 5: the corpus has 2 seeds (0, 1), all read" in err
    assert (f"note: {len(TINY_PROBLEMS)} problems in {len(TINY_PROBLEMS)} groups: rules, "
            "correlations and neighbour distances of so few problems mean little; the "
            f"conformal folds reduced from 5 to {len(TINY_PROBLEMS)}, one per group") in err


def test_induce_evaluate_takes_the_default_as_a_short_spec(
        corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The short spec `propose` prints names the candidate its canonical key names; with
    no default MLP in the corpus the error names --default."""
    from aicf_induct.induction.space import candidate_of

    key = candidate_of("mlp:depth=1,width=8").key
    argv = ["induce", "evaluate", "--warehouse", str(corpus), "--ks", "1", "--baselines",
            "default", "--quiet", "--json"]
    rc, out, err = _run([*argv, "--default", "mlp:depth=1,width=8"], capsys)
    assert rc == 0, err
    assert json.loads(out)["default"] == key
    rc, _, err = _run(argv, capsys)
    assert rc == 2 and "name the default candidate with --default" in err


def test_corpus_exclude_notes_a_name_that_matches_no_problem(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in --exclude would train the problem meant to be left out: one note each."""
    rc, out, err = _run(["corpus", "list", "--problems", "iris,wine", "--exclude",
                         "nosuch,wine", "--quiet"], capsys)
    assert rc == 0, err
    assert err.strip() == "note: --exclude 'nosuch' matches no problem of the selection"
    assert "1 problem in 1 group" in out
    rc, out, err = _run(["corpus", "build", "--problems", "iris,wine", "--exclude", "wnie",
                         "--dry-run", "--quiet"], capsys)
    assert rc == 0 and err.strip() == "note: --exclude 'wnie' matches no problem of the " \
        "selection"
    rc, _, err = _run(["corpus", "list", "--problems", "iris,wine", "--exclude", "wine",
                       "--quiet"], capsys)
    assert rc == 0 and err == ""


def test_a_one_group_pack_calls_no_held_out_problem_a_near_duplicate(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pack of one problem has no distance between two groups: its held-out problems
    are scored (they were all "near-duplicates"), with one note saying why none is left
    out."""
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.meta_file import write_meta_file

    one = tmp_path / "one.parquet"
    rc, _, err = _run(["induce", "fit", "--warehouse", str(corpus), "--exclude",
                       ",".join(TINY_PROBLEMS[1:]), "--min-problems", "2", "--bootstrap",
                       "50", "--no-write", "-o", str(one), "--quiet"], capsys)
    assert rc == 0, err
    assert "note: 1 problem in 1 group: " in err and "no conformal folds (of 5)" in err
    held, _ = corpus_meta(corpus, exclude=[TINY_PROBLEMS[0]])
    write_meta_file(held, tmp_path / "held.parquet")
    rc, out, err = _run(["induce", "evaluate", "--holdout", str(tmp_path / "held.parquet"),
                         "--pack", str(one), "--default", "mlp:depth=1,width=8", "--ks", "1",
                         "--quiet", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["near_duplicates"] == []
    assert f"note: {one} holds one problem group: no held-out problem can be judged a " \
           "near-duplicate" in err


def test_plot_correlations_of_a_fit_that_mined_none_says_so_for_both_sources(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Four problems give no correlation on >= 10 problems: the warehouse and the pack of
    that fit answer with the same line (not "mine them", not an empty figure)."""
    import shutil

    fresh = tmp_path / "wh"  # the corpus before any fit
    shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns("correlations", "rules", "fits"))
    fig = tmp_path / "c.png"
    rc, _, err = _run(["plot", "correlations", "-o", str(fig), "--warehouse", str(fresh)],
                      capsys)
    assert rc == 2 and "mine them with `aicf-induct induce fit" in err
    rc, _, err = _run(["induce", "fit", "--warehouse", str(fresh), "--bootstrap", "50",
                       "-o", str(tmp_path / "p.parquet"), "--quiet", *NO_CONFORMAL], capsys)
    assert rc == 0, err
    made = pack_mod.load_pack(tmp_path / "p.parquet")
    assert made.correlations.empty and len(made.rules) > 0
    for source, where in ((["--warehouse", str(fresh)], str(fresh)),
                          (["--pack", str(tmp_path / "p.parquet")],
                           f"pack {tmp_path / 'p.parquet'}")):
        rc, out, err = _run(["plot", "correlations", "-o", str(fig), *source], capsys)
        assert rc == 2 and out == "" and not fig.exists()
        assert err.strip() == f"error: no correlations to draw: {where} holds none, as mined " \
            f"(its fit found {len(made.rules)} rules and no correlation)"


def test_propose_notes_a_top_past_the_candidates_and_a_problem_the_pack_holds(
        pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--top past the pack's candidates lists them all, and says so; a problem the pack
    holds gets its measured best named (stderr: the --json answer is unchanged)."""
    loaded = pack_mod.load_pack(pack)
    prop = loaded.proposer()
    pid = loaded.table.set_index("problem").at["iris", "problem_id"].iloc[0]
    best = loaded.table.set_index("candidate").at[prop.winners_[pid], "structure_key"]
    from aicf_induct.cli.induce import short_spec

    rc, out, err = _run(["propose", "--dataset", "iris", "--pack", str(pack), "--top", "9"],
                        capsys)
    assert rc == 0, err
    assert "note: the pack has 4 candidates: --top 9 lists every one of them" in err
    notes = [ln for ln in err.splitlines() if ln.startswith("note: the pack holds iris")]
    assert len(notes) == 1 and f"(problem {pid}) with its measured results" in notes[0]
    assert f"measured best candidate is {short_spec(str(best.iloc[0]).split('|')[0])} " \
        in notes[0]
    assert out.startswith("iris: classification")
    rc, out, err = _run(["propose", "--dataset", "iris", "--pack", str(pack), "--json"], capsys)
    assert rc == 0 and "note:" not in err and json.loads(out)["dataset"]["name"] == "iris"
    rc, _, err = _run(["propose", "--dataset", "wine", "--pack", str(pack)], capsys)
    assert rc == 0 and "note:" not in err
