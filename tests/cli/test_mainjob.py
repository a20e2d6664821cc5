"""The main job end to end: a corpus with adaptive runs, `induce fit` taking their rewrite
history into the pack, `adapt --from-proposal` (embedded, and through the real service), every
decision naming its proposal and evidence, the run's problem row and features joined in SQL,
and a service killed mid-run: the run goes on with the fallback policy and is logged in full
locally."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

import warehouse
from aicf_induct.cli.background import serving
from aicf_induct.cli.main import main
from tests.api.conftest import LIMITS, cli
from warehouse.ingest import recover

PROBLEMS = "iris,diabetes,synthetic:moons?n=300&seed=1"
ADAPT = ["--steps", "200", "--trigger-warmup", "30", "--eval-every", "10", "--guard-steps",
         "20", "--trigger-epochs", "2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(warehouse, pack): a 3-problem × 4-candidate sweep plus 2 adaptive runs a problem."""
    base = tmp_path_factory.mktemp("mainjob")
    root, pack = base / "wh", base / "pack.parquet"
    cli("corpus", "build", "--problems", PROBLEMS, "--space", "depth=1,2;act=relu,tanh;width=8",
        "--seeds", "1", "--epochs", "2", "--patience", "1", "--workers", "1", "--warehouse",
        str(root), "--quiet", "--adaptive", "2", "--adaptive-steps", "150")
    cli("induce", "fit", "--warehouse", str(root), "-o", str(pack), "--min-problems", "2",
        "--bootstrap", "50", "--quiet")
    return root, pack


def test_adaptive_corpus_runs_land_with_problem_rows_and_feed_the_pack(corpus) -> None:
    from aicf_induct.induction.pack import load_pack
    from aicf_induct.induction.rewrite_history import load_rewrite_history

    root, pack = corpus
    conn = warehouse.connect(root)
    rows = conn.execute("""
        SELECT r.run_id, p.name, count(f.feature) AS features
        FROM runs r JOIN problems p USING (problem_id)
             JOIN problem_features f USING (problem_id)
        WHERE r.origin = 'adapt' AND json_extract(r.config, '$.corpus_adaptive') IS NOT NULL
        GROUP BY ALL""").fetchall()
    assert len(rows) == 6 and all(n > 10 for _, _, n in rows)
    history = load_rewrite_history(root)
    assert len(history) > 0 and set(history["run_id"]) <= {r for r, _, _ in rows}
    assert load_pack(pack).header["rewrite_decisions"] == len(history)
    # resumable: a second build trains no adaptive run again
    out = cli("corpus", "build", "--problems", PROBLEMS, "--space",
              "depth=1,2;act=relu,tanh;width=8", "--seeds", "1", "--epochs", "2", "--patience",
              "1", "--workers", "1", "--warehouse", str(root), "--quiet", "--adaptive", "2",
              "--adaptive-steps", "150")
    assert "adaptive runs: 0 trained, 6 already there" in out


def _decisions(root: Path, run_id: str) -> list[dict]:
    rows = warehouse.connect(root).execute(
        "SELECT detail FROM events WHERE run_id = ? AND kind = 'decision' ORDER BY \"at\"",
        [run_id]).fetchall()
    return [json.loads(d) for (d,) in rows]


def test_from_proposal_starts_from_the_top_proposal_and_logs_what_it_acted_on(
        corpus, tmp_path: Path) -> None:
    root, pack = corpus
    out = json.loads(cli("adapt", "--dataset", "wine", "--from-proposal", "--pack", str(pack),
                         "--warehouse", str(root), "--json", *ADAPT))
    conn = warehouse.connect(root)
    cfg, origin = conn.execute("SELECT config, origin FROM runs WHERE run_id = ?",
                               [out["run_id"]]).fetchone()
    cfg = json.loads(cfg)
    assert origin == "adapt" and cfg["proposal"]["rank"] == 1
    assert cfg["adapt"]["guard"]["counterfactual"] is True  # the main job's guard, with
    assert cfg["adapt"]["guard"]["min_gain"] == 0.05  # the margin measured for it
    assert cfg["model"] == cfg["proposal"]["structure_key"].split("|")[0]
    assert cfg["policy"] == "learned" and cfg["fallback_policy"] == "rules"
    decisions = _decisions(root, out["run_id"])
    assert decisions and all(d["proposal"] == cfg["proposal"] for d in decisions)
    learned = [d for d in decisions if d.get("source") == "induction (in-process)"]
    assert all("evidence" in d for d in learned)
    # the run's problem row and meta-features join in SQL
    n = conn.execute("""SELECT count(*) FROM runs r JOIN problems p USING (problem_id)
                        JOIN problem_features f USING (problem_id)
                        WHERE r.run_id = ? AND p.name = 'wine'""", [out["run_id"]]).fetchone()
    assert n[0] > 10


