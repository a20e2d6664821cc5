"""Data parallel training: ranks that split each global batch and sum their gradients before
the optimizer step, so that every rank holds the same parameters after every step and the
run is the one-rank run's.

The arithmetic: with a loss that is the mean over the batch, the global batch's gradient is
Σ_r n_r g_r / N (g_r: rank r's mean-loss gradient over its n_r rows, N = Σ n_r). Each rank
scales its gradient by n_r / N and an all-reduce sums them (`DataParallel.reduce`); the loss
is reduced the same way. Clipping, the gradient norm and the optimizer step then run on
identical buffers on every rank. Every rank draws the same global batch (the same seeded
`BatchStream`) and takes its contiguous share (`shard_bounds`; with batchnorm none of one
row, whose variance is 0: a batch too small for two rows a rank goes to fewer ranks). What is
not the one-rank run's: batchnorm's batch statistics (each rank normalises its own rows, as
PyTorch's DDP without SyncBatchNorm) and dropout's masks (each rank draws its own: the
rank is in their key, `OpContext.rng`).

`Communicator` is what the ranks share: `allreduce_sum_` (in place, on the flat gradient
buffer and the loss), `broadcast` of a small host object from rank 0 (a rewrite decision, so
that every rank applies the same one at the same step) and `barrier`.
`SoloCommunicator` is one rank (no-ops); `PipeCommunicator` joins the ranks of one machine
by pipes to rank 0: the CPU path, tested against the one-rank run. `NcclCommunicator` is the
GPUs' (one per process, CuPy's NCCL bindings): its all-reduce runs on device buffers on the
current stream, so `device_reduce` puts the ranks' sum inside the captured training step
(`cuda_step.CudaStep(reduce=...)`, between backward and the fused update, each rank's
gradient scaled by its share of the batch, which travels in the step's term array); small
host objects go through a host communicator, which also hands NCCL's unique id around.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Protocol

import numpy as np

from aicf_induct.errors import ConfigError


class Communicator(Protocol):
    rank: int
    size: int

    def allreduce_sum_(self, buf: Any) -> None:
        """Replace `buf` (a host array) by its sum over the ranks, on every rank."""
        ...

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` (picklable), returned on every rank."""
        ...

    def barrier(self) -> None: ...


class SoloCommunicator:
    """One rank: nothing to share."""

    rank, size = 0, 1

    def allreduce_sum_(self, buf: Any) -> None:
        pass

    def broadcast(self, obj: Any) -> Any:
        return obj

    def barrier(self) -> None:
        pass


class PipeCommunicator:
    """Ranks of one machine, each a process, joined to rank 0 by a pipe (a star): rank 0
    gathers, sums in rank order (so every run sums the same way) and sends the result back.
    `links`: on rank 0, its end of each other rank's pipe in rank order; elsewhere, the one
    pipe to rank 0. Made by `pipe_ranks`."""

    def __init__(self, rank: int, size: int, links: list[Connection]) -> None:
        want = size - 1 if rank == 0 else 1
        if not 0 <= rank < size or len(links) != want:
            raise ConfigError(f"rank {rank} of {size} needs {want} link(s), got {len(links)}")
        self.rank, self.size, self.links = rank, size, links

    def allreduce_sum_(self, buf: Any) -> None:
        if self.size == 1:
            return
        if self.rank == 0:
            total = np.array(buf, copy=True)
            for link in self.links:  # rank order: the same sum on every run
                part = np.frombuffer(link.recv_bytes(), dtype=total.dtype).reshape(total.shape)
                total += part
            data = total.tobytes()
            for link in self.links:
                link.send_bytes(data)
            buf[...] = total
        else:
            self.links[0].send_bytes(np.ascontiguousarray(buf).tobytes())
            buf[...] = np.frombuffer(self.links[0].recv_bytes(),
                                     dtype=buf.dtype).reshape(buf.shape)

    def broadcast(self, obj: Any) -> Any:
        if self.size == 1:
            return obj
        if self.rank == 0:
            data = pickle.dumps(obj)
            for link in self.links:
                link.send_bytes(data)
            return obj
        return pickle.loads(self.links[0].recv_bytes())

    def barrier(self) -> None:
        self.broadcast(None)
        self.allreduce_sum_(np.zeros(1))


def pipe_ranks(size: int, context: Any) -> tuple[list[Connection], list[Connection]]:
    """The pipes of a `size`-rank `PipeCommunicator` from a multiprocessing context: (rank 0's
    links, one link for each of ranks 1..size-1)."""
    pairs = [context.Pipe() for _ in range(size - 1)]
    return [a for a, _ in pairs], [b for _, b in pairs]


