"""cuda tier: the one-kernel MLP step (kernels/cuda/mlp_step.py) against the NumPy plan, on
fresh random inputs: loss and every gradient, all activations, ragged widths and batches,
label smoothing, no-bias layers; every gradient written; replays deterministic; and the
captured whole step (with the optimizer) against NumPy steps."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.ir import GraphBuilder
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.optimizers import make_optimizer
from tests.graphs import mlp
from tests.kernels.cuda_helpers import assert_close, host

pytestmark = pytest.mark.cuda
cp = pytest.importorskip("cupy")


def chain(n_in: int, widths: list[int], n_out: int, act: str = "relu", bias: bool = True,
          dtype: str = "float64", act_attrs: dict | None = None):
    b = GraphBuilder("chain")
    h = b.input([None, n_in], dtype=dtype)
    for w in widths:
        h = b.add(act, [b.add("linear", [h], {"out_features": w, "bias": bias})], act_attrs)
    return b.output(b.add("linear", [h], {"out_features": n_out, "bias": bias}, id="head"))


CASES = {  # name: (n_in, widths, n_out, act, bias, act attrs, batch, label smoothing)
    "relu_small": (16, [64, 64], 2, "relu", True, None, 256, 0.0),
    "relu_ragged": (13, [50, 50, 50], 10, "relu", True, None, 77, 0.0),
    "gelu": (7, [40, 24], 5, "gelu", True, None, 33, 0.1),
    "gelu_tanh": (7, [40], 5, "gelu", True, {"approximate": "tanh"}, 70, 0.0),
    "silu": (7, [65], 3, "silu", True, None, 1, 0.0),
    "sigmoid": (64, [96, 96], 40, "sigmoid", True, None, 130, 0.2),
    "tanh_nobias": (9, [33, 31], 4, "tanh", False, None, 45, 0.0),
    "head_only": (12, [], 6, "relu", True, None, 64, 0.0),
    "wide_batch": (64, [256] * 4, 10, "relu", True, None, 512, 0.0),
}


def _gpu_pair(name: str, dtype: str, seed: int):
    from aicf_induct.kernels import REGISTRY

    n_in, widths, n_out, act, bias, attrs, batch, eps = CASES[name]
    graph = chain(n_in, widths, n_out, act, bias, dtype, attrs)
    ref = Executor(graph, store_for(graph, seed=seed, dtype=dtype), label_smoothing=eps)
    gpu = Executor(graph, store_for(graph, seed=seed, xp=cp, dtype=dtype), label_smoothing=eps,
                   device="cuda", xp=cp, fuse=True, registry=REGISTRY)
    return graph, batch, ref, gpu


def _batch(rng, graph, n, dtype):
    n_in = graph.nodes[0].attrs["shape"][1]
    n_out = next(nd for nd in graph.nodes if nd.id == "head").attrs["out_features"]
    return (rng.normal(size=(n, n_in)).astype(dtype), rng.integers(0, n_out, size=n))


# A ReLU's derivative jumps at 0: a pre-activation within rounding of 0 can fall on one side
# in the kernel and on the other in NumPy, and that row's gradient then differs by O(1) (one
# such unit moves wide_batch's first-layer gradient by ~3e-3 of its norm: one fp32 run in
# ~40 failed so). Rows with a pre-activation that near a kink are drawn again, as a
# finite-difference check keeps its points off the kink. The margin is a fraction of the
# layer's RMS pre-activation, far above its rounding: fp32 ~1e-6, TF32 products ~1e-3.
KINK_MARGIN = {0: 1e-4, 1: 2e-3}  # by mma: SIMT fp32, TF32 tensor cores


def _off_the_kinks(rng, name: str, ref, x: np.ndarray, margin: float) -> np.ndarray:
    if CASES[name][3] != "relu":
        return x
    params = [ref.store.params[n] for n in ref.store.names if not n.startswith("head.")]
    layers, i = [], 0
    while i < len(params):  # (weight, bias) per hidden layer; no bias: weight alone
        has_bias = i + 1 < len(params) and params[i + 1].ndim == 1
        layers.append((np.asarray(params[i], np.float64),
                       np.asarray(params[i + 1], np.float64) if has_bias else 0.0))
        i += 2 if has_bias else 1
    x = x.copy()
    for _ in range(500):
        h, near = x.astype(np.float64), np.zeros(len(x), dtype=bool)
        for w, b in layers:
            z = h @ w.T + b
            near |= (np.abs(z) < margin * np.sqrt(np.mean(z * z))).any(axis=1)
            h = np.maximum(z, 0.0)
        if not near.any():
            return x
        x[near] = rng.normal(size=(int(near.sum()), x.shape[1])).astype(x.dtype)
    raise AssertionError(f"{name}: no inputs {margin:g} away from every ReLU kink")


def _schedule(schedule: str) -> str:
    """`schedule`, skipping the test where this device lacks it (clusters: sm_90+)."""
    from aicf_induct.kernels.cuda.compile import device
    from aicf_induct.kernels.cuda.mlp_step import CLUSTERS_FROM

    if schedule == "clusters" and device().capability < CLUSTERS_FROM:
        pytest.skip(f"thread-block clusters need sm_{CLUSTERS_FROM}+")
    return schedule


SCHEDULES = ["layers", "rows", "clusters"]


def _kernel(gpu, batch, x, y, schedule="layers", mma=0, grid=None):
    from aicf_induct.compiler.chain import MlpChain, match_mlp_chain
    from aicf_induct.kernels.cuda.mlp_step import MlpStepKernel
    from aicf_induct.runtime.cuda_step import step_spec

    plan = gpu.plan("train", batch)
    plan.feed({gpu.input_id: x, gpu.training_graph.labels: y})
    chain = match_mlp_chain(plan.program, plan.inputs)
    assert isinstance(chain, MlpChain), chain
    store = gpu.store
    loss = plan.value(gpu.training_graph.loss)
    kernel = MlpStepKernel(step_spec(chain, store), cp.zeros(2, dtype=np.int64), store.data,
                           store.grad, loss, _schedule(schedule), grid=grid, mma=mma)
    kernel.set_inputs(plan.inputs[chain.input_id], plan.inputs[chain.labels_id])
    return kernel, loss


def _assert_step(name: str, kernel, loss, ref, gpu, x, y, rtol: float) -> None:
    """One launch against one NumPy step: the loss and every gradient. The head's bias
    gradient is a batch mean of (softmax - target) rows, terms in [-1, 1] that cancel (two
    classes over 256 rows: ~0.03 of a term, at times far less), so its error is measured
    against the size such a mean has by chance, 1/sqrt(batch), where it is smaller: one run
    in ~40 failed on that sum's rounding alone (TF32: 0.41 of a near-zero sum)."""
    gpu.store.grad[...] = cp.nan  # a gradient the kernel fails to write shows up
    kernel.launch()
    np.testing.assert_allclose(float(loss), ref.train_step(x, y, 0), rtol=rtol)
    for n in ref.store.names:
        floor = 1 / np.sqrt(len(x)) if n == "head.bias" else 0.0
        assert_close(gpu.store.grads[n], ref.store.grads[n], rtol, f"{name} d{n}", floor)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("dtype,mma,rtol", [
    ("float64", 0, 1e-12), ("float32", 0, 1e-5),
    # TF32 tensor cores (the tf32 policy): 2^-11 rounding, through four GEMMs and batch sums
    # that cancel, reaches a few % on a weight gradient (a wrong fragment index gives O(1))
    ("float32", 1, 5e-2),
])
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_kernel_step_matches_the_numpy_plan(name: str, dtype: str, mma: int, rtol: float,
                                                schedule: str) -> None:
    graph, batch, ref, gpu = _gpu_pair(name, dtype, seed=3)
    rng = np.random.default_rng()  # fresh inputs every run
    x, y = _batch(rng, graph, batch, dtype)
    x = _off_the_kinks(rng, name, ref, x, KINK_MARGIN[mma])
    kernel, loss = _kernel(gpu, batch, x, y, schedule, mma)
    _assert_step(name, kernel, loss, ref, gpu, x, y, rtol)


