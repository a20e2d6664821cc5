"""CUDA support without a GPU: nothing imports CuPy, the kernels are registered with their
sources, the sources and their launchers agree (shared constants, what the sources assume of
them, the activations' ids and formulas), and the backend falls back to NumPy (or says
clearly why it cannot)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.ir.ops import ACTIVATION_TABLE, CUDA_NONE
from aicf_induct.kernels import REGISTRY, KernelQuery
from aicf_induct.kernels.cuda import (
    attention,
    gemm,
    image,
    launch,
    mlp_step,
    ops,
    optim,
    sources,
    tensor_ops,
    tokens,
)
from aicf_induct.kernels.cuda.sources import KERNEL_DIR, Family, headers
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
    ("mse", "vjp"), ("cross_entropy", "fwd"), ("add", "vjp"), ("batchnorm", "fwd"),
    ("batchnorm", "vjp")])
def test_cuda_kernels_are_registered_and_capturable(op: str, direction: str) -> None:
    shapes = ((64, 16), (64, 8)) if direction != "fused" else ((64, 16),)
    q = KernelQuery(op, direction, "cuda", "float32", shapes,
                    {"out_features": 8, "precision": "fp32", "act": "relu"})
    found = REGISTRY.candidates(q)
    cuda = [k for k in found if not k.name.endswith("reference")]
    assert cuda and all(k.capturable for k in cuda)
    assert REGISTRY.select(q).capturable


@pytest.mark.parametrize("op,shapes,dtype,attrs", [
    ("attention", ((256, 9, 192),), "float32", {"heads": 8, "dropout": 0.1}),
    ("embedding", ((256, 7),), "int64", {"num_embeddings": 10, "embedding_dim": 8}),
    ("numeric_tokenizer", ((256, 7),), "float64", {"d_token": 8}),
    ("conv2d", ((64, 1, 8, 8),), "float32", {"out_channels": 4, "kernel_size": [3, 3]}),
    ("pool", ((64, 4, 8, 8),), "float32", {"mode": "avg", "kernel_size": [2, 2]}),
    ("mean", ((64, 9, 8),), "float32", {"axis": 1}), ("sum", ((64, 9),), "float64", {}),
    ("concat", ((64, 2, 3), (64, 1, 3)), "float32", {"axis": 1}),
    ("matmul", ((64, 4, 9, 6), (64, 4, 6, 9)), "float32", {}),
    ("matmul", ((64, 9, 6), (6, 5)), "float64", {}),
    ("reshape", ((64, 4, 6),), "float32", {"shape": [24]}),
    ("transpose", ((64, 4, 6),), "float32", {"perm": [0, 2, 1]})])
def test_new_op_kernels_are_registered_and_capturable(op: str, shapes: tuple, dtype: str,
                                                      attrs: dict) -> None:
    """Forward and VJP, as the plan queries them (a VJP's query: the inputs' shapes, then
    the output's and its gradient's)."""
    for direction in ("fwd", "vjp"):
        qs = shapes if direction == "fwd" else (*shapes, (1,), (1,))
        k = REGISTRY.select(KernelQuery(op, direction, "cuda", dtype, qs, attrs))
        assert k.name == f"{op}.{direction}.cuda" and k.capturable


@pytest.mark.parametrize("op,shapes,dtype,attrs", [
    ("attention", ((8, 65, 64),), "float32", {"heads": 2}),  # 65 tokens
    ("attention", ((8, 9, 130),), "float32", {"heads": 2}),  # heads 65 wide
    ("attention", ((8, 9, 64),), "int64", {"heads": 2}),
    ("matmul", ((8, 1, 9, 6), (1, 4, 6, 9)), "float32", {}),  # both sides broadcast
    ("matmul", ((9, 6), (8, 6, 5)), "float32", {}),  # a shared by b's batches
    ("conv2d", ((8, 1, 8, 8),), "int64", {})])
def test_outside_their_limits_the_new_ops_take_the_fallback(op: str, shapes: tuple,
                                                              dtype: str, attrs: dict) -> None:
    for direction in ("fwd", "vjp"):
        k = REGISTRY.select(KernelQuery(op, direction, "cuda", dtype, shapes, attrs))
        assert k.name.endswith(".reference"), k.name
    assert attention.ATTN_MAX == 64  # the limit docs/ir.md states


def test_several_gemm_variants_for_small_shapes_one_for_huge() -> None:
    small = KernelQuery("linear_act", "fused", "cuda", "float32", ((256, 64),),
                        {"out_features": 64, "precision": "fp32"})
    huge = KernelQuery("linear_act", "fused", "cuda", "float32", ((8192, 4096),),
                       {"out_features": 4096, "precision": "fp32"})
    names = {k.name for k in REGISTRY.candidates(small)}
    assert {"linear_act.cublas", "linear_act.tiled64", "linear_act.tiled32"} <= names
    assert {k.name for k in REGISTRY.candidates(huge)} == {
        "linear_act.cublas", "linear_act.cublaslt", "linear_act.fused.reference"}


FAMILIES = {f.file: f for mod in (gemm, ops, optim, mlp_step, attention, tokens, image,
                                  tensor_ops) for f in vars(mod).values()
            if isinstance(f, Family)}


def _text(family: Family) -> str:
    """What NVRTC sees of `family`: its headers, then its own file."""
    return "".join((KERNEL_DIR / h).read_text() for h in [*headers(family.file), family.file])


def _instantiated(source: str) -> set[str]:
    """Names of the __global__ functions (the first call-like name after the keyword that
    is not the launch bounds or the cluster shape)."""
    out = set()
    for chunk in source.split("__global__ void")[1:]:
        names = [n for n in re.findall(r"(\w+)\(", chunk)
                 if n not in ("__launch_bounds__", "__cluster_dims__")]
        out.add(names[0])
    return out


def test_every_cu_file_is_a_family_and_a_launcher_names_it() -> None:
    assert set(FAMILIES) == {p.name for p in KERNEL_DIR.glob("*.cu")}
    for h in {h for f in FAMILIES for h in headers(f)}:
        assert (KERNEL_DIR / h).is_file(), h


def test_every_kernel_the_launchers_name_is_in_its_source() -> None:
    launchers = {
        "gemm_tiled.cu": {"gemm_tiled"}, "gemm_wmma.cu": {"gemm_wmma_fwd"},
        "elementwise.cu": {"bias_act", "act_bwd", "act_bwd_bias", "colsum_finalize"},
        "losses.cu": {"softmax_ce", "mse_fwd", "mse_vjp"},
        "layernorm.cu": {"layernorm_fwd", "layernorm_bwd", "ln_bwd_params"},
        "batchnorm.cu": {"batchnorm_fwd", "batchnorm_bwd"},
        "dropout.cu": {"dropout_apply"},
        "optim.cu": {"grad_sumsq", "adam_step", "sgd_step"},
        "mlp_step.cu": {"mlp_step", "mlp_step_clusters"},
        "attention.cu": {"attn_fwd", "attn_bwd"},
        "tokens.cu": {"embedding_fwd", "embedding_bwd", "tokenizer_fwd", "tokenizer_bwd_x",
                      "tokenizer_bwd_params"},
        "image.cu": {"im2col", "col2im", "rows_to_nchw", "nchw_to_rows", "pool_fwd",
                     "pool_bwd"},
        "tensor.cu": {"reduce_axis", "broadcast_axis", "concat_part"},
    }
    assert set(launchers) == set(FAMILIES)
    for file, names in launchers.items():
        src = _text(FAMILIES[file])
        assert names <= _instantiated(src), file
        assert src.count("{") == src.count("}"), file
        assert src.count("(") == src.count(")"), file


# the names of constants a source may take from its launcher: ACT_*, T_*, MF, *_ILP
_SHARED = re.compile(r"\b(ACT_[A-Z_]+|T_[A-Z]+|MF|[A-Z]+_ILP)\b")


def test_shared_constants_come_from_python_only() -> None:
    """Every constant a source shares with its launcher is passed as -D (none is defined in
    a .cu/.cuh file, none is used without being passed), and each one passed is used."""
    for file, family in FAMILIES.items():
        src, passed = _text(family), sources.defines(family)
        defined = set(re.findall(r"^\s*#define\s+(\w+)", src, re.MULTILINE))
        assert not defined & set(passed), (file, defined & set(passed))
        params = set(re.findall(r"\b(?:int|bool)\s+([A-Z][A-Z0-9_]*)\b", src))  # template's
        used = set(_SHARED.findall(re.sub(r"//[^\n]*", "", src))) - defined - params
        assert used <= set(passed), (file, used - set(passed))
        assert set(family.defines) <= used, (file, set(family.defines) - used)
    opts = sources.options(mlp_step.MLP_STEP)
    assert f"-DT_BM={mlp_step.TILE}" in opts and f"-DT_PAD={mlp_step.PAD}" in opts
    assert f"-I{KERNEL_DIR}" in opts


def _static_asserts(text: str) -> list[tuple[str, str]]:
    """(condition, message) of each file-scope static_assert."""
    found = re.findall(r'^static_assert\((.*?),\s*"(.*?)"', text, re.MULTILINE | re.DOTALL)
    return [(" ".join(c.split()), m) for c, m in found]


def _holds(condition: str, values: dict[str, int]) -> bool:
    """A static_assert's condition over integer macros, evaluated as C would."""
    def value(m: re.Match[str]) -> str:
        if m.group(0) not in values:
            raise KeyError(f"{m.group(0)} in {condition!r} is not passed by the launcher")
        return str(values[m.group(0)])

    expr = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", value, condition)
    assert re.fullmatch(r"[\d\s()+\-*/%<>=!&|]*", expr), condition
    expr = expr.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    expr = re.sub(r"!(?!=)", " not ", expr)
    return bool(eval(expr, {"__builtins__": {}}))  # digits and operators only, checked above


