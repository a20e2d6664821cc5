"""Transforms: function preservation (float64, eval mode, <= 1e-6 relative), honest flags,
parameter and optimizer-state remapping rules, applicability reasons."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aicf_induct.ir import canonical
from aicf_induct.ir.validate import validate
from aicf_induct.runtime.interpreter import interpret
from aicf_induct.runtime.model_state import ModelState, capture, install
from aicf_induct.runtime.transforms import (
    TRANSFORMS,
    Deepen,
    Prune,
    ResidualBranch,
    RewriteError,
    Widen,
    make_transform,
)
from aicf_induct.runtime.transforms.widen import split_map
from tests.runtime.test_adaptive_fixtures import make_trainer, run_steps, toy_graph, toy_problem

SPECS = [
    "mlp:depth=2,width=8",
    "mlp:depth=2,width=8,act=gelu,norm=batchnorm,dropout=0.1",
    "mlp:depth=3,width=6,act=tanh,norm=layernorm,norm_place=post",
    "mlp:depth=2,width=8,act=silu,residual=true",
]
# every option set of every transform the tests sweep
VARIANTS = [
    ("widen", {}), ("widen", {"units": 3}), ("widen", {"noise": 0.01}),
    ("widen", {"init": "fresh", "units": 3}),
    ("deepen", {}), ("deepen", {"residual": True}), ("residual", {}),
    ("normalize", {"kind": "layernorm"}), ("normalize", {"kind": "batchnorm"}),
    ("activation", {"to": "gelu"}), ("activation", {"to": "relu"}),
    ("prune", {}), ("prune", {"by": "gradient", "units": 2}),
    ("dropout", {"p": 0.2}), ("dropout", {"p": 0.0}),
]


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    return toy_problem("classification", n=300)


def _trained(problem, spec: str, steps: int = 15):  # type: ignore[no-untyped-def]
    tr = make_trainer(problem, toy_graph(problem, spec))
    run_steps(tr, steps)
    return tr


def _outputs(problem, state: ModelState) -> np.ndarray:  # type: ignore[no-untyped-def]
    tr = make_trainer(problem, state.graph)
    install(tr, state)
    return tr.executor.predict(problem.val.X)


@pytest.mark.parametrize("spec", SPECS)
def test_preserving_transforms_keep_outputs_and_others_change_them(problem, spec) -> None:
    tr = _trained(problem, spec)
    state = capture(tr, with_grads=True)
    before = tr.executor.predict(problem.val.X)
    scale = np.abs(before).max()
    applied = 0
    for name, opts in VARIANTS:
        t = make_transform(name, **opts)
        for site in t.sites(state.graph):
            new = t.apply(state, site, np.random.default_rng(1))
            rel = np.abs(_outputs(problem, new) - before).max() / scale
            applied += 1
            if t.function_preserving:
                assert rel <= 1e-6, (name, opts, site, rel)
            elif name != "widen" and opts.get("kind") != "batchnorm":
                # (noisy widen changes little, at second order; batchnorm: see below)
                assert rel > 1e-6, (name, opts, site, rel)
            validate(new.graph)
            again = canonical.from_json(canonical.to_json(new.graph))
            assert again == new.graph
    assert applied >= 8
    # the input state was not touched
    assert np.array_equal(tr.executor.predict(problem.val.X), before)


def test_every_transform_applies_somewhere_and_training_goes_on(problem) -> None:
    tr = _trained(problem, "mlp:depth=2,width=8,act=gelu,dropout=0.1")
    state = capture(tr, with_grads=True)
    for name, opts in VARIANTS:
        t = make_transform(name, **opts)
        sites = t.sites(state.graph)
        if name == "activation" and opts["to"] == "gelu":
            assert sites == []  # already gelu everywhere
            continue
        assert sites, (name, opts)
        new = t.apply(state, sites[-1], np.random.default_rng(0))
        tr2 = make_trainer(problem, new.graph)
        install(tr2, new)
        tr2.step_count = tr.step_count
        losses = run_steps(tr2, 3)
        assert np.all(np.isfinite(losses)), name


def test_widen_remaps_parameters_and_adam_state_by_the_documented_rule(problem) -> None:
    tr = _trained(problem, "mlp:depth=2,width=8,norm=batchnorm")
    st = capture(tr)
    new = Widen(units=5).apply(st, "blocks.0.linear", np.random.default_rng(3))
    g = split_map(8, 13, np.random.default_rng(3))
    s = 1.0 / np.bincount(g, minlength=8)[g]
    w, nw = "blocks.0.linear.weight", new.values["blocks.0.linear.weight"]
    assert np.array_equal(nw, st.values[w][g])
    for buf in ("blocks.0.norm.running_mean", "blocks.0.norm.running_var"):
        assert np.array_equal(new.values[buf], st.values[buf][g])
    out = "blocks.1.linear.weight"
    np.testing.assert_allclose(new.values[out], st.values[out][:, g] * s)
    m, v = st.opt_slots(w)["m"], st.opt_slots(w)["v"]
    np.testing.assert_allclose(new.opt_slots(w)["m"], m[g] * s[:, None])
    np.testing.assert_allclose(new.opt_slots(w)["v"], v[g] * s[:, None] ** 2)
    np.testing.assert_allclose(new.opt_slots(out)["m"], st.opt_slots(out)["m"][:, g])
    np.testing.assert_allclose(new.opt_slots(out)["v"], st.opt_slots(out)["v"][:, g] / s**2)
    assert new.optimizer["steps"] == st.optimizer["steps"]  # inherited
    assert new.graph.params[out].shape == (8, 13)
    assert new.graph.params[out].init == "uniform:" + repr(1 / math.sqrt(13))


def test_fresh_widening_adds_random_units_with_zero_outgoing_weights_and_state(problem) -> None:
    tr = _trained(problem, "mlp:depth=2,width=8,norm=batchnorm")
    st = capture(tr)
    new = Widen(units=4, init="fresh").apply(st, "blocks.0.linear", np.random.default_rng(0))
    w = new.values["blocks.0.linear.weight"]
    assert np.array_equal(w[:8], st.values["blocks.0.linear.weight"]) and w.shape == (12, 4 + 4)
    assert np.abs(w[8:]).max() <= 1 / math.sqrt(8) and np.abs(w[8:]).min() > 0
    out = new.values["blocks.1.linear.weight"]
    assert np.array_equal(out[:, :8], st.values["blocks.1.linear.weight"])
    assert not out[:, 8:].any()
    assert np.array_equal(new.values["blocks.0.norm.running_var"][8:], np.ones(4))
    for name, axis in (("blocks.0.linear.weight", 0), ("blocks.1.linear.weight", 1)):
        for slot in ("m", "v"):
            fresh = np.take(new.opt_slots(name)[slot], np.arange(8, 12), axis=axis)
            assert not fresh.any()
    assert new.optimizer["steps"] == st.optimizer["steps"]


def test_widen_with_sgd_momentum_follows_the_gradient_scale(problem) -> None:
    tr = make_trainer(problem, toy_graph(problem), optimizer="sgd", lr=0.05)
    run_steps(tr, 5)
    st = capture(tr)
    new = Widen(factor=2.0).apply(st, "blocks.1.linear", np.random.default_rng(0))
    b = "blocks.1.linear.bias"
    np.testing.assert_allclose(new.opt_slots(b)["momentum"][:8], st.opt_slots(b)["momentum"] / 2)
    g = split_map(8, 16, np.random.default_rng(0))
    assert np.array_equal(new.opt_slots("head.weight")["momentum"],
                          st.opt_slots("head.weight")["momentum"][:, g])


def test_widen_noise_breaks_symmetry_and_exact_copies_stay_tied(problem) -> None:
    tr = _trained(problem, "mlp:depth=1,width=4")
    st = capture(tr)
    diffs = {}
    for noise in (0.0, 0.05):
        new = Widen(units=4, noise=noise).apply(st, "blocks.0.linear", np.random.default_rng(0))
        g = split_map(4, 8, np.random.default_rng(0))
        tr2 = make_trainer(problem, new.graph)
        install(tr2, new)
        tr2.step_count = tr.step_count
        run_steps(tr2, 20)
        w = tr2.store.params["blocks.0.linear.weight"]
        diffs[noise] = max(np.abs(w[j] - w[g[j]]).max() for j in range(4, 8))
    assert diffs[0.0] < 1e-9  # copies under Adam with the remapped state: tied
    assert diffs[0.05] > 1e-3  # noise pulls them apart


def test_inserted_batchnorm_is_the_identity_in_eval_mode_only(problem) -> None:
    st = capture(_trained(problem, "mlp:depth=1,width=6"))
    new = make_transform("normalize", kind="batchnorm").apply(st, "blocks.0.linear",
                                                             np.random.default_rng(0))
    assert not make_transform("normalize", kind="batchnorm").function_preserving
    feeds = {"x": problem.val.X}
    for training, same in ((False, True), (True, False)):
        old = interpret(st.graph, st.values, feeds, training=training).values["head"]
        out = interpret(new.graph, new.values, feeds, training=training).values["head"]
        assert np.allclose(old, out, rtol=1e-12, atol=1e-12) == same


def test_deepen_uses_the_idempotent_form_after_relu_and_a_residual_one_otherwise(problem) -> None:
    relu = capture(_trained(problem, "mlp:depth=1,width=6"))
    gelu = capture(_trained(problem, "mlp:depth=1,width=6,act=gelu"))
    a = Deepen().apply(relu, "blocks.0.act", np.random.default_rng(0))
    b = Deepen().apply(gelu, "blocks.0.act", np.random.default_rng(0))
    new_ops = lambda old, new: [n.op for n in new.graph.nodes  # noqa: E731
                                if n.id not in old.graph.node_map()]
    assert new_ops(relu, a) == ["linear", "relu"]
    assert new_ops(gelu, b) == ["linear", "gelu", "linear", "add"]
    for state, new in ((relu, a), (gelu, b)):
        fresh = set(new.graph.params) - set(state.graph.params)
        assert fresh and not fresh & set(new.optimizer["steps"])  # zero moments, step 0
        assert all(new.optimizer["steps"][k] == state.optimizer["steps"][k]
                   for k in state.graph.params)
    lin = next(n for n in a.graph.nodes if n.id.endswith(".deep.linear"))
    assert np.array_equal(a.values[lin.params["weight"]], np.eye(6))


def test_prune_cuts_values_and_slots_and_gradient_saliency_needs_gradients(problem) -> None:
    tr = _trained(problem, "mlp:depth=2,width=8")
    st = capture(tr, with_grads=True)
    scores = Prune(units=3).scores(st, "blocks.0.linear")
    keep = np.sort(np.argsort(scores, kind="stable")[3:])
    new = Prune(units=3).apply(st, "blocks.0.linear", np.random.default_rng(0))
    w = "blocks.1.linear.weight"
    assert np.array_equal(new.values[w], st.values[w][:, keep])
    assert np.array_equal(new.opt_slots(w)["v"], st.opt_slots(w)["v"][:, keep])
    assert new.graph.node("blocks.0.linear").attrs["out_features"] == 5
    Prune(by="gradient").apply(st, "blocks.0.linear", np.random.default_rng(0))
    st.grads = None
    with pytest.raises(RewriteError, match="gradients"):
        Prune(by="gradient").apply(st, "blocks.0.linear", np.random.default_rng(0))


def test_not_applicable_says_why(problem) -> None:
    g = toy_graph(problem, "mlp:depth=2,width=8,norm=layernorm")
    assert "graph output" in Widen().applicable(g, "head")
    assert "normalises across units" in Widen().applicable(g, "blocks.0.linear")
    assert "not a linear" in Widen().applicable(g, "blocks.0.act")
    assert "no node" in Deepen().applicable(g, "nope")
    assert Widen(max_width=10).applicable(g, "blocks.0.linear") is not None
    r = toy_graph(problem, "mlp:depth=2,width=8,residual=true")
    assert "residual join" in ResidualBranch().applicable(r, "blocks.1.block.linear")
    with pytest.raises(RewriteError, match="widen at 'head'"):
        Widen().apply(capture(_trained(problem, "mlp:depth=1,width=4", 1)), "head",
                      np.random.default_rng(0))


def test_registry_names_and_bad_options() -> None:
    assert set(TRANSFORMS) == {"widen", "deepen", "residual", "normalize", "activation",
                               "prune", "dropout", "add_block", "add_heads",
                               "widen_tokens"}
    with pytest.raises(RewriteError, match="unknown transform"):
        make_transform("grow")
    with pytest.raises(RewriteError, match="bad options"):
        make_transform("widen", wide=3)
    with pytest.raises(RewriteError):
        make_transform("dropout", p=1.5)


def test_a_graph_s_sites_read_its_types_once_not_once_per_site(monkeypatch) -> None:
    """Each candidate site inferred the whole graph's types again (and looked its node up by
    a scan): finding the sites was quadratic in the graph's size, 24 s of a POST
    /v1/rewrites for a 4,000-node IR. Counted, not timed."""
    from aicf_induct.frontend.families import parse_spec, spec_graph
    from aicf_induct.runtime.transforms import TRANSFORMS, make_transform, reading, surgery

    d = canonical.to_dict(spec_graph(parse_spec("mlp:depth=1,width=4"), 4, 3))
    nodes = d["nodes"]
    at = next(i for i, n in enumerate(nodes) if n["op"] == "relu")
    chain = [{**nodes[at], "id": f"r{k}", "inputs": [f"r{k - 1}" if k else nodes[at]["id"]]}
             for k in range(200)]
    for n in nodes[at + 1:]:
        n["inputs"] = ["r199" if i == nodes[at]["id"] else i for i in n["inputs"]]
    graph = canonical.from_dict({**d, "nodes": nodes[:at + 1] + chain + nodes[at + 1:]})
    calls = []
    real = surgery.infer_types
    for module in (surgery, reading):  # every place the transforms infer types from
        monkeypatch.setattr(module, "infer_types",
                            lambda *a, **k: calls.append(1) or real(*a, **k))
    for name in TRANSFORMS:
        calls.clear()
        sites = make_transform(name).sites(graph)
        assert len(calls) <= 1, (name, len(calls))
        if name in ("deepen", "dropout", "activation"):
            assert len(sites) == 201  # every relu of the chain