@pytest.mark.parametrize("name,dtype", [("sigmoid", "float64"), ("wide_batch", "float32")])
def test_clusters_with_several_row_tiles_a_cluster(name: str, dtype: str) -> None:
    """Two clusters for 5 and 16 row tiles: each cluster runs its row tiles one after
    another (no cluster barrier between them), the sigmoid case with its 40 logits split
    over the cluster for the loss."""
    from aicf_induct.kernels.cuda.mlp_step import CLUSTER

    graph, batch, ref, gpu = _gpu_pair(name, dtype, seed=4)
    rng = np.random.default_rng()
    x, y = _batch(rng, graph, batch, dtype)
    x = _off_the_kinks(rng, name, ref, x, KINK_MARGIN[0])
    kernel, loss = _kernel(gpu, batch, x, y, "clusters", grid=2 * CLUSTER)
    assert kernel.grid == 2 * CLUSTER
    _assert_step(name, kernel, loss, ref, gpu, x, y, 1e-12 if dtype == "float64" else 1e-5)


def test_clusters_grid_must_be_whole_clusters() -> None:
    graph, batch, _, gpu = _gpu_pair("relu_small", "float32", seed=0)
    x, y = _batch(np.random.default_rng(), graph, batch, np.float32)
    with pytest.raises(ValueError, match="whole clusters"):
        _kernel(gpu, batch, x, y, "clusters", grid=12)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_grid_the_device_cannot_keep_resident_is_refused(schedule: str) -> None:
    """More blocks than run at once would hang at the first grid barrier: refused before any
    launch; the largest resident grid itself runs and is right."""
    from aicf_induct.kernels.cuda.mlp_step import CLUSTER

    graph, batch, ref, gpu = _gpu_pair("relu_small", "float32", seed=0)
    x, y = _batch(np.random.default_rng(), graph, batch, np.float32)
    kernel, loss = _kernel(gpu, batch, x, y, schedule)
    most = kernel.most_blocks()
    assert kernel.grid <= most
    with pytest.raises(ValueError, match="resident"):
        _kernel(gpu, batch, x, y, schedule, grid=most + CLUSTER)
    full, loss = _kernel(gpu, batch, x, y, schedule, grid=most)
    full.launch()
    np.testing.assert_allclose(float(loss), ref.train_step(x, y, 0), rtol=1e-5)


