"""The trainer: determinism, early stopping with best-state restore, what it records."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.ir import fingerprint
from aicf_induct.problems import load_problem
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.graphs import mlp


def _fit(name: str, cfg: TrainConfig, **graph_kw):
    p = load_problem(name, seed=0)
    rec = MemoryRecorder()
    graph = mlp(p.n_features, p.n_outputs, **graph_kw)
    result = Trainer(p, graph, cfg, recorder=rec).fit()
    return p, graph, rec, result


def test_same_seed_same_run_other_seed_other_run() -> None:
    cfg = TrainConfig(epochs=5, seed=3, patience=0)
    _, _, rec_a, res_a = _fit("wine", cfg)
    _, _, rec_b, res_b = _fit("wine", cfg)
    _, _, rec_c, _ = _fit("wine", TrainConfig(epochs=5, seed=4, patience=0))
    losses = lambda rec: [s.loss for s in rec.steps]  # noqa: E731
    assert losses(rec_a) == losses(rec_b)
    assert res_a.metrics == res_b.metrics
    assert losses(rec_a) != losses(rec_c)


def test_dropout_runs_are_deterministic_too() -> None:
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec

    p = load_problem("iris", seed=0)
    graph = mlp_graph(parse_model_spec("mlp:dropout=0.3"), p.n_features, p.n_outputs)
    runs = []
    for _ in range(2):
        rec = MemoryRecorder()
        Trainer(p, graph, TrainConfig(epochs=3, patience=0), recorder=rec).fit()
        runs.append([s.loss for s in rec.steps])
    assert runs[0] == runs[1]


def test_records_everything_a_warehouse_needs() -> None:
    p, graph, rec, res = _fit("iris", TrainConfig(epochs=4, patience=0, batch_size=32))
    (run,) = rec.runs
    assert run.run_id == res.run_id and run.problem_id == p.problem_id
    assert run.origin == "python"  # a Python caller's run (the CLI says "cli")
    assert run.config["fingerprint"] == fingerprint(graph)
    (problem,) = rec.problems  # with its meta-features, for the warehouse's joins
    assert problem.problem_id == p.problem_id and problem.features["simple.n_rows"] == p.n_rows
    assert run.device == "cpu (numpy)"  # the backend the trainer runs on (NumPy here)
    snap, final_snap = rec.snapshots
    assert snap.reason == "start" and snap.fingerprint == fingerprint(graph)
    assert snap.param_count == graph.param_count() and snap.patterns["depth"] == 3
    assert (final_snap.reason, final_snap.step) == ("final", res.steps)
    batches = len(p.train) // 32  # 97 rows: the last batch, of one row, is left out
    assert [s.step for s in rec.steps] == list(range(4 * batches))
    assert {s.batch_size for s in rec.steps} == {32}
    assert all(s.grad_norm > 0 and 0 < s.update_ratio < 1 and s.lr == 1e-3 for s in rec.steps)
    per_epoch = [r for r in rec.results if not r.final]
    assert {(r.epoch, r.split, r.metric) for r in per_epoch} == {
        (e, s, m) for e in range(4) for s, m in (("train", "loss"), ("val", "loss"),
                                                   ("val", "accuracy"))}
    final = {(r.split, r.metric): r.value for r in rec.results if r.final}
    assert final[("test", "accuracy")] == res.metrics["test_accuracy"]
    (end,) = rec.run_ends
    assert end.status == "completed" and end.steps == res.steps == 4 * batches


def test_early_stopping_restores_the_best_epoch() -> None:
    cfg = TrainConfig(epochs=200, patience=3, lr=0.01)
    *_, res = _fit("breast_cancer", cfg, width=128)
    assert res.status == "early_stopped"
    assert res.epochs == res.best_epoch + 4
    best_val = min(h["val_loss"] for h in res.history)
    assert res.metrics["val_loss"] == pytest.approx(best_val, rel=1e-12)


def test_max_steps_caps_the_run() -> None:
    _, _, rec, res = _fit("digits", TrainConfig(epochs=50, max_steps=17, patience=0))
    assert res.steps == 17 and len(rec.steps) == 17


def test_regression_reports_r2() -> None:
    _, _, _, res = _fit("diabetes", TrainConfig(epochs=30, seed=1))
    assert set(res.metrics) == {f"{s}_{m}" for s in ("train", "val", "test")
                                for m in ("loss", "r2")}
    assert res.metrics["train_r2"] > 0.3


@pytest.mark.parametrize("bad,message", [
    (dict(epochs=0), "epochs must be >= 1, got 0"),
    (dict(batch_size=0), "batch_size must be >= 1, got 0"),
    (dict(clip_norm=-1.0), "clip_norm must be >= 0, got -1"),
    (dict(patience=-1), "patience must be >= 0, got -1"),
    # accepted, or refused far from the cause, before
    (dict(lr=0), "lr must be > 0, got 0"),  # trained, and learnt nothing
    (dict(seed=-1), "seed must be an integer in 0..4294967295, got -1"),  # NumPy's error
    (dict(seed=2**32), "seed must be an integer in 0..4294967295, got 4294967296"),
    (dict(seed=1.5), "seed must be an integer in 0..4294967295, got 1.5"),
    (dict(label_smoothing=2), "label_smoothing must be in [0, 1), got 2"),  # an IR error
    (dict(momentum=1.0), "momentum must be in [0, 1), got 1"),
    (dict(epochs="5"), "epochs must be an integer, got '5'"),  # a TypeError
    (dict(max_steps=True), "max_steps must be an integer, got True"),
    (dict(weight_decay=float("nan")), "weight_decay must be a finite number, got nan"),
    (dict(lr="0.1"), "lr must be a finite number, got '0.1'"),
    # accepted, and ignored
    (dict(optimizer="adam", nesterov=True), "nesterov applies to optimizer 'sgd' only, got "
                                            "optimizer 'adam'"),
])
def test_bad_config_is_a_config_error_naming_the_field(bad: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        TrainConfig(**bad)
    assert str(err.value) == message


def test_the_config_words_its_rules_as_the_cli_does() -> None:
    from argparse import ArgumentTypeError

    from aicf_induct.cli import options

    for check, field, text in ((options.positive_float, "lr", "0"),
                               (options.fraction, "label_smoothing", "2"),
                               (options.positive_int, "epochs", "0"),
                               (options.non_negative_float, "clip_norm", "-1")):
        with pytest.raises(ArgumentTypeError) as cli:
            check(text)
        with pytest.raises(ConfigError) as api:
            TrainConfig(**{field: int(text)})
        assert str(api.value) == f"{field} {cli.value}"


def test_numpy_scalars_are_taken_as_python_numbers() -> None:
    """A config is logged and snapshotted as JSON, which has no NumPy types."""
    import json
    from dataclasses import asdict

    cfg = TrainConfig(epochs=np.int64(3), seed=np.uint32(7), lr=np.float32(0.5))
    assert (type(cfg.epochs), type(cfg.seed), type(cfg.lr)) == (int, int, float)
    assert json.loads(json.dumps(asdict(cfg)))["seed"] == 7


def test_label_smoothing_on_a_regression_is_refused() -> None:
    """Mean squared error has no smoothing: the option was accepted, and changed nothing."""
    p = load_problem("diabetes")
    with pytest.raises(ConfigError, match=r"^label_smoothing 0.1 applies to classification "
                                          r"\(cross-entropy\) only; problem 'diabetes' is a "
                                          r"regression$"):
        Trainer(p, mlp(p.n_features, 1), TrainConfig(label_smoothing=0.1))


def test_an_epoch_s_training_loss_is_a_mean_over_rows() -> None:
    """As the validation loss is: iris's 97 training rows in batches of 40, 40 and 17 with a
    learning rate too small to move the parameters, so the epoch's loss is the training
    split's loss (the plain mean of the three batches' means was 0.008 off)."""
    p = load_problem("iris")
    t = Trainer(p, mlp(p.n_features, p.n_classes),
                TrainConfig(optimizer="sgd", lr=1e-12, batch_size=40, epochs=1, patience=0))
    assert t.stream.sizes() == [40, 40, 17]
    res = t.fit()
    assert res.history[0]["train_loss"] == pytest.approx(t.evaluate(p.train)[0], rel=1e-9)


def test_unknown_optimizer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown optimizer 'lbfgs'"):
        TrainConfig(optimizer="lbfgs").make_optimizer()


def test_losses_are_finite_and_decrease() -> None:
    _, _, rec, _ = _fit("digits", TrainConfig(epochs=5, patience=0, lr=1e-2))
    losses = np.array([s.loss for s in rec.steps])
    assert np.isfinite(losses).all() and losses[-20:].mean() < 0.5 * losses[:20].mean()


def test_a_wall_clock_budget_stops_with_timeout_and_keeps_the_best_state() -> None:
    _, _, rec, res = _fit("digits", TrainConfig(epochs=10_000, patience=0, max_wall_s=0.5))
    assert res.status == "timeout" and res.wall_time_s < 5
    (end,) = rec.run_ends
    assert end.status == "timeout" and "time budget of 0.5 s used up" in (end.error or "")
    assert res.metrics["val_loss"] == pytest.approx(min(h["val_loss"] for h in res.history),
                                                    rel=1e-12)
    assert any(r.final for r in rec.results)


def test_a_float32_graph_trains_in_float32_and_tracks_float64() -> None:
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec

    p = load_problem("wine", seed=0)
    spec = parse_model_spec("mlp:depth=2,width=32,act=gelu,norm=layernorm")
    losses = {}
    for dtype in ("float32", "float64"):
        rec = MemoryRecorder()
        trainer = Trainer(p, mlp_graph(spec, p.n_features, p.n_outputs, dtype=dtype),
                          TrainConfig(epochs=3, patience=0), recorder=rec)
        trainer.fit()
        assert trainer.store.data.dtype == np.dtype(dtype)
        assert all(a.dtype == np.dtype(dtype) for a in trainer.executor.plan(
            "train", 32).values.values() if a.dtype.kind == "f")
        losses[dtype] = np.array([s.loss for s in rec.steps])
    np.testing.assert_allclose(losses["float32"], losses["float64"], rtol=1e-4)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
def test_a_diverging_run_stops_at_its_first_non_finite_epoch_and_says_so() -> None:
    """It trained every epoch on NaN to the end ('completed', NumPy warning at each step)."""
    cfg = TrainConfig(epochs=30, seed=0, patience=0, lr=1e300, optimizer="sgd")
    _, _, rec, res = _fit("diabetes", cfg)
    assert res.status == "early_stopped" and res.epochs == 1
    assert res.error is not None and res.error.startswith(
        "diverged: the training loss was not finite in epoch 0;")
    assert [(e.status, e.error) for e in rec.run_ends] == [("early_stopped", res.error)]
    # a run that stays finite ends as before, with no error
    _, _, _, fine = _fit("diabetes", TrainConfig(epochs=3, seed=0, patience=0))
    assert fine.status == "completed" and fine.error is None



@pytest.mark.parametrize("width, max_params, message", [
    # parameters past the ceiling (lowered here: no 100M-parameter graph is built)
    (64, 500, r"^graph 'mlp': 515 trainable parameters; the ceiling is 500$"),
    # a layer 2^20 + 1 wide: each example's values, times the batch, for each node
    ((1 << 20) + 1, None, r"^graph 'mlp': node '.*' computes 1,048,577 values per example; "
                          r"the ceiling is 1,048,576$"),
])
def test_a_graph_past_the_model_ceilings_is_refused_before_anything_is_allocated(
        width: int, max_params: int | None, message: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the CLI checked an IR file: a Python caller allocated until memory ran out."""
    from aicf_induct.frontend import specs
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
    from aicf_induct.runtime.policies import RuleBasedPolicy

    if max_params is not None:
        monkeypatch.setattr(specs, "MAX_PARAMS", max_params)
    p, g, rec = load_problem("iris", seed=0), mlp(4, 3, depth=1, width=width), MemoryRecorder()
    with pytest.raises(ConfigError, match=message):
        Trainer(p, g, TrainConfig(), recorder=rec)
    with pytest.raises(ConfigError, match=message):
        AdaptiveRun(p, g, TrainConfig(), AdaptConfig(), RuleBasedPolicy(), recorder=rec)
    assert not rec.runs and not rec.steps


