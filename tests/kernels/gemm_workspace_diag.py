"""Not a test: on the GPU, cuBLASLt weight gradients on 32 concurrent streams sharing ONE
workspace (the design before `launch.gemm_workspace`) against each stream's own one-stream
bits; prints, per shape, the workspace the chosen algorithms ask for and how many results
differed (python3 tests/kernels/gemm_workspace_diag.py). A count above 0 says the shared
workspace raced. On an H200 (2026-11-28), in one run of 10 rounds the first shape gave 271
of 320 and the second, 8192x16x16, did not finish within 100 s (split-K counters shared
between streams); in two runs of 40 rounds the first shape did not finish: run it under
`timeout`, and read its progress lines."""

from __future__ import annotations

import cupy as cp
import numpy as np

from aicf_induct.kernels.cuda import lt
from aicf_induct.kernels.cuda.launch import GEMM_WORKSPACE_BYTES

STREAMS, ROUNDS = 32, 10
SHAPES = [(4096, 64, 64), (8192, 16, 16), (2048, 128, 256), (16384, 32, 8), (1024, 512, 32)]


def main() -> None:
    rng = np.random.default_rng(0)
    shared = cp.empty(GEMM_WORKSPACE_BYTES, np.uint8)
    for m, n, k in SHAPES:
        gs = [cp.asarray(rng.standard_normal((m, n), dtype=np.float32)) for _ in range(STREAMS)]
        xs = [cp.asarray(rng.standard_normal((m, k), dtype=np.float32)) for _ in range(STREAMS)]
        gw = [cp.empty((n, k), np.float32) for _ in range(STREAMS)]
        alone = []
        for s in range(STREAMS):
            assert lt.wgrad_bgrad("fp32", gs[s], xs[s], gw[s], None, ws=shared)
            cp.cuda.Device().synchronize()
            alone.append(gw[s].get())
        asks = sorted({p.heur.workspace for key, p in lt._PLANS.items()
                       if p is not None and key[4:7] == (k, n, m)})
        print(f"{m}x{n}x{k}: one stream's bits taken; {ROUNDS} rounds on {STREAMS} streams",
              flush=True)
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]
        differ = 0
        for _ in range(ROUNDS):
            for s in range(STREAMS):
                with streams[s]:
                    lt.wgrad_bgrad("fp32", gs[s], xs[s], gw[s], None, ws=shared)
            cp.cuda.Device().synchronize()
            differ += sum(not np.array_equal(gw[s].get(), alone[s]) for s in range(STREAMS))
        print(f"{m}x{n}x{k}: algorithm asks {asks} B of workspace; {differ} of "
              f"{STREAMS * ROUNDS} results differ from one stream's", flush=True)


if __name__ == "__main__":
    main()
