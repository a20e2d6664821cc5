"""Mini-batch order: a permutation per epoch derived from (seed, epoch) alone, so the data
position of a run is two integers and a resumed run sees exactly the batches it would have."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from aicf_induct.ir.graph import Graph

ORDER_CACHE_BYTES = 64 << 20  # recent permutations kept: the runs of one (problem, seed)
_orders: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
_order_bytes = 0
_orders_lock = threading.Lock()  # runs may train in threads of one process


def permutation(seed: int, epoch: int, n_rows: int) -> np.ndarray:
    """The (read-only) row order of `epoch` for `seed`. Kept a while: the many runs of one
    problem and seed in a sweep (one per candidate) draw the same orders, and a generator's
    construction costs more than the permutation on a small table."""
    global _order_bytes
    key = (seed, epoch, n_rows)
    with _orders_lock:
        out = _orders.get(key)
        if out is not None:
            _orders.move_to_end(key)
            return out
    out = np.random.default_rng([seed, epoch]).permutation(n_rows)
    out.flags.writeable = False
    with _orders_lock:
        if key not in _orders:
            _orders[key] = out
            _order_bytes += out.nbytes
        while _order_bytes > ORDER_CACHE_BYTES and len(_orders) > 1:
            _order_bytes -= _orders.popitem(last=False)[1].nbytes
    return out


# ops that normalise over a training batch's rows: over one row their variance is 0
BATCH_STAT_OPS = frozenset({"batchnorm"})


def least_rows(graph: Graph) -> int:
    """The fewest rows a training step of `graph` may take: 2 with batchnorm (PyTorch refuses
    it a batch of one row in training), else 1. `trainer.check_trainable` refuses a run whose
    batches would be one row; `parallel.shard_bounds` gives no rank a share of one."""
    return 2 if any(n.op in BATCH_STAT_OPS for n in graph.nodes) else 1


@dataclass
class BatchStream:
    n_rows: int
    batch_size: int
    seed: int = 0
    # a short last batch is fine (plans are cached per shape), one of one row is not: `_last`
    drop_last: bool = False

    def _last(self) -> tuple[int, int]:
        """(full batches, rows of the short batch after them; 0: none). A rest of one row is
        left out of its epoch when the split has more (the next epoch's order puts another
        row last): batchnorm's variance over one row is 0 (PyTorch refuses such a batch in
        training), and one row's gradient is noise whatever the model. Left out, not folded
        into the batch before it: no batch exceeds `batch_size`, by which the GPU engine
        sizes its plans and graphs, and every engine trains on the same batches."""
        full, rest = divmod(self.n_rows, self.batch_size)
        if self.drop_last or (rest == 1 and full > 0):
            rest = 0
        return full, rest

    def batches_per_epoch(self) -> int:
        full, rest = self._last()
        return full + (1 if rest else 0)

    def sizes(self) -> list[int]:
        """The rows of each batch of an epoch."""
        full, rest = self._last()
        return [self.batch_size] * full + ([rest] if rest else [])

    def order(self, epoch: int) -> np.ndarray:
        """The epoch's row order (read-only: shared with other streams of the same seed)."""
        return permutation(self.seed, epoch, self.n_rows)

    def epoch(self, epoch: int, start_batch: int = 0) -> Iterator[np.ndarray]:
        """Row indices of each batch of `epoch`, from batch `start_batch` on."""
        idx = self.order(epoch)
        for b in range(start_batch, self.batches_per_epoch()):
            yield idx[b * self.batch_size:(b + 1) * self.batch_size]
