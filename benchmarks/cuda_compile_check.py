"""Compile every CUDA source family with NVRTC for a given architecture, without a GPU
(but with CuPy and NVRTC installed).

Not a benchmark and not a test (CI has no CuPy): a check to rerun after editing a .cu/.cuh
file on a machine without a device, in an environment that has CuPy and the NVRTC wheel (as
below; the project's .venv usually has neither, and then this says so and exits 2). It
builds each family exactly as `compile.function` does (same options, -D constants and
include path), instantiating the templates the launchers use where listed below, and
prints what ptxas reports (registers, spills).

    python3 -m venv /work/cupyenv
    /work/cupyenv/bin/pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12 numpy scipy
    PYTHONPATH=$PWD /work/cupyenv/bin/python benchmarks/cuda_compile_check.py [--arch sm_90]

Exit status 1 when any family fails to compile.
"""

from __future__ import annotations

import argparse
import re
from itertools import product

from script_errors import run_main

from aicf_induct.kernels.cuda import (
    attention,
    gemm,
    image,
    mlp_step,
    ops,
    optim,
    tensor_ops,
    tokens,
)
from aicf_induct.kernels.cuda.compile import toolkit_includes
from aicf_induct.kernels.cuda.sources import Family, code, options

FLOATS = ("float", "double")
BOOLS = ("true", "false")


def _each(name: str, *args: tuple[str, ...]) -> list[str]:
    return [f"{name}<{','.join(a)}>" for a in product(*args)]


def instantiations(acts: list[int]) -> dict[str, list[str]]:
    """Template instantiations per family, as the launchers name them (families not listed
    compile with no instantiation: a syntax check of their templates only); `acts`: the
    activations' CUDA ids."""
    ids = tuple(str(a) for a in acts)
    return {
        "attention.cu": _each("attn_fwd", FLOATS) + _each("attn_bwd", FLOATS),
        "tokens.cu": (_each("embedding_fwd", FLOATS, FLOATS) + _each("embedding_bwd", FLOATS,
                                                                     FLOATS)
                      + _each("tokenizer_fwd", FLOATS) + _each("tokenizer_bwd_x", FLOATS)
                      + _each("tokenizer_bwd_params", FLOATS)),
        "image.cu": (_each("im2col", FLOATS) + _each("col2im", FLOATS)
                     + _each("rows_to_nchw", FLOATS) + _each("nchw_to_rows", FLOATS)
                     + _each("pool_fwd", FLOATS, BOOLS) + _each("pool_bwd", FLOATS, BOOLS)),
        "tensor.cu": (_each("reduce_axis", FLOATS) + _each("broadcast_axis", FLOATS)
                      + _each("concat_part", FLOATS, BOOLS)),
        "dropout.cu": _each("dropout_apply", FLOATS),
        "layernorm.cu": (_each("layernorm_fwd", FLOATS) + _each("layernorm_bwd", FLOATS)
                         + _each("ln_bwd_params", FLOATS)),
        "batchnorm.cu": _each("batchnorm_fwd", FLOATS) + _each("batchnorm_bwd", FLOATS),
        "losses.cu": (_each("softmax_ce", FLOATS) + _each("mse_fwd", FLOATS)
                      + _each("mse_vjp", FLOATS)),
        "elementwise.cu": (_each("bias_act", FLOATS, ids, ("1",))
                           + _each("bias_act", ("float",), ids, ("4",))
                           + _each("act_bwd", FLOATS, ids) + _each("act_bwd_bias", FLOATS, ids)
                           + _each("colsum_finalize", FLOATS)),
    }


def families() -> list[Family]:
    seen: dict[str, Family] = {}
    for mod in (gemm, ops, optim, mlp_step, attention, tokens, image, tensor_ops):
        for f in vars(mod).values():
            if isinstance(f, Family):
                seen.setdefault(f.file, f)
    return sorted(seen.values(), key=lambda f: f.file)


def compile_family(family: Family, arch: str, names: list[str]) -> tuple[bool, str]:
    """(compiled, NVRTC's log) for `family` with `names` instantiated."""
    from cupy_backends.cuda.libs import nvrtc

    opts = ["-std=c++17", f"--gpu-architecture={arch}", "--ptxas-options=-v",
            *options(family)]
    if family.toolkit:
        inc = toolkit_includes()
        if not inc:
            return False, "needs a CUDA toolkit's headers (crt/mma.h): none found"
        opts += list(inc)
    prog = nvrtc.createProgram(code(family), family.file, [], [])
    try:
        for n in names:
            nvrtc.addNameExpression(prog, n)
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError:
            return False, nvrtc.getProgramLog(prog)
        for n in names:  # every instantiation resolved to a kernel
            nvrtc.getLoweredName(prog, n)
        return True, nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


def _usage(log: str) -> list[str]:
    """ptxas's per-kernel lines: registers, spills, shared memory."""
    return [line.strip() for line in log.splitlines()
            if re.search(r"registers|spill", line)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--arch", default="sm_90", help="NVRTC target (default sm_90)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print ptxas's usage lines")
    args = ap.parse_args(argv)
    from aicf_induct.kernels.cuda.sources import act_defines

    table = instantiations(sorted(act_defines().values()))
    failed = 0
    for fam in families():
        names = table.get(fam.file, [])
        ok, log = compile_family(fam, args.arch, names)
        what = f"{len(names)} instantiations" if names else "templates not instantiated"
        print(f"{'ok  ' if ok else 'FAIL'} {fam.file:<16} {args.arch} ({what})")
        if not ok:
            failed += 1
            print("     " + log.strip().replace("\n", "\n     "))
        elif args.verbose:
            spills = [u for u in _usage(log) if "spill" in u and not u.startswith("0 bytes")]
            for line in _usage(log) if args.verbose else spills:
                print(f"     {line}")
    print(f"{failed} of {len(families())} families failed" if failed else "all compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    run_main(main, no_cupy="needs CuPy and the NVRTC wheel installed (no GPU): see this "
                           "script's docstring for the environment")
