"""Optimizers and gradient clipping against torch.optim / torch.nn.utils (CPU, float64)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.runtime.clipping import clip_grad_norm_, global_grad_norm
from aicf_induct.runtime.optimizers import (
    Adam,
    AdamConfig,
    AdamWConfig,
    Optimizer,
    SGDConfig,
    make_optimizer,
)
from aicf_induct.runtime.params import ParamStore

SHAPES = {"w1": (5, 3), "b1": (5,), "w2": (2, 5), "scale": ()}
RTOL, ATOL = 1e-11, 1e-13

# (our name, kwargs shared with torch); torch's class is the same name.
CASES = [
    ("sgd", {}),
    ("sgd", {"momentum": 0.9}),
    ("sgd", {"momentum": 0.9, "nesterov": True}),
    ("sgd", {"momentum": 0.9, "weight_decay": 0.05}),
    ("sgd", {"momentum": 0.8, "dampening": 0.3}),
    ("sgd", {"weight_decay": 0.1}),
    ("adam", {}),
    ("adam", {"weight_decay": 0.1}),
    ("adam", {"betas": (0.8, 0.99), "eps": 1e-6}),
    ("adamw", {}),
    ("adamw", {"weight_decay": 0.1, "betas": (0.85, 0.995)}),
]
TORCH_CLASS = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}


def _lr(step: int) -> float:
    return 0.05 * (1 + math.cos(math.pi * step / 150)) / 2 + 1e-3  # varies every step


class Pair:
    """Our optimizer and torch's, on the same initial weights, fed the same gradients."""

    def __init__(self, name: str, kwargs: dict[str, Any], seed: int = 0) -> None:
        self.torch = pytest.importorskip("torch")
        self.rng = np.random.default_rng(seed)
        init = {n: self.rng.normal(size=s) for n, s in SHAPES.items()}
        self.store = ParamStore.from_arrays(init)
        self.ours = make_optimizer(name, lr=_lr(0), **kwargs)
        self.tparams = {n: self.torch.tensor(a, requires_grad=True) for n, a in init.items()}
        cls = getattr(self.torch.optim, TORCH_CLASS[name])
        self.theirs = cls(list(self.tparams.values()), lr=_lr(0), **kwargs)
        self.t = 0

    def add(self, name: str, value: np.ndarray, position: int) -> None:
        """The rewrite case: a new parameter joins both; ours remaps by name."""
        arrays = {n: self.store.params[n] for n in self.store.names}
        items = list(arrays.items())
        items.insert(position, (name, value))
        store = ParamStore.from_arrays(dict(items))
        self.ours.load_state_dict(self.ours.state_dict(), store)
        self.store = store
        tensor = self.torch.tensor(value, requires_grad=True)
        self.tparams[name] = tensor
        self.theirs.add_param_group({"params": [tensor]})

    def run(self, steps: int) -> None:
        for _ in range(steps):
            lr = _lr(self.t)
            for name, tensor in self.tparams.items():
                g = self.rng.normal(size=tensor.shape)
                self.store.grads[name][...] = g
                tensor.grad = self.torch.tensor(g)
            for group in self.theirs.param_groups:
                group["lr"] = lr
            self.ours.step(self.store, lr)
            self.theirs.step()
            self.t += 1

    def assert_agree(self) -> None:
        for name, tensor in self.tparams.items():
            np.testing.assert_allclose(
                self.store.params[name], tensor.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=name
            )


@pytest.mark.torch
@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_matches_torch_over_100_steps(name: str, kwargs: dict[str, Any]) -> None:
    pair = Pair(name, kwargs)
    pair.run(100)
    pair.assert_agree()


@pytest.mark.torch
@pytest.mark.parametrize(("name", "kwargs"), [CASES[1], CASES[2], CASES[4], CASES[7], CASES[10]])
def test_parameter_added_mid_run_matches_torch_add_param_group(
    name: str, kwargs: dict[str, Any]
) -> None:
    pair = Pair(name, kwargs, seed=1)
    pair.run(10)
    pair.add("new", np.random.default_rng(2).normal(size=(3, 2)), position=2)
    opt = pair.ours
    assert opt.step_count("new") == 0 and opt.step_count("w1") == 10
    for slot in opt.slots("new").values():
        assert np.all(slot == 0.0)
    pair.run(30)  # mixed step counts: the per-parameter path
    pair.assert_agree()
    assert opt.step_count("new") == 30 and opt.step_count("w2") == 40


