"""The closed op table. Importing this package registers every op.

| group        | ops                                             |
|--------------|-------------------------------------------------|
| input        | input                                           |
| layer        | linear                                          |
| activation   | relu, gelu, tanh, silu, sigmoid, softmax        |
| norm         | layernorm, batchnorm                            |
| regularizer  | dropout                                         |
| merge        | add, concat                                     |
| loss         | cross_entropy, mse                              |
"""

from aicf_induct.ir.ops import activations, linear, losses, norm, structural  # noqa: F401
from aicf_induct.ir.ops.activations import (
    ACTIVATION_NAMES,
    ACTIVATION_TABLE,
    ACTIVATIONS,
    CUDA_NONE,
    Activation,
    activation,
)
from aicf_induct.ir.ops.base import (
    OPS,
    Array,
    OpContext,
    OpDef,
    ParamInfo,
    get_op,
)

__all__ = [
    "ACTIVATIONS",
    "ACTIVATION_NAMES",
    "ACTIVATION_TABLE",
    "CUDA_NONE",
    "OPS",
    "Activation",
    "Array",
    "OpContext",
    "OpDef",
    "ParamInfo",
    "activation",
    "get_op",
]
