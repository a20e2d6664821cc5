"""`POST /v1/rewrites` checks what it is given as strictly as its neighbours: meta-features
as `/v1/proposals` checks them (one function: the same 422 for the same features), and the
IR's attributes against each op's spec (a 422 naming the node and the attribute)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.api.conftest import Server
from tests.api.test_rewrites import BODY
from tests.api.test_service import problem

FEATURES = [
    {"simple.n_rows": 150, "bogus.feature": 3},  # was 200 here, 422 from /v1/proposals
    {"bogus.feature": 3, "other.bogus": 1},
    {"f.bogus": 1.0, "simple.n_rows": 150},
    {"simple.n_rows": 0},
    {"simple.n_rows": 150, "simple.n_features": 0},
]


@pytest.mark.parametrize("features", FEATURES)
def test_features_are_refused_as_proposals_refuses_them(server: Server,
                                                        features: dict[str, float]) -> None:
    with server.client() as c:
        rewrites = c.post("/v1/rewrites", json={**BODY, "features": features})
        proposals = c.post("/v1/proposals", json={"features": features, "top": 1})
    body = problem(rewrites, 422)
    assert {k: body[k] for k in ("type", "field", "detail")} == \
        {k: problem(proposals, 422)[k] for k in ("type", "field", "detail")}
    assert body["field"].startswith("body.features.")


def test_features_the_model_reads_are_taken(server: Server) -> None:
    with server.client() as c:
        names = c.get("/v1/proposals/features").json()["features"]
        r = c.post("/v1/rewrites", json={**BODY, "features": {n: 1.0 for n in names}})
    assert r.status_code == 200, r.text


def _ir_with(node_id: str, attr: str, value: Any) -> dict[str, Any]:
    ir = copy.deepcopy(BODY["ir"])
    node = next(n for n in ir["nodes"] if n["id"] == node_id)
    node["attrs"][attr] = value
    if attr == "out_features" and type(value) is int:  # its parameters sized to match: only
        # the value is wrong (a parameter's shape of NaN is the document parser's to refuse)
        for p in ir["params"]:
            if p["owner"] == node_id:
                p["shape"] = [value] if p["role"] == "bias" else [value, p["shape"][1]]
    return ir


@pytest.mark.parametrize(("node", "attr", "value", "says"), [
    ("blocks.0.linear", "bias", "zz", "must be true or false, got 'zz'"),
    ("blocks.0.linear", "bias", float("nan"), "must be true or false, got nan"),
    ("blocks.0.linear", "bias", 0, "must be true or false, got 0"),
    ("head", "out_features", 10**12, "got 1000000000000"),
    ("head", "out_features", float("nan"), "got nan"),
    ("blocks.0.linear", "out_features", True, "got True"),
])
def test_a_malformed_attribute_is_a_422_naming_node_and_attribute(
        server: Server, node: str, attr: str, value: Any, says: str) -> None:
    ir = _ir_with(node, attr, value)
    with server.client() as c:  # NaN as JSON's NaN token, which the server's parser reads
        r = c.post("/v1/rewrites", content=json.dumps({**BODY, "ir": ir}),
                   headers={"Content-Type": "application/json"})
    body = problem(r, 422, "body.ir")
    assert f"node '{node}': linear attribute '{attr}' must be " in body["detail"], body
    assert says in body["detail"]
