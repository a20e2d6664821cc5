"""Numerical edges an audit found wrong, each checked against PyTorch or sklearn: training
batches of 0 rows (and of 1 row under batchnorm) are refused, `kaiming_normal` and
`xavier_uniform` count a conv weight's receptive field, the cross_entropy reference refuses
labels outside [0, classes), and R² of a constant target follows sklearn."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from aicf_induct.compiler.training_graph import with_loss
from aicf_induct.errors import ConfigError, ExecutionError
from aicf_induct.ir.init import _fans, init_array
from aicf_induct.ir.ops import OPS, OpContext
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.interpreter import interpret
from aicf_induct.runtime.metrics import r2, score
from tests.graphs import mlp

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).normal(size=(8, 4))
Y = np.array([0, 1] * 4)


# -- training batches of 0 rows, and of 1 row with batchnorm -------------------------
def _executor(norm: str | None) -> Executor:
    g = mlp(4, 2, norm=norm)
    return Executor(g, store_for(g), loss="cross_entropy")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # unfixed: NaN, not NumPy's warning
@pytest.mark.parametrize("norm", [None, "batchnorm", "layernorm"])
def test_a_training_batch_of_no_rows_is_refused(norm: str | None) -> None:
    """batchnorm's statistics over no rows are NaN and became its running statistics for
    good (every later evaluation NaN); torch leaves them as they were. The mean loss of no
    rows is NaN for any model."""
    ex = _executor(norm)
    before = {k: v.copy() for k, v in ex.store.buffers.items()}
    with pytest.raises(ConfigError) as err:
        ex.train_step(X[:0], Y[:0], 0)
    assert str(err.value) == ("x: a training batch of no rows: its mean loss and batch "
                              "statistics are NaN; feed 1 row or more")
    for k, v in before.items():
        np.testing.assert_array_equal(ex.store.buffers[k], v)
    assert np.isfinite(ex.evaluate(X, Y)[0])
    # torch: an empty training batch leaves batchnorm's running statistics unchanged
    bn = torch.nn.BatchNorm1d(4).double().train()
    bn(torch.zeros(0, 4, dtype=torch.float64))
    assert torch.equal(bn.running_var, torch.ones(4, dtype=torch.float64))


def test_a_training_batch_of_one_row_is_refused_with_batchnorm_only() -> None:
    ex = _executor("batchnorm")
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        torch.nn.BatchNorm1d(4).train()(torch.zeros(1, 4))  # torch refuses it too
    with pytest.raises(ConfigError) as err:
        ex.train_step(X[:1], Y[:1], 0)
    assert str(err.value) == ("x: a training batch of one row: the model has batchnorm, whose "
                              "variance over one row is 0; feed 2 rows or more")
    np.testing.assert_array_equal(ex.store.buffers["batchnorm.running_var"], np.ones(16))
    assert np.isfinite(ex.train_step(X[:2], Y[:2], 0))
    # without batchnorm one row trains, as in torch
    assert np.isfinite(_executor(None).train_step(X[:1], Y[:1], 0))
    assert np.isfinite(_executor("layernorm").train_step(X[:1], Y[:1], 0))


@pytest.mark.parametrize("norm", [None, "batchnorm"])
def test_evaluation_and_prediction_take_any_rows(norm: str | None) -> None:
    ex = _executor(norm)
    assert ex.predict(X[:0]).shape == (0, 2)
    with warnings.catch_warnings():  # NumPy's "Mean of empty slice"
        warnings.simplefilter("ignore", RuntimeWarning)
        loss, pred = ex.evaluate(X[:0], Y[:0])
    assert math.isnan(loss) and pred.shape == (0, 2)  # the mean loss of no rows, as torch's
    assert ex.predict(X[:1]).shape == (1, 2)
    assert np.isfinite(ex.evaluate(X[:1], Y[:1])[0])
    x, y = ex.check_batch(X[:0], Y[:0])  # not a training batch: taken
    assert len(x) == len(y) == 0


# -- fans of conv weights ------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 4), (64, 16, 5, 5), (8, 3, 7), (4, 2, 3, 3, 3),
                                   (5, 7, 1, 1), (6, 2, 3, 1)])
def test_fans_match_torch(shape: tuple[int, ...]) -> None:
    want = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert _fans(shape) == want


def test_fans_of_a_vector_and_a_scalar() -> None:
    """torch refuses fewer than 2 axes; here a vector (d,) has both fans d, a scalar 1."""
    assert _fans((7,)) == (7, 7)
    assert _fans(()) == (1, 1)
    assert init_array("kaiming_normal", (7,), np.random.default_rng(0)).shape == (7,)


@pytest.mark.parametrize("init,torch_init,fan_in,fan_out", [
    ("kaiming_normal", torch.nn.init.kaiming_normal_, 400, 1600),
    ("xavier_uniform", torch.nn.init.xavier_uniform_, 400, 1600),
])
def test_conv_weight_init_scale_matches_torch(init: str, torch_init, fan_in: int,
                                              fan_out: int) -> None:
    """A (64, 16, 5, 5) weight: 25,600 draws, the sample std within ~0.5% of the truth;
    5% tolerance. Without the receptive field the std was 5x too large."""
    shape = (64, 16, 5, 5)
    want = (math.sqrt(2.0 / fan_in) if init == "kaiming_normal"
            else math.sqrt(2.0 / (fan_in + fan_out)))
    ours = init_array(init, shape, np.random.default_rng(0))
    torch.manual_seed(0)
    theirs = torch.empty(shape, dtype=torch.float64)
    torch_init(theirs)
    assert ours.shape == shape
    assert float(ours.std()) == pytest.approx(want, rel=0.05)
    assert float(ours.std()) == pytest.approx(float(theirs.std()), rel=0.05)
    if init == "xavier_uniform":  # the same bound
        b = math.sqrt(6.0 / (fan_in + fan_out))
        assert np.abs(ours).max() <= b and float(theirs.abs().max()) <= b
        assert np.abs(ours).max() > 0.99 * b


# -- the cross_entropy reference refuses labels outside [0, classes) ------------------
LOGITS = np.array([[2.0, 0.0, -1.0], [0.5, 1.5, 0.0]])
CE = OPS["cross_entropy"]


def _ce_forward(labels: np.ndarray, eps: float = 0.0) -> float:
    return float(CE.forward(OpContext(), [LOGITS, labels], {},
                            CE.full_attrs({"label_smoothing": eps})))


def _ce_backward(labels: np.ndarray) -> np.ndarray:
    assert CE.backward is not None
    gins, _ = CE.backward(OpContext(), [LOGITS, labels], {}, None, np.float64(1.0),
                          CE.full_attrs({}), (True, False))
    return gins[0]


@pytest.mark.parametrize("labels,bad", [([0, -1], -1), ([0, 3], 3), ([-2, 7], -2)])
def test_ce_reference_refuses_labels_out_of_range(labels: list[int], bad: int) -> None:
    """torch: "Target -1 is out of bounds"; here -1 was the last class, 3 a bare IndexError."""
    with pytest.raises(IndexError, match="Target"):
        torch.nn.functional.cross_entropy(torch.tensor(LOGITS), torch.tensor(labels))
    message = rf"^cross_entropy labels must lie in \[0, 3\) for 3 classes, got {bad}$"
    with pytest.raises(IndexError, match=message):
        _ce_forward(np.array(labels))
    with pytest.raises(IndexError, match=message):
        _ce_backward(np.array(labels))


def test_ce_reference_refuses_non_integer_labels() -> None:
    with pytest.raises(IndexError, match=r"^cross_entropy labels must be integer class "
                                         r"indices, got float64 values$"):
        _ce_forward(np.array([0.0, 2.0]))


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_ce_reference_still_matches_torch(eps: float) -> None:
    labels = np.array([0, 2])
    want = torch.nn.functional.cross_entropy(torch.tensor(LOGITS), torch.tensor(labels),
                                             label_smoothing=eps).item()
    assert _ce_forward(labels, eps) == pytest.approx(want, rel=1e-14)


def test_the_interpreter_names_the_bad_label() -> None:
    g = mlp(4, 3)
    tg = with_loss(g, "cross_entropy")
    s = store_for(g)
    params = {**s.params, **s.buffers}
    feeds = {"x": X[:2], tg.labels: np.array([0, 3])}
    with pytest.raises(ExecutionError, match=r"cross_entropy labels must lie in \[0, 3\) for "
                                             r"3 classes, got 3"):
        interpret(tg.graph, params, feeds)
    feeds[tg.labels] = np.array([-1, 0])
    with pytest.raises(ExecutionError, match=r"got -1"):
        interpret(tg.graph, params, feeds)
    feeds[tg.labels] = np.array([2, 0])
    assert np.isfinite(interpret(tg.graph, params, feeds).values[tg.loss])


# -- R² of a constant target ---------------------------------------------------------
@pytest.mark.parametrize("y,pred", [
    (np.full(5, 2.0), np.full(5, 2.0)),                 # constant, perfect: 1.0
    (np.full(5, 2.0), np.array([2.0, 2, 2, 2, 2.5])),   # constant, not perfect: 0.0
    (np.zeros(3), np.zeros(3)),
    (np.array([1.0, 2, 3, 4]), np.array([1.1, 1.9, 3.2, 3.7])),
    (np.array([1.0, 2, 3, 4]), np.array([1.0, 2, 3, 4])),
    (np.array([1.0, 2, 3, 4]), np.full(4, 10.0)),       # negative
])
def test_r2_matches_sklearn(y: np.ndarray, pred: np.ndarray) -> None:
    from sklearn.metrics import r2_score

    want = float(r2_score(y, pred))
    assert r2(pred[:, None], y) == pytest.approx(want, abs=1e-12)  # the model's (N, 1) output
    assert score("regression", pred[:, None], y) == pytest.approx(want, abs=1e-12)