@pytest.mark.parametrize("schedule,barriers", [("layers", 2 * 5 - 1), ("rows", 1),
                                               ("clusters", 1)])  # loss in fwd
def test_replays_are_deterministic_and_the_counters_reset(schedule: str, barriers: int) -> None:
    """The barrier's and the split tickets' counters reset themselves: 300 launches, each
    bit-identical (split-K partials are added in a fixed order)."""
    graph, batch, _, gpu = _gpu_pair("wide_batch", "float32", seed=0)
    x, y = _batch(np.random.default_rng(), graph, batch, np.float32)
    kernel, loss = _kernel(gpu, batch, x, y, schedule)
    if schedule == "layers":
        assert int(kernel.meta[:, 7:10].max()) > 1  # some GEMM is split
    kernel.launch()
    first, first_loss = host(gpu.store.grad).copy(), float(loss)
    for _ in range(300):
        kernel.launch()
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(host(gpu.store.grad), first)
    assert float(loss) == first_loss
    np.testing.assert_array_equal(host(kernel.barrier), [0, 301 * barriers])
    assert not host(kernel.tickets).any()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_phase_timer_records_every_phase_in_order_and_changes_no_result(schedule: str) -> None:
    """Each block stamps the kernel's start, then per phase when it finished its work and
    when it left the barrier after it (none after the last). Checked: the profiled build
    computes the same bits; every block wrote every stamp and nothing past the last phase;
    each block's stamps never go back; no block left a barrier before the last block
    arrived at it; phase_profile's figures follow from the stamps (the median block done
    no later than the last). Stamps are compared as integers: the old check compared
    float64 roundings of ~1.7e18 ns (256 ns apart) and failed about one run in two."""
    graph, batch, _, gpu = _gpu_pair("sigmoid", "float32", seed=2)  # 40 logits: a loss phase
    x, y = _batch(np.random.default_rng(), graph, batch, np.float32)
    kernel, loss = _kernel(gpu, batch, x, y, schedule)
    kernel.launch()
    plain, plain_loss = host(gpu.store.grad).copy(), float(loss)
    timed = kernel.profiled()
    assert timed.prof is not None
    timed.prof[...] = 0  # a stamp left unwritten stays 0
    timed.launch()
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(host(gpu.store.grad), plain)
    assert float(loss) == plain_loss
    names = timed.phase_names()
    if schedule == "layers":  # 3 forward phases, the loss, 3 backward
        assert names[3] == "loss" and len(names) == 7
    else:
        assert len(names) == 2
    stamps = host(timed.prof).astype(np.int64)  # (slot, block)
    written = 2 * len(names)  # start, then done and barrier exit per phase but the last
    assert stamps.shape == (written + 2, timed.grid)
    assert (stamps[:written] > 0).all(), np.argwhere(stamps[:written] == 0)[:5]
    assert not stamps[written:].any()
    steps = np.diff(stamps[:written], axis=0)
    assert (steps >= 0).all(), np.argwhere(steps < 0)[:5]
    for p in range(len(names) - 1):  # the barrier after phase p: arrivals, then exits
        assert stamps[2 + 2 * p].min() >= stamps[1 + 2 * p].max(), names[p]
    rows = timed.phase_profile()
    assert [r[0] for r in rows] == names
    for name, last, median, barrier in rows:
        assert 0 <= median <= last < 1e4, (name, last, median)
        assert barrier >= 0, (name, barrier)
    assert rows[-1][3] == 0.0
    with pytest.raises(RuntimeError, match="profile=True"):
        kernel.phase_profile()


