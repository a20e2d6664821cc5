"""What the runtime accepts from a caller: batches fed to the executor (exact per-example
shape, dtype, label count and range; no broadcasting) and parameter values (`check_values`,
`store_for`, `Trainer(values=...)`)."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.ir.builder import GraphBuilder
from aicf_induct.problems import load_problem
from aicf_induct.runtime.executor import Executor, check_values, store_for
from aicf_induct.runtime.interpreter import interpret
from aicf_induct.runtime.trainer import TrainConfig, Trainer
from tests.graphs import mlp


@pytest.fixture(scope="module")
def ce() -> Executor:
    g = mlp(4, 3)
    return Executor(g, store_for(g), loss="cross_entropy")


X2 = np.ones((2, 4))


@pytest.mark.parametrize("call,message", [
    # one example read as a batch of 4 rows; (N, 1) broadcast across the 4 features
    (lambda ex: ex.predict(np.ones(4)), "x: expected shape (N, 4), got (4,)"),
    (lambda ex: ex.predict(np.ones((2, 1))), "x: expected shape (N, 4), got (2, 1)"),
    (lambda ex: ex.predict(np.ones((2, 5))), "x: expected shape (N, 4), got (2, 5)"),
    (lambda ex: ex.predict(np.float64(1.0)), "x: expected shape (N, 4), got ()"),
    (lambda ex: ex.predict(np.array([["a"] * 4])), "x: expected float64 values, got str"),
    (lambda ex: ex.predict([[1, 2, 3], [4]]), "x: not an array"),
    # one label broadcast to the batch; -1 taken as the last class
    (lambda ex: ex.train_step(X2, np.array([1]), 0), "labels: expected shape (2,), got (1,)"),
    (lambda ex: ex.train_step(X2, np.array([0, -1]), 0),
     "labels: class indices must lie in [0, 3), got -1"),
    (lambda ex: ex.evaluate(X2, np.array([0, 3])),
     "labels: class indices must lie in [0, 3), got 3"),
    (lambda ex: ex.train_step(X2, np.array([0.0, 1.0]), 0),
     "labels: cross_entropy takes integer class indices, got float64"),
    (lambda ex: ex.train_step(X2, [0.0, 1.0], 0),
     "labels: cross_entropy takes integer class indices, got float64"),
])
def test_a_batch_that_does_not_fit_is_one_config_error(ce: Executor, call, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        call(ce)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_fitting_batches_and_array_likes_are_taken(ce: Executor) -> None:
    assert ce.predict([[1, 2, 3, 4]]).shape == (1, 3)  # a list: made an array
    assert ce.predict(np.ones((0, 4))).shape == (0, 3)
    # narrower dtypes of the same kind convert, as before
    loss = ce.train_step(np.ones((2, 4), np.float32), np.array([0, 2], np.int32), 0)
    assert np.isfinite(loss)


def test_torch_tensors_are_taken_as_arrays(ce: Executor) -> None:
    torch = pytest.importorskip("torch")
    got = ce.predict(torch.ones(2, 4, dtype=torch.float64))
    np.testing.assert_array_equal(got, ce.predict(np.ones((2, 4))))
    assert np.isfinite(ce.train_step(torch.ones(2, 4), torch.tensor([0, 2]), 0))


def test_mse_labels_must_match_the_output() -> None:
    g = mlp(4, 3)
    ex = Executor(g, store_for(g), loss="mse")
    with pytest.raises(ConfigError, match=r"labels: expected shape \(2, 3\), got \(2,\)"):
        ex.train_step(X2, np.ones(2), 0)
    assert np.isfinite(ex.train_step(X2, np.ones((2, 3)), 0))


def test_integer_inputs_refuse_float_data() -> None:
    b = GraphBuilder("emb")
    h = b.input([None, 3], "int64")
    h = b.add("embedding", [h], {"num_embeddings": 5, "embedding_dim": 2})
    h = b.add("reshape", [h], {"shape": [6]})
    g = b.output(b.add("linear", [h], {"out_features": 2}))
    ex = Executor(g, store_for(g), loss="cross_entropy")
    with pytest.raises(ConfigError, match="x: expected int64 values, got float64"):
        ex.predict(np.ones((2, 3)))
    assert ex.predict(np.ones((2, 3), np.int64)).shape == (2, 2)


def test_the_plan_feeds_exact_shapes_only(ce: Executor) -> None:
    # the CUDA step and the GPU epoch feed plans directly: the same check applies there
    plan = ce.plan("predict", 2)
    with pytest.raises(ConfigError, match=r"input 'x': expected shape \(2, 4\), got \(1, 4\)"):
        plan.feed({"x": np.ones((1, 4))})


def test_the_interpreter_names_the_input_not_the_kernel() -> None:
    g = mlp(4, 3)
    s = store_for(g)
    with pytest.raises(ConfigError, match=r"input 'x': expected shape \(N, 4\), got \(2, 5\)"):
        interpret(g, {**s.params, **s.buffers}, {"x": np.ones((2, 5))})


def test_a_trainer_checks_the_problem_before_a_run_starts() -> None:
    p = load_problem("iris", seed=0)
    with pytest.raises(ConfigError, match=r"problem 'iris', train split: x: expected shape "
                                          r"\(N, 5\), got \(\d+, 4\)"):
        Trainer(p, mlp(5, 3), TrainConfig(epochs=1, backend="numpy"))


@pytest.mark.parametrize("classes", [2, 4])
def test_a_head_of_another_width_than_the_classes_is_refused(classes: int) -> None:
    """iris has 3 classes: a narrower head fails the labels' range, a wider one trained with
    scores no label names (the README's `Linear(64, 3)` on breast_cancer's 2 classes)."""
    p = load_problem("iris", seed=0)
    message = (r"labels: class indices must lie in \[0, 2\)" if classes < 3 else
               "problem 'iris' has 3 classes and the graph outputs 4 class scores: its last "
               "layer's width must be 3")
    with pytest.raises(ConfigError, match=message):
        Trainer(p, mlp(4, classes), TrainConfig(epochs=1, backend="numpy"))


# -- parameter values ----------------------------------------------------------------------
def _values() -> tuple:
    g = mlp(4, 3, depth=1)
    s = store_for(g, seed=1)
    return g, {k: v.copy() for k, v in s.params.items()}


@pytest.mark.parametrize("name,value,message", [
    ("linear.weigth", None, "values: 'linear.weigth' is no parameter of the graph (did you "
                            "mean 'linear.weight'? parameters: linear.weight, linear.bias, "
                            "head.weight, head.bias)"),
    ("linear.weight", np.zeros((3, 3)), "values: 'linear.weight' has shape [3, 3], the graph "
                                        "says [16, 4]"),
    ("linear.bias", np.array(["a"] * 16), "values: 'linear.bias' holds text values, not "
                                          "numbers"),
    ("linear.bias", np.array([object()] * 16), "values: 'linear.bias' holds Python object values"),
    ("linear.bias", np.full(16, np.nan), "values: 'linear.bias' has non-finite values"),
    ("head.bias", np.array([1.0, np.inf, 0.0]), "values: 'head.bias' has non-finite values"),
])
def test_bad_values_are_one_config_error_naming_the_parameter(name: str, value,
                                                              message: str) -> None:
    g, values = _values()
    values[name] = values["linear.weight"] if value is None else value
    with pytest.raises(ConfigError) as err:
        store_for(g, values)
    assert str(err.value).startswith(message)
    with pytest.raises(ConfigError):
        Trainer(load_problem("iris", seed=0), g, TrainConfig(epochs=1, backend="numpy"),
                values=values)


def test_partial_values_are_taken_and_the_rest_named() -> None:
    g, values = _values()
    del values["head.bias"]
    checked, missing = check_values(g, values, source="w.npz")
    assert missing == ["head.bias"] and set(checked) == set(values)
    store = store_for(g, values)
    np.testing.assert_array_equal(store.params["linear.weight"], values["linear.weight"])
    tr = Trainer(load_problem("iris", seed=0), g, TrainConfig(epochs=1, backend="numpy"),
                 values=values)
    assert tr.missing_values == ["head.bias"]
    assert Trainer(load_problem("iris", seed=0), g,
                   TrainConfig(epochs=1, backend="numpy")).missing_values == []
    with pytest.raises(ConfigError, match=r"^w\.npz: 'x' is no parameter"):
        check_values(g, {"x": np.zeros(1)}, source="w.npz")


@pytest.mark.parametrize("split,array,at,value,message", [
    # NaN read as divergence: "diverged ... (a lower learning rate may help)"
    ("train", "y", 3, np.nan, "problem 'diabetes', train split: labels: NaN in row 3"),
    ("val", "X", (5, 2), np.inf, "problem 'diabetes', val split: X: inf in row 5, column 2 "
                                 "('bmi')"),
    ("test", "X", (0, 0), -np.inf, "problem 'diabetes', test split: X: -inf in row 0, "
                                   "column 0 ('age')"),
])
def test_non_finite_data_is_refused_naming_split_row_and_column(split: str, array: str, at,
                                                                value: float,
                                                                message: str) -> None:
    import dataclasses

    p = load_problem("diabetes", seed=0)
    part = getattr(p, split)
    bad = getattr(part, array).copy()
    bad[at] = value
    p = dataclasses.replace(p, **{split: dataclasses.replace(part, **{array: bad})})
    with pytest.raises(ConfigError) as err:
        Trainer(p, mlp(p.n_features, 1), TrainConfig(epochs=1, backend="numpy"))
    assert str(err.value) == message


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_an_empty_split_is_refused_by_name(split: str) -> None:
    """It was NumPy's "need at least one array to concatenate" (val and test are evaluated;
    every run reports the test split's metrics, so it may not be empty either)."""
    import dataclasses

    p = load_problem("iris", seed=0)
    part = getattr(p, split)
    p = dataclasses.replace(p, **{split: dataclasses.replace(part, X=part.X[:0], y=part.y[:0])})
    with pytest.raises(ConfigError, match=rf"^problem 'iris', {split} split: no rows"):
        Trainer(p, mlp(4, 3), TrainConfig(epochs=1, backend="numpy"))


