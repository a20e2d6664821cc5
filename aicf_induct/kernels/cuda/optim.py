"""One optimizer kernel over the whole flat parameter buffer (optim.cu): SGD (momentum,
dampening, Nesterov), Adam and AdamW, with L2 or decoupled weight decay, the global gradient
norm, clipping, and the sums behind the update ratio, all on the device.

`FusedUpdate` holds the device scratch (block partial sums, a ticket counter, the stats) and
launches the kernels; the caller (runtime.cuda_step) fills `hyper` each step with the
learning-rate terms the host computes exactly as runtime/optimizers.py does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.kernels.cuda.compile import device, function
from aicf_induct.kernels.cuda.launch import NULL, ctype, f64, i32, i64
from aicf_induct.kernels.cuda.sources import Family

THREADS = 256
ILP = 4  # elements per thread per grid-stride round (optim.cu: OPT_ILP)
WAVES = 4  # blocks per multiprocessor, at most
STATS = 4  # sum g^2, sum theta^2 (before), sum delta^2, loss
# no fused multiply-add: the update rounds as runtime/optimizers.py does
OPTIM = Family("optim.cu", ("--fmad=false",), {"OPT_ILP": ILP})


@dataclass(frozen=True)
class UpdateRule:
    kind: str  # "sgd" | "adam"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False


class FusedUpdate:
    """Launches the fused update of (theta, grad, slots) with clipping at `max_norm`
    (0: none). Buffers are bound once; a CUDA graph may capture `launch`."""

    def __init__(self, rule: UpdateRule, theta: Any, grad: Any, slots: dict[str, Any],
                 max_norm: float = 0.0) -> None:
        import cupy

        self.rule, self.theta, self.grad, self.slots = rule, theta, grad, slots
        self.max_norm = float(max_norm)
        self.n = int(theta.size)
        per_block = THREADS * ILP
        self.blocks = max(1, min((self.n + per_block - 1) // per_block, WAVES * device().sms))
        self.partials = cupy.zeros(3 * self.blocks, dtype=np.float64)
        self.counter = cupy.zeros(2, dtype=np.uint32)
        self.stats = cupy.zeros(STATS, dtype=np.float64)
        t = ctype(theta.dtype)
        clip = "true" if self.max_norm > 0 else "false"
        if rule.kind == "adam":
            coupled = rule.weight_decay != 0 and not rule.decoupled
            decoupled = rule.weight_decay != 0 and rule.decoupled
            self._name = (f"adam_step<{t},{clip},{'true' if coupled else 'false'},"
                          f"{'true' if decoupled else 'false'}>")
        else:
            mom = rule.momentum != 0
            self._name = (f"sgd_step<{t},{clip},{'true' if rule.weight_decay else 'false'},"
                          f"{'true' if mom else 'false'},"
                          f"{'true' if rule.nesterov and mom else 'false'}>")
        self._sumsq = f"grad_sumsq<{t}>"
        self.compile()

    def compile(self) -> None:
        """Build the kernels now (before any capture)."""
        function(OPTIM, self._name)
        if self.max_norm > 0:
            function(OPTIM, self._sumsq)

    def launch(self, hyper: Any, seg_end: Any, nseg: int, loss: Any | None) -> None:
        """One update; hyper (float64, device): [lr, lr*wd, -, -, per segment a, b]."""
        r = self.rule
        grid, block = (self.blocks,), (THREADS,)
        loss_ptr = NULL if loss is None else loss
        loss_double = i32(1 if loss is not None and loss.dtype == np.float64 else 0)
        if self.max_norm > 0:
            function(OPTIM, self._sumsq)(grid, block, (i64(self.n), self.grad, self.partials,
                                                         self.counter, self.stats))
        common = (self.partials, self.counter, self.stats, loss_ptr, loss_double)
        if r.kind == "adam":
            b1, b2 = r.betas
            function(OPTIM, self._name)(grid, block, (
                i64(self.n), self.theta, self.grad, self.slots["m"], self.slots["v"], hyper,
                seg_end, i32(nseg), f64(1 - b1), f64(b2), f64(1 - b2), f64(r.eps),
                f64(r.weight_decay), f64(self.max_norm), *common))
        else:
            buf = self.slots.get("momentum", self.theta)  # unused without momentum
            function(OPTIM, self._name)(grid, block, (
                i64(self.n), self.theta, self.grad, buf, hyper, seg_end, i32(nseg),
                f64(r.momentum), f64(1 - r.dampening), i32(1 if r.dampening else 0),
                f64(r.weight_decay), f64(self.max_norm), *common))
