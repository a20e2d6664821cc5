"""Mini-batch order: a permutation per epoch derived from (seed, epoch) alone, so the data
position of a run is two integers and a resumed run sees exactly the batches it would have."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass
class BatchStream:
    n_rows: int
    batch_size: int
    seed: int = 0
    drop_last: bool = False  # a short last batch is fine: plans are cached per shape

    def batches_per_epoch(self) -> int:
        full, rest = divmod(self.n_rows, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.n_rows)

    def epoch(self, epoch: int, start_batch: int = 0) -> Iterator[np.ndarray]:
        """Row indices of each batch of `epoch`, from batch `start_batch` on."""
        idx = self.order(epoch)
        for b in range(start_batch, self.batches_per_epoch()):
            yield idx[b * self.batch_size:(b + 1) * self.batch_size]