@pytest.mark.parametrize("shape", [[6], [-1], [3, -1]])
def test_a_reshape_to_minus_one_takes_a_batch_of_no_rows(shape: list[int]) -> None:
    """Prediction takes 0 rows; a reshape whose shape holds -1 crashed there, NumPy being
    unable to resolve -1 in an array of no values."""
    b = GraphBuilder()
    x = b.input([None, 2, 3])
    r = b.add("reshape", [x], {"shape": shape})
    if len(shape) > 1:
        r = b.add("reshape", [r], {"shape": [6]})
    g = b.output(b.add("linear", [r], {"out_features": 2}))
    ex = Executor(g, store_for(g))
    assert ex.predict(np.ones((0, 2, 3))).shape == (0, 2)
    assert ex.predict(np.ones((5, 2, 3))).shape == (5, 2)


def test_a_graph_of_two_inputs_is_refused_when_made_not_at_its_first_step() -> None:
    """A Trainer took a graph of two inputs; its first step died with a raw KeyError on the
    input no batch feeds (the CLI refused such a file; the library did not)."""
    b = GraphBuilder("two")
    x, x2 = b.input([None, 4]), b.input([None, 2], id="x2")
    g = b.output(b.add("linear", [b.add("concat", [x, x2], {"axis": 1})], {"out_features": 3}))
    with pytest.raises(ConfigError, match=r"graph 'two': a batch feeds one input; the graph "
                                          r"has 2 \('x', 'x2'\)"):
        Trainer(load_problem("iris", seed=0), g, TrainConfig(epochs=1))
    with pytest.raises(ConfigError, match="a batch feeds one input"):
        Executor(g, store_for(g))


def test_evaluating_no_rows_is_nan_without_a_warning_or_a_crash() -> None:
    """Evaluation takes 0 rows: the executor's loss came with NumPy's "mean of empty slice"
    warning (an ExecutionError under -W error), and Trainer.evaluate crashed concatenating no
    predictions."""
    import dataclasses
    import warnings

    p = load_problem("iris", seed=0)
    trainer = Trainer(p, mlp(4, 3), TrainConfig(epochs=1, backend="numpy"))
    empty = dataclasses.replace(p.val, X=p.val.X[:0], y=p.val.y[:0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, pred = trainer.executor.evaluate(empty.X, empty.y)
        assert np.isnan(loss) and pred.shape == (0, 3)
        assert all(np.isnan(v) for v in trainer.evaluate(empty))
    assert all(np.isfinite(v) for v in trainer.evaluate(p.val))