def test_bad_combinations_are_one_line_errors(capsys) -> None:
    for extra, text in ((["--model", "mlp"], "drop --model"),
                        (["--resume", "x"], "drop --resume"),
                        (["--weight-decay", "0.1"], "drop --weight-decay")):
        assert main(["adapt", "--dataset", "iris", "--from-proposal", "--no-log", *extra]) == 2
        assert text in capsys.readouterr().err
    assert main(["adapt", "--dataset", "iris", "--service", "http://x", "--no-log"]) == 2
    assert "--service: only with --from-proposal" in capsys.readouterr().err
    # an adaptive run's length is --steps: no --epochs to be silently ignored
    assert main(["adapt", "--dataset", "iris", "--epochs", "3", "--no-log"]) == 2
    assert "unrecognized arguments: --epochs 3" in capsys.readouterr().err


def test_from_proposal_through_the_service_logs_into_its_warehouse(corpus, capsys) -> None:
    root, pack = corpus
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    with serving(root, env=LIMITS) as served:
        url = served.url
        out = json.loads(cli("adapt", "--dataset", "wine", "--from-proposal", "--service", url,
                             "--api-key", key, "--pack", str(pack), "--json", *ADAPT))
    decisions = _decisions(root, out["run_id"])  # logged through the service
    assert decisions and decisions[0]["proposal"]["source"].split()[0] in ("service", "pack")
    for d in decisions:  # a rewrite came from the service's proposer or, without
        if "policy" not in d:  # history for it, from the fallback; "none" names its policy
            assert d["source"] in (f"service {url}", "rules:fallback"), d
    assert "failed" not in capsys.readouterr().err  # the service answered every rewrite


def test_train_from_proposal_through_the_service_logs_every_trained_proposal_there(
        corpus) -> None:
    root, _ = corpus
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    with serving(root, env=LIMITS) as served:
        url = served.url
        out = json.loads(cli("train", "--dataset", "wine", "--from-proposal", "--top", "2",
                             "--service", url, "--api-key", key, "--epochs", "2", "--quiet",
                             "--json"))
    assert out["source"] == f"service {url}" and len(out["trained"]) == 2
    ids = [t["run_id"] for t in out["trained"]]
    got = warehouse.connect(root).execute(
        f"SELECT run_id FROM runs WHERE run_id IN ({', '.join('?' * len(ids))})", ids).fetchall()
    assert sorted(r for (r,) in got) == sorted(ids)


class KillServer:
    """Step hook: terminate the server before executed step `at`."""

    def __init__(self, proc: subprocess.Popen, at: int) -> None:
        self.proc, self.at = proc, at

    def before_step(self, run, x, y):
        if run.work == self.at:
            self.proc.kill()
            self.proc.wait(10)
        return x, y


