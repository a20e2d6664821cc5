"""Rewrites for the FT-Transformer and resmlp families: add a block, add attention heads.
Outputs equal before and after to 1e-12 (float64, eval and training mode), optimizer state
kept by name with fresh state for the new parameters, reasons where they do not apply."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.frontend.families import parse_spec, spec_graph
from aicf_induct.ir import fingerprint
from aicf_induct.runtime.interpreter import interpret
from aicf_induct.runtime.model_state import ModelState, capture, install
from aicf_induct.runtime.transforms import RewriteError, make_transform
from tests.runtime.test_adaptive_fixtures import make_trainer, run_steps, toy_graph, toy_problem

FTT = "ftt:depth=2,d_token=8,heads=2,attention_dropout=0.1,act=gelu"
RESMLP = "resmlp:blocks=2,d=8,d_hidden=12,dropout1=0.1,dropout2=0.1"
# (spec, transform, options, number of sites)
CASES = [
    (FTT, "add_block", {}, 2), (FTT, "add_heads", {}, 2), (FTT, "add_heads", {"heads": 4}, 2),
    (RESMLP, "add_block", {}, 2), (FTT, "widen_tokens", {}, 1),
    (FTT, "widen_tokens", {"factor": 3}, 1),
]


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    return toy_problem("classification", n=300)


def _trainer(problem, spec: str, steps: int = 15):  # type: ignore[no-untyped-def]
    tr = make_trainer(problem, spec_graph(parse_spec(spec), problem.n_features,
                                          problem.n_outputs))
    run_steps(tr, steps)
    return tr


def _forward(problem, state: ModelState, training: bool) -> np.ndarray:  # type: ignore[no-untyped-def]
    out = interpret(state.graph, state.values, {"x": problem.val.X}, training=training,
                    seed=0, step=7)
    return out.values[state.graph.outputs[0]]


@pytest.mark.parametrize("spec,name,options,n_sites", CASES)
def test_function_preserved_at_every_site(problem, spec: str, name: str, options: dict,
                                          n_sites: int) -> None:
    state = capture(_trainer(problem, spec))
    t = make_transform(name, **options)
    assert t.function_preserving
    sites = t.sites(state.graph)
    assert len(sites) == n_sites
    for site in sites:
        new = t.apply(state, site, np.random.default_rng(1))
        assert fingerprint(new.graph) != fingerprint(state.graph)
        assert new.graph.param_count() > state.graph.param_count()
        for training in (False, True):  # dropout masks are keyed by node: old ones kept
            np.testing.assert_allclose(_forward(problem, new, training),
                                       _forward(problem, state, training), rtol=0, atol=1e-12)


@pytest.mark.parametrize("spec,name,options,n_sites", CASES[:4])
def test_optimizer_state_kept_new_parameters_fresh(problem, spec: str, name: str,
                                                   options: dict, n_sites: int) -> None:
    tr, control = _trainer(problem, spec), _trainer(problem, spec)
    state = capture(tr)
    site = make_transform(name, **options).sites(state.graph)[-1]
    new = make_transform(name, **options).apply(state, site, np.random.default_rng(1))
    opt, new_opt = state.optimizer, new.optimizer
    assert opt is not None and new_opt is not None
    for p, step in opt["steps"].items():  # every old parameter keeps its slots and count
        assert new_opt["steps"][p] == step
        for slot, arr in opt["slots"][p].items():
            np.testing.assert_array_equal(new_opt["slots"][p][slot], arr)
    added = set(new.graph.params) - set(state.graph.params)
    assert added and not added & set(new_opt["steps"]) and not added & set(new_opt["slots"])
    install(tr, new)
    # the new branch adds 0 and passes no gradient to the old parameters on the first step
    # (its output layer is zero): the next loss is the control's, then both train on
    ours, theirs = run_steps(tr, 3), run_steps(control, 3)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-12, abs=1e-12)
    assert all(np.isfinite(ours))
    assert ours[1:] != theirs[1:]  # the new parameters have moved


def test_reasons_where_they_do_not_apply(problem) -> None:  # type: ignore[no-untyped-def]
    ftt = spec_graph(parse_spec(FTT), problem.n_features, problem.n_outputs)
    block, heads = make_transform("add_block"), make_transform("add_heads", heads=3)
    assert "is a linear, not an add" in (block.applicable(ftt, "head") or "")
    attn_add = next(n.id for n in ftt.nodes if n.op == "add")
    assert "ends the attention half of a transformer block" in (
        block.applicable(ftt, attn_add) or "")
    attn = next(n.id for n in ftt.nodes if n.op == "attention")
    assert heads.applicable(ftt, attn) == (f"heads=3 does not divide the token width d=8 of "
                                           f"'{attn}'")
    assert "not an attention node" in (heads.applicable(ftt, "head") or "")
    mlp = toy_graph(problem, "mlp:depth=2,width=8,residual=true")
    add = next(n.id for n in mlp.nodes if n.op == "add")
    assert "(linear -> relu) does not end in a linear or attention layer" in (
        block.applicable(mlp, add) or "")
    assert block.sites(mlp) == [] and make_transform("add_heads").sites(mlp) == []
    state = capture(make_trainer(problem, mlp))
    with pytest.raises(RewriteError, match="add_block at"):
        block.apply(state, add, np.random.default_rng(0))
    with pytest.raises(RewriteError, match="heads must be an int >= 1"):
        make_transform("add_heads", heads=0)


def test_widen_tokens_remaps_values_and_adam_state(problem) -> None:  # type: ignore[no-untyped-def]
    tr, control = _trainer(problem, FTT), _trainer(problem, FTT)
    state = capture(tr)
    t = make_transform("widen_tokens", factor=2)
    site = t.sites(state.graph)[0]
    new = t.apply(state, site, np.random.default_rng(0))
    old_opt, opt = state.optimizer, new.optimizer
    assert old_opt is not None and opt is not None
    assert new.graph.node(site).attrs["d_token"] == 16 and opt["steps"] == old_opt["steps"]
    src = np.repeat(np.arange(8), 2)

    def slots(o: dict, name: str) -> tuple[np.ndarray, np.ndarray]:
        return o["slots"][name]["m"], o["slots"][name]["v"]

    # a writer (value a = 1, gradient b = 1/2): m/2, v/4
    m0, v0 = slots(old_opt, f"{site}.weight")
    m1, v1 = slots(opt, f"{site}.weight")
    np.testing.assert_array_equal(new.values[f"{site}.weight"],
                                  state.values[f"{site}.weight"][:, src])
    np.testing.assert_allclose(m1, m0[:, src] / 2)
    np.testing.assert_allclose(v1, v0[:, src] / 4)
    # a reader's columns (a = 1/2, b = 1): m kept, v * 4
    m0, v0 = slots(old_opt, "head.weight")
    m1, v1 = slots(opt, "head.weight")
    np.testing.assert_allclose(new.values["head.weight"], state.values["head.weight"][:, src] / 2)
    np.testing.assert_allclose(m1, m0[:, src])
    np.testing.assert_allclose(v1, v0[:, src] * 4)
    # attention q rows: both factors 1/sqrt(2) more (and the columns read: a = 1/(2 sqrt 2))
    name = next(n.params["in_weight"] for n in new.graph.nodes if n.op == "attention")
    m0, v0 = slots(old_opt, name)
    m1, v1 = slots(opt, name)
    np.testing.assert_allclose(new.values[name][:16], state.values[name][src][:, src]
                               / (2 * np.sqrt(2)))
    np.testing.assert_allclose(m1[:16], m0[src][:, src] / np.sqrt(2))
    np.testing.assert_allclose(v1[:16], v0[src][:, src] * 4)
    install(tr, new)
    ours, theirs = run_steps(tr, 10), run_steps(control, 10)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-12)  # the same function (training mode)
    # Adam moves the copies together as the old entries moved: the runs stay close
    assert np.mean(np.abs(np.array(ours) / np.array(theirs) - 1)) < 0.02


def test_widen_tokens_reasons(problem) -> None:  # type: ignore[no-untyped-def]
    from aicf_induct.ir import GraphBuilder
    from tests.compiler.graphs import cnn

    t = make_transform("widen_tokens")
    assert t.sites(toy_graph(problem)) == [] and t.sites(cnn(10)) == []
    assert "is a linear, not a tokenizer" in (t.applicable(toy_graph(problem), "head") or "")
    b = GraphBuilder("flat")  # tokens flattened: the channels mix with the token axis
    tok = b.add("numeric_tokenizer", [b.input([None, 4])], {"d_token": 3})
    g = b.output(b.add("linear", [b.add("reshape", [tok], {"shape": [12]})],
                       {"out_features": 2}, id="head"))
    assert t.applicable(g, tok) == (f"the token stream of '{tok}' reaches 'reshape' (reshape), "
                                    "which has no widened form")
    b = GraphBuilder("mixed")  # a mean over the channels
    tok = b.add("numeric_tokenizer", [b.input([None, 4])], {"d_token": 3})
    g = b.output(b.add("linear", [b.add("mean", [tok], {"axis": -1})], {"out_features": 2}))
    assert t.applicable(g, tok) == "'mean' reduces over the token channels"
    with pytest.raises(RewriteError, match="factor must be an int >= 2"):
        make_transform("widen_tokens", factor=1)


def test_widen_tokens_of_an_embedding() -> None:
    from aicf_induct.ir.init import initial_values
    from tests.compiler.graphs import tokens

    g = tokens(7, 5, 3, d=4)  # embedding -> linear: only the reader changes with it
    state = ModelState(g, initial_values(g.params.values(), 0))
    t = make_transform("widen_tokens", factor=3)
    assert t.sites(g) == ["embedding"]
    new = t.apply(state, "embedding", np.random.default_rng(0))
    assert new.graph.node("embedding").attrs["embedding_dim"] == 12
    ids = np.random.default_rng(1).integers(0, 7, (6, 5))
    before = interpret(g, state.values, {"x": ids}).values["head"]
    after = interpret(new.graph, new.values, {"x": ids}).values["head"]
    np.testing.assert_allclose(after, before, rtol=0, atol=1e-12)