@pytest.mark.parametrize("body", ["mlp_layers", "mlp_rows", "mlp_clusters"])
@pytest.mark.parametrize("opt,kw", [("adam", {}), ("sgd", {"momentum": 0.9})])
def test_captured_one_kernel_step_matches_numpy_steps(opt: str, kw: dict, body: str) -> None:
    from aicf_induct.runtime.cuda_step import CudaStep

    graph, _, ref, gpu = _gpu_pair("relu_ragged", "float64", seed=1)
    o_ref, o_gpu = make_optimizer(opt, lr=0.01, **kw), make_optimizer(opt, lr=0.01, **kw)
    _schedule(body.removeprefix("mlp_"))
    step = CudaStep(gpu, o_gpu, whole_step=body)
    rng = np.random.default_rng()
    for k in range(6):
        x, y = _batch(rng, graph, 40 if k < 4 else 17, np.float64)  # two batch shapes
        loss_ref = ref.train_step(x, y, k)
        o_ref.step(ref.store, 0.01)
        # host arrays go through the static buffers, device arrays are read in place
        s = step.run(x, y, k, 0.01) if k % 2 else step.run(cp.asarray(x), cp.asarray(y), k,
                                                            0.01)
        assert s is not None and step.step_body(len(x)) == body
        np.testing.assert_allclose(s.loss, loss_ref, rtol=1e-10)
        assert_close(gpu.store.data, ref.store.data, 1e-10, f"theta after step {k}")
    assert step.captured, step.graph_error