def test_what_the_sources_assume_of_python_constants_holds() -> None:
    """The static_asserts NVRTC checks at compile time, checked here with the values the
    launchers pass: a tile constant changed on either side fails on the CPU, not only on
    a GPU."""
    checked = 0
    for file, family in FAMILIES.items():
        values = sources.defines(family)
        for condition, message in _static_asserts(_text(family)):
            assert _holds(condition, values), f"{file}: {condition} ({message})"
            checked += 1
    assert checked >= 6
    text = _text(mlp_step.MLP_STEP)
    for key, value in [("T_BM", 64), ("T_BK", 64), ("T_NT", 128), ("T_PAD", 36),
                       ("T_PART", 32 * 32), ("T_CLUSTER", 16), ("T_REDUCE", 32 * 33)]:
        values = sources.defines(mlp_step.MLP_STEP) | {key: value}
        assert not all(_holds(c, values) for c, _ in _static_asserts(text)), key


def test_activation_table_gives_distinct_cuda_ids_and_macros() -> None:
    ids = [a.cuda_id for a in ACTIVATION_TABLE.values()]
    assert len(set(ids)) == len(ids) and CUDA_NONE not in ids
    defines = sources.act_defines()
    assert defines["ACT_NONE"] == CUDA_NONE
    assert {a.cuda_name: a.cuda_id for a in ACTIVATION_TABLE.values()}.items() <= defines.items()
    header = (KERNEL_DIR / "activations.cuh").read_text()
    for a in ACTIVATION_TABLE.values():  # a branch in both act_fwd and act_grad
        assert header.count(f"if (ACT == {a.cuda_name})") == 2, a.name
    assert launch.act_id(None) == CUDA_NONE
    assert launch.act_id("gelu", {"approximate": "tanh"}) == ACTIVATION_TABLE["gelu_tanh"].cuda_id
    assert launch.act_id("gelu") == ACTIVATION_TABLE["gelu"].cuda_id


