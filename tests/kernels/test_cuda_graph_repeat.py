"""The cuda tier of `kernels.cuda.graph_repeat`: a captured graph repeated k times as child
nodes runs its kernels k times, in order, on the same buffers, at every launch."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.kernels.cuda.graph_repeat import RepeatedGraph, repeated
from aicf_induct.runtime.cuda_step import capture

pytestmark = pytest.mark.cuda


def _affine_graph() -> tuple[object, object]:
    """A graph of x <- 2x + 1 (two kernels; their order and count show in the result)."""
    import cupy

    x = cupy.zeros(5, dtype=np.float64)

    def body() -> None:
        cupy.multiply(x, 2.0, out=x)
        cupy.add(x, 1.0, out=x)

    body()  # compile the kernels before the capture
    graph, error = capture(body)
    assert graph is not None, error
    x.fill(0)
    cupy.cuda.Device().synchronize()  # the launches below go to a non-blocking stream
    return x, graph


def test_a_repeated_graph_applies_its_child_k_times_per_launch() -> None:
    import cupy

    x, graph = _affine_graph()
    rg = RepeatedGraph(graph, 5)
    stream = cupy.cuda.Stream(non_blocking=True)
    rg.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.get(), np.full(5, 31.0))  # 2^5 - 1
    rg.launch(stream)
    graph.launch(stream)  # the child itself still runs alone
    stream.synchronize()
    np.testing.assert_array_equal(x.get(), np.full(5, 2.0 ** 11 - 1))
    rg.close()
    rg.close()  # idempotent


def test_a_graph_without_its_handle_is_refused_with_the_reason() -> None:
    class Handleless:
        graph = 0

    rg, why = repeated(Handleless(), 4)
    assert rg is None and "cudaGraph_t" in why
    _, graph = _affine_graph()
    with pytest.raises(ValueError, match="at least 1"):
        RepeatedGraph(graph, 0)