@pytest.mark.parametrize("precision,mma", [("fp32", 0), ("tf32", 1), ("bf16", 1)])
def test_the_precision_policy_picks_the_products(precision: str, mma: int) -> None:
    """fp32 runs SIMT fp32 products; tf32 and bf16 run TF32 tensor cores; a short run
    still follows the NumPy runtime's loss curve."""
    from aicf_induct.kernels import REGISTRY
    from aicf_induct.runtime.cuda_step import CudaStep

    n_in, widths, n_out, act, bias, attrs, _, _ = CASES["wide_batch"]
    graph = chain(n_in, widths, n_out, act, bias, "float32", attrs)
    ref = Executor(graph, store_for(graph, seed=4, dtype="float32"))
    gpu = Executor(graph, store_for(graph, seed=4, xp=cp, dtype="float32"), device="cuda",
                   xp=cp, fuse=True, registry=REGISTRY, precision=precision)
    o_ref, o_gpu = make_optimizer("adam", lr=1e-3), make_optimizer("adam", lr=1e-3)
    step = CudaStep(gpu, o_gpu, whole_step="mlp_layers")
    rng = np.random.default_rng()
    for k in range(5):
        x, y = _batch(rng, graph, 128, np.float32)
        loss_ref = ref.train_step(x, y, k)
        o_ref.step(ref.store, 1e-3)
        s = step.run(cp.asarray(x), cp.asarray(y), k, 1e-3)
        assert s is not None
        # fp32: the first loss is the kernels' rounding alone; after it, Adam's near-sign
        # updates of gradients near zero carry that rounding into the weights (one run in
        # many went past 1e-5 at the fifth step); a wrong product is off by far more
        rtol = (1e-5 if k == 0 else 1e-4) if mma == 0 else 1e-2
        np.testing.assert_allclose(s.loss, loss_ref, rtol=rtol)
    assert step._entries[128].step_kernel.mma == mma


def test_auto_choice_runs_and_is_kept_by_the_tuner() -> None:
    from aicf_induct.kernels.autotune import Autotuner, TunedRegistry
    from aicf_induct.kernels.cuda.compile import device
    from aicf_induct.kernels.cuda.timer import cuda_timer
    from aicf_induct.runtime.cuda_step import CudaStep

    graph = chain(16, [64, 64], 2, dtype="float32")
    tuner = Autotuner(cuda_timer, device().name)
    gpu = Executor(graph, store_for(graph, seed=0, xp=cp, dtype="float32"), device="cuda",
                   xp=cp, fuse=True, registry=TunedRegistry(tuner))
    step = CudaStep(gpu, make_optimizer("adam", lr=1e-3))
    x, y = _batch(np.random.default_rng(), graph, 256, np.float32)
    assert step.run(x, y, 0, 1e-3) is not None
    keys = [k for k in tuner.choices if k[0] == "train_step"]
    assert len(keys) == 1 and tuner.choices[keys[0]].endswith(step.step_body(256))
    assert "bodies=mlp_layers,mlp_rows" in keys[0][1]  # a new schedule means a new choice
    timed = tuner.timed
    again = CudaStep(gpu, make_optimizer("adam", lr=1e-3))
    again.run(x, y, 0, 1e-3)
    assert tuner.timed == timed  # the kept choice, nothing timed


def test_forcing_the_kernel_on_another_model_says_why_not() -> None:
    from aicf_induct.kernels import REGISTRY
    from aicf_induct.runtime.cuda_step import CudaStep

    graph = mlp(4, 2, norm="layernorm")
    gpu = Executor(graph, store_for(graph, seed=0, xp=cp), device="cuda", xp=cp, fuse=True,
                   registry=REGISTRY)
    step = CudaStep(gpu, make_optimizer("adam", lr=1e-3), whole_step="mlp_rows")
    with pytest.raises(ValueError, match="layernorm"):
        step.run(np.zeros((8, 4)), np.zeros(8, dtype=np.int64), 0, 1e-3)