def _stepped(name: str = "adam", steps: int = 5, **kwargs: Any) -> tuple[Optimizer, ParamStore]:
    rng = np.random.default_rng(3)
    store = ParamStore.from_arrays({n: rng.normal(size=s) for n, s in SHAPES.items()})
    opt = make_optimizer(name, lr=0.01, **kwargs)
    for _ in range(steps):
        store.grad[...] = rng.normal(size=store.numel())
        opt.step(store, 0.01)
    return opt, store


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
def test_update_ratio_is_relative_step_norm(name: str) -> None:
    opt, store = _stepped(name, momentum=0.9) if name == "sgd" else _stepped(name)
    before = store.data.copy()
    store.grad[...] = np.random.default_rng(4).normal(size=store.numel())
    ratio = opt.step(store, 0.02)
    expected = np.linalg.norm(store.data - before) / np.linalg.norm(before)
    assert ratio == pytest.approx(expected, rel=1e-12)


def test_update_ratio_is_zero_for_zero_parameters() -> None:
    store = ParamStore.from_arrays({"w": np.zeros(3)})
    store.grad[...] = 1.0
    assert make_optimizer("sgd", lr=0.1).step(store, 0.1) == 0.0


def test_slots_are_views_of_flat_buffers() -> None:
    opt, _ = _stepped("adam")
    slots = opt.slots("b1")
    assert set(slots) == {"m", "v"} and slots["m"].shape == SHAPES["b1"]
    slots["m"][...] = 42.0  # writes the optimizer's state
    np.testing.assert_array_equal(opt.state_dict()["slots"]["b1"]["m"], 42.0)
    sgd, _ = _stepped("sgd", momentum=0.9)
    assert set(sgd.slots("w1")) == {"momentum"}
    plain, _ = _stepped("sgd")
    assert plain.slots("w1") == {}


def test_state_dict_round_trip_continues_identically() -> None:
    opt, store = _stepped("adamw", steps=7)
    state = opt.state_dict()
    assert state["kind"] == "adamw" and state["config"]["weight_decay"] == 0.01
    assert state["steps"] == dict.fromkeys(SHAPES, 7)
    twin_store = store.copy()
    twin = make_optimizer("adamw", lr=0.01)
    twin.load_state_dict(state, twin_store)
    grad = np.random.default_rng(5).normal(size=store.numel())
    for s, o in ((store, opt), (twin_store, twin)):
        s.grad[...] = grad
        o.step(s, 0.01)
    np.testing.assert_array_equal(twin_store.data, store.data)


def test_state_dict_holds_copies() -> None:
    opt, _ = _stepped("adam")
    m_before = opt.slots("w2")["m"].copy()
    opt.state_dict()["slots"]["w2"]["m"][...] = 0.0
    np.testing.assert_array_equal(opt.slots("w2")["m"], m_before)


def test_load_drops_removed_and_zeroes_new() -> None:
    opt, store = _stepped("sgd", momentum=0.9)
    momentum_w2 = opt.slots("w2")["momentum"].copy()
    smaller = ParamStore.from_arrays({"w2": store.params["w2"], "extra": np.ones(2)})
    opt.load_state_dict(opt.state_dict(), smaller)
    assert set(opt.state_dict()["steps"]) == {"w2", "extra"}
    np.testing.assert_array_equal(opt.slots("w2")["momentum"], momentum_w2)
    np.testing.assert_array_equal(opt.slots("extra")["momentum"], 0.0)
    assert opt.step_count("w2") == 5 and opt.step_count("extra") == 0
    with pytest.raises(KeyError, match="w1"):
        opt.slots("w1")


def test_remapped_slots_of_a_reshaped_parameter() -> None:
    """A widened layer: the rewrite builds the new moments and hands them in by name."""
    opt, store = _stepped("adam")
    state = opt.state_dict()
    m, v = state["slots"]["b1"]["m"], state["slots"]["b1"]["v"]
    state["slots"]["b1"] = {"m": np.concatenate([m, m[:2]]), "v": np.concatenate([v, v[:2]])}
    arrays = store.state_arrays()
    arrays["b1"] = np.concatenate([arrays["b1"], arrays["b1"][:2]])
    wider = ParamStore.from_arrays(arrays)
    opt.load_state_dict(state, wider)
    np.testing.assert_array_equal(opt.slots("b1")["m"], state["slots"]["b1"]["m"])
    assert opt.step_count("b1") == 5


def test_load_rejects_bad_state() -> None:
    opt, store = _stepped("adam")
    state = opt.state_dict()
    with pytest.raises(ValueError, match="sgd"):
        make_optimizer("sgd", lr=0.1).load_state_dict(state, store)
    wrong = opt.state_dict()
    wrong["slots"]["w1"]["m"] = np.zeros(3)
    with pytest.raises(ValueError, match="shape"):
        opt.load_state_dict(wrong, store)
    del state["slots"]["w1"]["v"]
    with pytest.raises(ValueError, match="lacks slot 'v'"):
        opt.load_state_dict(state, store)


def test_step_refuses_a_changed_layout() -> None:
    opt, _ = _stepped("adam")
    other = ParamStore.from_arrays({"w": np.ones(3)})
    with pytest.raises(ValueError, match="load_state_dict"):
        opt.step(other, 0.01)


