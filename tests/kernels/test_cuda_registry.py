"""CUDA support without a GPU: nothing imports CuPy, the kernels are registered with their
sources, and the backend falls back to NumPy (or says clearly why it cannot)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.kernels import REGISTRY, KernelQuery
from aicf_induct.kernels.cuda import compile as cc
from aicf_induct.kernels.cuda import sources
from aicf_induct.runtime.backend import NUMPY, gpu_available, select_backend
from aicf_induct.runtime.trainer import TrainConfig


def test_importing_the_library_does_not_import_cupy() -> None:
    code = ("import sys, aicf_induct, aicf_induct.kernels, aicf_induct.runtime.trainer, "
            "aicf_induct.runtime.cuda_step, aicf_induct.runtime.backend; "
            "print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


@pytest.mark.parametrize("op,direction", [
    ("linear_act", "fused"), ("act_linear_bwd", "fused"), ("softmax_ce", "fused"),
    ("relu", "fwd"), ("gelu", "vjp"), ("layernorm", "vjp"), ("dropout", "fwd"),
    ("mse", "vjp"), ("cross_entropy", "fwd"), ("add", "vjp")])
def test_cuda_kernels_are_registered_and_capturable(op: str, direction: str) -> None:
    shapes = ((64, 16), (64, 8)) if direction != "fused" else ((64, 16),)
    q = KernelQuery(op, direction, "cuda", "float32", shapes,
                    {"out_features": 8, "precision": "fp32", "act": "relu"})
    found = REGISTRY.candidates(q)
    cuda = [k for k in found if not k.name.endswith("reference")]
    assert cuda and all(k.capturable for k in cuda)
    assert REGISTRY.select(q).capturable


def test_several_gemm_variants_for_small_shapes_one_for_huge() -> None:
    small = KernelQuery("linear_act", "fused", "cuda", "float32", ((256, 64),),
                        {"out_features": 64, "precision": "fp32"})
    huge = KernelQuery("linear_act", "fused", "cuda", "float32", ((8192, 4096),),
                       {"out_features": 4096, "precision": "fp32"})
    names = {k.name for k in REGISTRY.candidates(small)}
    assert {"linear_act.cublas", "linear_act.tiled64", "linear_act.tiled32"} <= names
    assert {k.name for k in REGISTRY.candidates(huge)} == {
        "linear_act.cublas", "linear_act.cublaslt", "linear_act.fused.reference"}


def _instantiated(source: str) -> set[str]:
    """Names of the __global__ functions (the first call-like name after the keyword that
    is not the launch bounds)."""
    out = set()
    for chunk in source.split("__global__ void")[1:]:
        names = [n for n in re.findall(r"(\w+)\(", chunk) if n != "__launch_bounds__"]
        out.add(names[0])
    return out


def test_every_kernel_the_launchers_name_is_in_its_source() -> None:
    launchers = {
        "gemm_tiled": {"gemm_tiled"}, "gemm_wmma": {"gemm_wmma_fwd"},
        "elementwise": {"bias_act", "act_bwd", "act_bwd_bias", "colsum_finalize"},
        "losses": {"softmax_ce", "mse_fwd", "mse_vjp"},
        "layernorm": {"layernorm_fwd", "layernorm_bwd", "ln_bwd_params"},
        "dropout": {"dropout_apply"},
        "optim": {"grad_sumsq", "adam_step", "sgd_step"},
        "mlp_step": {"mlp_step"},
    }
    assert set(launchers) == set(cc.FAMILIES)
    for family, names in launchers.items():
        src = cc.FAMILIES[family][0]
        assert names <= _instantiated(src), family
        assert src.count("{") == src.count("}"), family
        assert src.count("(") == src.count(")"), family


def test_activation_ids_are_shared_with_the_sources() -> None:
    assert sources.ACT_IDS["relu"] == 1 and sources.ACT_IDS["silu"] == 6
    for k in range(1, 7):
        assert f"ACT == {k}" in sources.COMMON


def test_backend_selection_without_a_gpu() -> None:
    assert select_backend("numpy") is NUMPY
    with pytest.raises(ConfigError, match="backend"):
        select_backend("tpu")
    if gpu_available():
        pytest.skip("a GPU is here")
    assert select_backend("auto") is NUMPY
    with pytest.raises(ConfigError, match="CuPy"):
        select_backend("cupy")


def test_train_config_checks_backend_and_precision() -> None:
    with pytest.raises(ConfigError, match="backend"):
        TrainConfig(backend="gpu")
    with pytest.raises(ConfigError, match="precision"):
        TrainConfig(precision="fp16")
    assert TrainConfig().backend == "auto"