def test_a_service_killed_mid_run_the_run_goes_on_and_is_logged_locally(
        corpus, tmp_path: Path) -> None:
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.induction.mainjob import LearnedRewritePolicy, service_rewrites
    from aicf_induct.problems import load_problem
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
    from aicf_induct.runtime.guard import GuardConfig
    from aicf_induct.runtime.policies import RuleBasedPolicy
    from aicf_induct.runtime.remote_recorder import RemoteRecorder
    from aicf_induct.runtime.spill import SpillRecorder
    from aicf_induct.runtime.trainer import TrainConfig

    root, _ = corpus
    local = tmp_path / "local_wh"
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    say = io.StringIO()
    problem = load_problem("iris", seed=1)
    with serving(root, env=LIMITS) as served:
        url = served.url
        policy = LearnedRewritePolicy(service_rewrites(url, key, features={
            "simple.n_rows": 150.0}), RuleBasedPolicy(), source="service", stream=say)
        rec = SpillRecorder(RemoteRecorder(url, key, close_timeout_s=1.0, stream=say),
                            lambda run: (warehouse.open_recorder(local), str(local)), stream=say)
        run = AdaptiveRun(problem, mlp_graph(parse_model_spec("mlp:depth=1,width=4"), 4, 3),
                          TrainConfig(lr=0.01, seed=1),
                          AdaptConfig(steps=300, warmup_steps=30, eval_every=10,
                                      epoch_trigger=2, guard=GuardConfig(steps=20)),
                          policy, recorder=rec, hooks=[KillServer(served.proc, 100)])
        try:
            result = run.run()
        finally:
            rec.close()
    assert result.status == "completed" and result.steps == 300
    text = say.getvalue()
    assert text.count("the rewrite proposer failed") == 1, text
    assert text.count("logged locally") == 1 and policy.down is not None
    after = [e for e in result.events if e.kind == "decision" and e.detail["work"] > 100
             and e.name != "none"]
    assert after and all(e.detail["source"] == "rules:fallback"
                         and "proposer_error" in e.detail["evidence"] for e in after)
    conn = warehouse.connect(local)  # nothing lost: the whole run is in the local warehouse
    status, steps = conn.execute("SELECT status, steps_taken FROM runs WHERE run_id = ?",
                                 [result.run_id]).fetchone()
    assert (status, steps) == ("completed", 300)
    n_events = conn.execute("SELECT count(*) FROM events WHERE run_id = ?",
                            [result.run_id]).fetchone()[0]
    n_steps = conn.execute("SELECT count(*) FROM steps WHERE run_id = ?",
                           [result.run_id]).fetchone()[0]
    assert n_events == len(result.events) and n_steps == result.work


def _logged(root: Path, run_id: str) -> dict[str, list]:
    conn = warehouse.connect(root)
    q = {"events": "SELECT step, kind, name, detail, metrics_before, metrics_after FROM events "
                   "WHERE run_id = ? ORDER BY \"at\"",
         "snapshots": "SELECT step, reason, fingerprint, param_count FROM ir_snapshots "
                      "WHERE run_id = ? ORDER BY step, reason",
         "results": "SELECT step, split, metric, value, final FROM results WHERE run_id = ? "
                    "ORDER BY step, split, metric, final"}
    out = {k: conn.execute(sql, [run_id]).fetchall() for k, sql in q.items()}
    # a rewrite's pause is wall-clock time, the one value two runs of it do not share
    out["events"] = [(*e[:3], e[3] and json.dumps({k: v for k, v in json.loads(e[3]).items()
                                                   if k != "pause_ms"}, sort_keys=True), *e[4:])
                     for e in out["events"]]
    return out


def test_through_the_service_it_logs_what_the_local_run_logs(corpus, tmp_path: Path,
                                                             monkeypatch) -> None:
    import shutil

    root, pack = corpus
    local, served_root = tmp_path / "local", tmp_path / "served"
    shutil.copytree(root, local)
    shutil.copytree(root, served_root)  # the same rewrite history on both sides
    # as the service does when it starts on served_root: a batch the server that an earlier
    # test killed mid-run left planned is rolled forward (else the served side's history
    # held one decision more, when the kill fell inside a commit)
    recover(local)
    argv = ["adapt", "--dataset", "wine", "--from-proposal", "--pack", str(pack), "--json",
            "--seed", "3", *ADAPT]
    monkeypatch.setenv("AICF_WAREHOUSE", str(local))
    a = json.loads(cli(*argv))
    key = cli("keys", "create", "--scope", "write", "--warehouse", str(served_root)).strip()
    monkeypatch.setenv("AICF_WAREHOUSE", str(served_root))  # its history, read in-process
    with serving(served_root, env=LIMITS) as served:
        url = served.url
        b = json.loads(cli(*argv, "--log-to", url, "--api-key", key))
    mine, theirs = _logged(local, a["run_id"]), _logged(served_root, b["run_id"])
    assert mine["events"] and any(k == "decision" for _, k, *_ in mine["events"])
    for kind in ("events", "snapshots", "results"):
        t, m = theirs[kind], mine[kind]
        # the first row that differs, whole (pytest truncates a long row's repr)
        i = next((i for i, (a, b) in enumerate(zip(t, m, strict=False)) if a != b),
                 min(len(t), len(m)))
        assert t == m, (f"{kind}: {len(t)} served, {len(m)} local rows; row {i}:\n"
                        f"served {t[i] if i < len(t) else None!r}\n"
                        f"local  {m[i] if i < len(m) else None!r}")