def test_bind_allocates_state_before_the_first_step() -> None:
    store = ParamStore.from_arrays({"w": np.ones((2, 2))})
    opt = make_optimizer("adam", lr=0.1)
    opt.bind(store)
    assert opt.slots("w")["v"].shape == (2, 2) and opt.step_count("w") == 0


def test_configs() -> None:
    adamw = make_optimizer("adamw", lr=1e-3)
    assert isinstance(adamw, Adam) and adamw.config == AdamWConfig(lr=1e-3)
    assert adamw.config.weight_decay == 0.01 and adamw.config.decoupled
    assert make_optimizer("adam", lr=1e-3).config == AdamConfig(lr=1e-3)
    assert make_optimizer("adam", lr=1e-3, betas=[0.8, 0.9]).config.betas == (0.8, 0.9)
    assert make_optimizer("sgd", lr=0.1, momentum=0.9).config == SGDConfig(0.1, momentum=0.9)


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("rmsprop", {"lr": 0.1}, "unknown optimizer 'rmsprop'"),
        ("sgd", {}, "needs a learning rate"),
        ("sgd", {"lr": -0.1}, "sgd lr must be in"),
        ("sgd", {"lr": "0.1"}, "sgd lr must be a number"),
        ("sgd", {"lr": float("nan")}, "sgd lr must be a number"),
        ("sgd", {"lr": 0.1, "nesterov": True}, "nesterov needs momentum"),
        ("sgd", {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "nesterov": True}, "nesterov"),
        ("sgd", {"lr": 0.1, "dampening": 1.5}, "dampening"),
        ("sgd", {"lr": 0.1, "betas": (0.9, 0.9)}, "unknown option"),
        ("adam", {"lr": 0.1, "betas": (1.0, 0.999)}, r"betas\[0\]"),
        ("adam", {"lr": 0.1, "betas": (0.9,)}, "two numbers"),
        ("adam", {"lr": 0.1, "eps": -1e-8}, "eps"),
        ("adam", {"lr": 0.1, "weight_decay": -1}, "weight_decay"),
        ("adamw", {"lr": 0.1, "decoupled": False}, "unknown option"),
    ],
)
def test_bad_config_raises_config_error(name: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_optimizer(name, **kwargs)


def test_negative_step_lr_raises() -> None:
    opt, store = _stepped("sgd")
    with pytest.raises(ConfigError, match="learning rate"):
        opt.step(store, -1.0)


# -- clipping ---------------------------------------------------------------------------


def _grad_store(scale: float) -> ParamStore:
    rng = np.random.default_rng(6)
    store = ParamStore.from_arrays({n: rng.normal(size=s) for n, s in SHAPES.items()})
    store.grad[...] = scale * rng.normal(size=store.numel())
    return store


def test_global_grad_norm() -> None:
    store = _grad_store(3.0)
    assert global_grad_norm(store) == pytest.approx(np.linalg.norm(store.grad), rel=1e-14)


@pytest.mark.torch
@pytest.mark.parametrize("max_norm", [0.5, 1.0, 1e3])
def test_clip_matches_torch(max_norm: float) -> None:
    torch = pytest.importorskip("torch")
    store = _grad_store(2.0)
    tensors = []
    for name in store.names:
        t = torch.tensor(store.params[name].copy(), requires_grad=True)
        t.grad = torch.tensor(store.grads[name].copy())
        tensors.append(t)
    norm = clip_grad_norm_(store, max_norm)
    torch_norm = torch.nn.utils.clip_grad_norm_(tensors, max_norm)
    assert norm == pytest.approx(float(torch_norm), rel=1e-13)
    for name, t in zip(store.names, tensors, strict=True):
        np.testing.assert_allclose(store.grads[name], t.grad.numpy(), rtol=1e-13, atol=0)


def test_clip_leaves_non_finite_gradients_alone() -> None:
    store = _grad_store(1.0)
    store.grad[0] = np.inf
    before = store.grad.copy()
    assert clip_grad_norm_(store, 1.0) == np.inf
    np.testing.assert_array_equal(store.grad, before)


@pytest.mark.parametrize("max_norm", [0.0, -1.0, float("nan"), float("inf")])
def test_clip_rejects_bad_max_norm(max_norm: float) -> None:
    with pytest.raises(ConfigError, match="max_norm"):
        clip_grad_norm_(_grad_store(1.0), max_norm)


def test_adamw_trains_with_the_configured_decay_zero_included() -> None:
    from aicf_induct.runtime.trainer import TrainConfig

    assert TrainConfig(optimizer="adamw", weight_decay=0.0).make_optimizer().config \
        .weight_decay == 0.0
    assert TrainConfig(optimizer="adamw", weight_decay=0.05).make_optimizer().config \
        .weight_decay == 0.05
