"""The CPU emulator's own barrier rules (cuda_emu.h), on kernels written for them: a thread
that returns early stops counting at __syncthreads, as on a GPU; threads left waiting at a
barrier the others never reach abort the process with a message naming the block, rather
than hang the test run."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.kernels.cuda_emulator import cache_dir, compiler

pytestmark = pytest.mark.slow

KERNELS = r"""
// the upper half of each block returns before the block barrier, which the lower half
// passes only if those threads dropped out of it; thread 0 then writes its block's number
__global__ void early_exit(float* x) {
  if (threadIdx.x >= blockDim.x / 2) return;
  __syncthreads();
  if (threadIdx.x == 0) x[0] = float(blockIdx.x + 1);
}

// thread 0 waits at the block barrier, the rest of its warp at the warp barrier thread 0
// never reaches: no thread of warp 0 can go on
__global__ void stuck(float* x) {
  if (threadIdx.x == 0) __syncthreads(); else __syncwarp();
  x[threadIdx.x] = 1.0f;
}
"""

# Run in a child: an abort ends the process that meets it
CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from pathlib import Path
    from tests.kernels.cuda_emulator import EmuModule
    name, workdir, code = sys.argv[1], Path(sys.argv[2]), sys.stdin.read()
    kernel = EmuModule(workdir, code, (), [name]).get_function(name)
    x = np.zeros(64, np.float32)
    kernel((2,), (64,), (x,))
    print(x[0])
""")


def _no_core_file() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _run(name: str, where: Path) -> subprocess.CompletedProcess[str]:
    if compiler() is None:
        pytest.skip("no host C++ compiler")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-c", CHILD, name, str(cache_dir())], input=KERNELS,
                          capture_output=True, text=True, cwd=where, env=env, timeout=120,
                          preexec_fn=_no_core_file)


def test_a_thread_that_returns_drops_out_of_the_block_barrier(tmp_path: Path) -> None:
    done = _run("early_exit", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2.0"  # the second block's thread 0 wrote last


def test_threads_waiting_at_a_barrier_the_others_never_reach_abort_with_the_block(
        tmp_path: Path) -> None:
    done = _run("stuck", tmp_path)
    assert done.returncode == -signal.SIGABRT
    assert ("cuda_emu: block (0,0,0): 32 threads wait at a barrier the others never reach"
            in done.stderr), done.stderr