def test_arguments_of_another_type_are_a_type_error_saying_what_it_takes() -> None:
    from aicf_induct.frontend import Linear, Sequential
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
    from aicf_induct.runtime.policies import RuleBasedPolicy

    p = load_problem("iris", seed=0)
    graph = mlp(p.n_features, p.n_outputs)
    module = Sequential(Linear(p.n_features, p.n_outputs))
    for args, why in (((p, module, TrainConfig()), r"^graph: a Graph \(trace\(model, "
                                                   r"n_features\) makes one from a Module\), "
                                                   r"got Sequential$"),
                      ((p, graph, None), "^config: a TrainConfig, got NoneType$"),
                      ((p, graph, {"epochs": 1}), "^config: a TrainConfig, got dict$"),
                      (("iris", graph, TrainConfig()), r"^problem: a Problem .*got str$")):
        with pytest.raises(TypeError, match=why):
            Trainer(*args)
        with pytest.raises(TypeError, match=why):
            AdaptiveRun(*args, AdaptConfig(), RuleBasedPolicy())


def test_a_split_of_several_evaluation_chunks_is_scored_on_each_chunk_s_predictions() -> None:
    """Each chunk's predictions were a view into the eval plan's memory, which the next chunk
    overwrote on the CPU: a split of two full chunks or more was scored on the last full
    chunk's predictions (0.795 against 0.993 in the audit's case), its loss right."""
    import pandas as pd

    from aicf_induct.problems.registry import problem_from_frame
    from aicf_induct.runtime.metrics import score
    from aicf_induct.runtime.trainer import EVAL_CHUNK

    rng = np.random.default_rng(0)
    n = 3 * EVAL_CHUNK + 500
    X = rng.normal(size=(n, 4))
    frame = pd.DataFrame(X, columns=list("abcd")).assign(y=(X[:, 0] + X[:, 1] > 0).astype(int))
    p = problem_from_frame(frame, target="y", seed=0)
    assert len(p.train) > 2 * EVAL_CHUNK  # the case: chunks that overwrite each other
    trainer = Trainer(p, mlp(p.n_features, p.n_outputs), TrainConfig(epochs=1, seed=0))
    for idx in trainer._epoch_batches(0):
        trainer.train_step(p.train.X[idx], p.train.y[idx], 0)
    _, got = trainer.evaluate(p.train)
    assert got == score(p.task, trainer.executor.predict(p.train.X), p.train.y)