_HOST = r"""
#include <cmath>
#include <cstdio>
#define __device__
#define __forceinline__ inline
using std::erf;
using std::exp;
using std::tanh;
#include "activations.cuh"

template <int ACT>
void run(const char* name) {
  const double g = 0.75;
  for (int i = 0; i <= 40; ++i) {
    const double x = -4.0 + 0.2 * i;
    const double y = act_fwd<ACT, double>(x);
    std::printf("%s %.17g %.17g %.17g %.17g\n", name, x, y, act_grad<ACT, double>(x, g),
                act_grad<ACT, double>(y, g));
  }
}
int main() {
"""


def test_cuda_activations_compute_the_op_table_on_the_cpu(tmp_path: Path) -> None:
    """activations.cuh compiled for the host, with the ids the kernels get: for each table
    entry, act_fwd<cuda_id> is its forward and act_grad<cuda_id>, fed the output where the
    entry says `from_output` and the input otherwise, its derivative. Two activations'
    ids, macro names or branches swapped, or a wrong from_output, fail here."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    calls = "".join(f'  run<{n}>("{n}");\n' for n in sources.act_defines())
    (tmp_path / "acts.cpp").write_text(_HOST + calls + "}\n")
    exe = tmp_path / "acts"
    defines = [f"-D{k}={v}" for k, v in sources.act_defines().items()]
    subprocess.run([cxx, "-std=c++17", "-O0", f"-I{KERNEL_DIR}", *defines,
                    str(tmp_path / "acts.cpp"), "-o", str(exe)], check=True)
    rows: dict[str, list[list[float]]] = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        name, *vals = line.split()
        rows.setdefault(name, []).append([float(v) for v in vals])
    none = np.array(rows["ACT_NONE"])
    np.testing.assert_array_equal(none[:, 1], none[:, 0])
    np.testing.assert_array_equal(none[:, 2], 0.75)
    for a in ACTIVATION_TABLE.values():
        x, y, grad_x, grad_y = np.array(rows[a.cuda_name]).T
        np.testing.assert_allclose(y, a.forward(np, x, a.attrs), rtol=1e-12, atol=1e-15,
                                   err_msg=a.name)
        ref = a.grad(np, x, a.forward(np, x, a.attrs), np.full_like(x, 0.75), a.attrs)
        got = grad_y if a.from_output else grad_x
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15, err_msg=a.name)


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
