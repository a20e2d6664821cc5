"""cuda tier: compiled plans, the captured whole step, the trainer and live rewrites on the
GPU against the NumPy runtime; the autotuner's choices persisted in the warehouse."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.kernels.registry import Kernel, KernelQuery, KernelRegistry
from aicf_induct.runtime.executor import Executor, store_for
from aicf_induct.runtime.optimizers import make_optimizer
from tests.graphs import all_ops, mlp
from tests.kernels.cuda_helpers import assert_close
from tests.kernels.test_fusion import GRAPHS, _batch

pytestmark = pytest.mark.cuda
cp = pytest.importorskip("cupy")


def _gpu_executor(graph, loss, eps=0.0, dtype="float64", precision="fp32", registry=None,
                  seed=1):
    from aicf_induct.kernels import REGISTRY

    store = store_for(graph, seed=seed, xp=cp, dtype=dtype)
    return Executor(graph, store, loss=loss, label_smoothing=eps, device="cuda", xp=cp,
                    fuse=True, precision=precision, registry=registry or REGISTRY)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_fused_gpu_plan_matches_the_numpy_plan(name: str) -> None:
    make, loss, eps = GRAPHS[name]
    graph = make()
    ref = Executor(graph, store_for(graph, seed=1), loss=loss, label_smoothing=eps)
    gpu = _gpu_executor(graph, loss, eps)
    rng = np.random.default_rng(0)
    for step in range(3):
        x, y = _batch(rng, graph, loss, n=50)
        la, lb = ref.train_step(x, y, step), gpu.train_step(x, y, step)
        np.testing.assert_allclose(lb, la, rtol=1e-10)
        assert_close(gpu.store.grad, ref.store.grad, 1e-10, f"{name} grads step {step}")
        ref.store.data -= 0.1 * ref.store.grad
        gpu.store.data -= 0.1 * gpu.store.grad
        assert_close(gpu.predict(x), ref.predict(x), 1e-10, f"{name} predict")


@pytest.mark.parametrize("precision,rtol", [("fp32", 1e-4), ("tf32", 2e-2), ("bf16", 6e-2)])
def test_float32_and_mixed_precision_plans(precision: str, rtol: float) -> None:
    graph = mlp_graph(parse_model_spec("mlp:depth=3,width=64,act=gelu"), 16, 5,
                      dtype="float32")
    ref = Executor(graph, store_for(graph, seed=2), loss="cross_entropy")
    gpu = _gpu_executor(graph, "cross_entropy", dtype="float32", precision=precision, seed=2)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(300, 16)).astype(np.float32), rng.integers(0, 5, size=300)
    la, lb = ref.train_step(x, y, 0), gpu.train_step(x, y, 0)
    np.testing.assert_allclose(lb, la, rtol=rtol)
    assert_close(gpu.store.grad, ref.store.grad, rtol, f"{precision} grads")


STEP_CASES = [
    ("relu", "adam", {}, 0.0), ("relu", "adamw", {"weight_decay": 0.05}, 1.0),
    ("dropout", "sgd", {"momentum": 0.9, "nesterov": True}, 0.0),
    ("silu_ln", "adam", {"weight_decay": 1e-3}, 0.5), ("all_ops", "adam", {}, 0.0),
]


@pytest.mark.parametrize("graphs", [True, False])
@pytest.mark.parametrize("name,opt,kw,clip", STEP_CASES)
def test_captured_step_matches_numpy_steps(name: str, opt: str, kw: dict, clip: float,
                                           graphs: bool) -> None:
    from aicf_induct.runtime.clipping import clip_grad_norm_, global_grad_norm
    from aicf_induct.runtime.cuda_step import CudaStep

    make, loss, eps = GRAPHS[name]
    graph = make()
    ref = Executor(graph, store_for(graph, seed=1), loss=loss, label_smoothing=eps)
    gpu = _gpu_executor(graph, loss, eps)
    o_ref, o_gpu = make_optimizer(opt, lr=0.01, **kw), make_optimizer(opt, lr=0.01, **kw)
    step = CudaStep(gpu, o_gpu, clip_norm=clip, graphs=graphs)
    rng = np.random.default_rng(0)
    for k in range(6):
        x, y = _batch(rng, graph, loss, n=40 if k < 4 else 17)  # two batch shapes
        lr = 0.01 / (1 + k)
        loss_ref = ref.train_step(x, y, k)
        norm = clip_grad_norm_(ref.store, clip) if clip else global_grad_norm(ref.store)
        ratio = o_ref.step(ref.store, lr)
        s = step.run(x, y, k, lr)
        assert s is not None
        np.testing.assert_allclose(s.loss, loss_ref, rtol=1e-10)
        np.testing.assert_allclose(s.grad_norm, norm, rtol=1e-9)
        np.testing.assert_allclose(s.update_ratio, ratio, rtol=1e-8)
        assert_close(gpu.store.data, ref.store.data, 1e-10, f"theta after step {k}")
    assert step.captured == graphs, step.graph_error  # every op has a capturable kernel
    assert o_gpu.state_dict()["steps"] == o_ref.state_dict()["steps"]


def test_trainer_on_cupy_matches_the_numpy_loss_curve() -> None:
    from aicf_induct.records import MemoryRecorder
    from aicf_induct.runtime.trainer import TrainConfig, Trainer
    from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem

    problem = toy_problem("classification", n=600, seed=1)
    for spec, cfg in [
        ("mlp:depth=2,width=32", dict(optimizer="adam", lr=3e-3)),
        ("mlp:depth=2,width=32,dropout=0.2",
         dict(optimizer="sgd", lr=0.05, momentum=0.9, clip_norm=1.0)),
        ("mlp:depth=3,width=16,act=gelu,norm=layernorm",
         dict(optimizer="adamw", lr=3e-3, weight_decay=0.05, schedule="cosine",
              warmup_steps=5)),
    ]:
        curves, metrics = {}, {}
        for backend in ("numpy", "cupy"):
            rec = MemoryRecorder()
            tr = Trainer(problem, toy_graph(problem, spec),
                         TrainConfig(epochs=4, batch_size=32, patience=0, backend=backend,
                                     **cfg), recorder=rec)
            res = tr.fit()
            curves[backend] = np.array([s.loss for s in rec.steps])
            metrics[backend] = res.metrics
        np.testing.assert_allclose(curves["cupy"], curves["numpy"], rtol=1e-8, err_msg=spec)
        for k, v in metrics["numpy"].items():
            np.testing.assert_allclose(metrics["cupy"][k], v, rtol=1e-7, err_msg=k)


def test_live_rewrites_keep_working_on_the_gpu() -> None:
    from aicf_induct.runtime.model_state import capture, install
    from aicf_induct.runtime.transforms import Deepen, Widen
    from tests.runtime.test_adaptive_fixtures import (
        make_trainer,
        run_steps,
        toy_graph,
        toy_problem,
    )

    problem = toy_problem("classification", n=600, seed=1)
    losses = {}
    for backend in ("numpy", "cupy"):
        tr = make_trainer(problem, toy_graph(problem, "mlp:depth=2,width=16"), seed=0,
                          backend=backend)
        out = run_steps(tr, 30)
        state = capture(tr, with_grads=True)
        for site in ("blocks.0.linear", "blocks.1.linear"):
            state = Widen(factor=2.0).apply(state, site, np.random.default_rng(0))
        state = Deepen().apply(state, "blocks.1.act", np.random.default_rng(0))
        install(tr, state, compile_batch=32)
        out += run_steps(tr, 30)
        assert tr.executor.xp is (cp if backend == "cupy" else np)
        losses[backend] = np.array(out)
    np.testing.assert_allclose(losses["cupy"], losses["numpy"], rtol=1e-8)


def test_autotuned_choices_persist_in_the_warehouse(tmp_path) -> None:
    from aicf_induct.kernels.autotune import Autotuner, TunedRegistry
    from aicf_induct.kernels.cuda.compile import device
    from aicf_induct.kernels.cuda.timer import cuda_timer
    from warehouse.tuning_store import WarehouseTuningStore

    graph = mlp(16, 2, depth=2, width=64)
    root = tmp_path / "wh"
    first = Autotuner(cuda_timer, device().name, WarehouseTuningStore(root))
    ex = _gpu_executor(graph, "cross_entropy", dtype="float32",
                       registry=TunedRegistry(first))
    names = ex.plan("train", 256).kernel_names
    assert first.timed > 0
    assert list((root / "kernel_tuning").rglob("*.parquet"))
    again = Autotuner(cuda_timer, device().name, WarehouseTuningStore(root))
    ex2 = _gpu_executor(graph, "cross_entropy", dtype="float32",
                        registry=TunedRegistry(again))
    assert ex2.plan("train", 256).kernel_names == names
    assert again.timed == 0
    assert not any(n.endswith("reference") for n in names)


class _Withholding(KernelRegistry):
    """The registry's kernels but those of `op`: the op runs its reference on the GPU, as an
    op without a CUDA kernel would."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op

    def candidates(self, q: KernelQuery) -> list[Kernel]:
        from aicf_induct.kernels import REGISTRY

        return [] if q.op == self.op else REGISTRY.candidates(q)


def test_a_reference_fallback_runs_eagerly_and_says_so() -> None:
    from aicf_induct.runtime.cuda_step import CudaStep

    graph = all_ops()
    ref = Executor(graph, store_for(graph, seed=1), loss="cross_entropy")
    gpu = _gpu_executor(graph, "cross_entropy", registry=_Withholding("concat"))
    plan = gpu.plan("train", 8)
    assert not plan.capturable
    assert {n for n in plan.kernel_names if n.endswith(".reference")} == {
        "concat.fwd.reference", "concat.vjp.reference"}
    o_ref, o_gpu = make_optimizer("adam", lr=0.01), make_optimizer("adam", lr=0.01)
    step = CudaStep(gpu, o_gpu, graphs=True)
    rng = np.random.default_rng()
    for k in range(3):
        x, y = rng.normal(size=(8, 6)), np.arange(8) % 3
        loss_ref = ref.train_step(x, y, k)
        o_ref.step(ref.store, 0.01)
        s = step.run(x, y, k, 0.01)
        assert s is not None
        np.testing.assert_allclose(s.loss, loss_ref, rtol=1e-10)
        assert_close(gpu.store.data, ref.store.data, 1e-10, f"theta after step {k}")
    assert not step.captured