def test_a_diverged_classifier_scores_nan_as_a_diverged_regressor_does() -> None:
    """argmax reads a row of NaN scores as class 0: a classifier whose every epoch diverged
    reported val loss NaN beside an accuracy of exactly its share of class 0."""
    from aicf_induct.runtime.metrics import accuracy

    y = np.array([0, 1, 2, 0])
    assert np.isnan(accuracy(np.full((4, 3), np.nan), y))
    assert np.isnan(accuracy(np.array([[1.0, 0, 0], [0, np.inf, 0], [0, 0, 1], [1, 0, 0]]), y))
    assert accuracy(np.eye(3)[[0, 1, 2, 1]], y) == 0.75
    from tests.runtime.many_cases import trainer
    from tests.runtime.test_adaptive_fixtures import toy_problem

    p = toy_problem(n=3000, features=6, seed=3)
    with np.errstate(all="ignore"):  # the divergence, on purpose
        res = trainer(p, "mlp:depth=2,width=24,act=relu", TrainConfig(
            epochs=3, batch_size=512, lr=1e12, optimizer="sgd"), MemoryRecorder()).fit()
    assert np.isnan(res.metrics["val_loss"])  # no epoch was finite
    assert np.isnan(res.metrics["val_accuracy"]) and np.isnan(res.metrics["test_accuracy"])