def shard_bounds(n: int, rank: int, size: int, least: int = 1) -> tuple[int, int]:
    """Rank `rank`'s contiguous share [start, stop) of `n` rows: shares differ by one row at
    most, the larger ones first, among as many ranks as can hold `least` rows each
    (`data.least_rows`: 2 with batchnorm); the others get an empty share. Fewer ranks rather
    than a refusal or dropped rows: a short last batch would still split into single rows,
    and dropped rows would part the run from the one-rank run's batches."""
    holders = max(min(size, n // least), 1)
    if rank >= holders:
        return n, n
    base, extra = divmod(n, holders)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


@dataclass
class DataParallel:
    """One rank's side of data parallel training (see the module docstring)."""

    comm: Communicator

    def shard(self, x: Any, y: Any, least: int = 1) -> tuple[Any, Any]:
        """This rank's rows of the batch (x, y), none or at least `least` of them."""
        start, stop = shard_bounds(len(x), self.comm.rank, self.comm.size, least)
        return x[start:stop], y[start:stop]

    def reduce(self, grad: Any, loss: float, rows: int, total: int) -> float:
        """Sum the ranks' gradients (`grad`: the flat buffer, `rows` of `total` rows this
        rank's) into the global batch's, in place; the global batch's mean loss."""
        w = rows / total
        if rows:
            grad *= w
        else:  # an empty share adds nothing (the buffer may hold a step-old NaN)
            grad[...] = 0
        self.comm.allreduce_sum_(grad)
        out = np.array([loss * w if rows else 0.0])
        self.comm.allreduce_sum_(out)
        return float(out[0])


class NcclCommunicator:
    """Ranks as GPUs, one per process (each has made its device current): NCCL's all-reduce
    on device arrays, on the current stream (inside a CUDA graph capture too); host arrays
    and objects go through `host`, which also carries NCCL's unique id from rank 0."""

    def __init__(self, host: Communicator) -> None:
        from cupy.cuda import nccl

        self.host, self.rank, self.size = host, host.rank, host.size
        uid = host.broadcast(nccl.get_unique_id() if host.rank == 0 else None)
        self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)

    def allreduce_sum_(self, buf: Any) -> None:
        import cupy
        from cupy.cuda import nccl

        if isinstance(buf, np.ndarray):
            self.host.allreduce_sum_(buf)
            return
        kinds = {np.dtype(np.float64): nccl.NCCL_FLOAT64, np.dtype(np.float32): nccl.NCCL_FLOAT32}
        if buf.dtype not in kinds or not buf.flags.c_contiguous:
            raise ConfigError(f"NCCL all-reduce takes contiguous float32/float64 arrays, got "
                              f"{buf.dtype}")
        self.comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, kinds[buf.dtype],
                            nccl.NCCL_SUM, cupy.cuda.get_current_stream().ptr)

    def broadcast(self, obj: Any) -> Any:
        return self.host.broadcast(obj)

    def barrier(self) -> None:
        self.host.barrier()

    def close(self) -> None:
        """Free NCCL's communicator, once this rank is done with it. Its destruction waits
        for the other ranks' (measured on two H200s), so a rank other than 0 frees it only
        after its word to rank 0 is sent: it waited before, and rank 0 for the word."""
        if self.comm is not None:
            self.comm.destroy()
            self.comm = None


def close_communicator(comm: Communicator) -> None:
    """`comm.close()` where it has one (NCCL's), after the run's last exchange."""
    close = getattr(comm, "close", None)
    if close is not None:
        close()


def device_reduce(comm: Communicator) -> Any:
    """The ranks' sum inside a GPU training step (`CudaStep(reduce=...)`): each rank's
    gradient and loss scaled by its share of the batch (`cuda_step.DP_WEIGHT` of the step's
    term array), then summed over the ranks, all on the current stream: capturable."""
    import cupy

    from aicf_induct.runtime.cuda_step import DP_WEIGHT

    scale = cupy.ElementwiseKernel("raw float64 h", "T g", f"g = g * (T)h[{DP_WEIGHT}]",
                                   "aicf_dp_scale")

    def reduce(grad: Any, loss: Any, hyper: Any) -> None:
        scale(hyper, grad)
        scale(hyper, loss)
        comm.allreduce_sum_(grad)
        comm.allreduce_sum_(loss)

    return reduce
