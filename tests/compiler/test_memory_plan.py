"""The arena plan: values alive at the same time never share bytes, whatever the sizes and
lifetimes; values whose lifetimes do not meet may."""

from __future__ import annotations

import random

import pytest

from aicf_induct.compiler.memory import ALIGN, ValueInfo, plan_memory


def _random_values(seed: int) -> tuple[dict[str, ValueInfo], dict[str, tuple[int, int]]]:
    rng = random.Random(seed)
    infos, life = {}, {}
    for i in range(rng.randint(0, 80)):
        infos[f"v{i}"] = ValueInfo((rng.choice([0, 1, 3, 17, 64, 1000]),), "float32")
        first = rng.randint(-1, 40)
        life[f"v{i}"] = (first, first + rng.randint(0, 12))
    return infos, life


@pytest.mark.parametrize("seed", range(40))
def test_values_alive_together_never_share_bytes(seed: int) -> None:
    infos, life = _random_values(seed)
    plan = plan_memory(infos, life)
    blocks = {v: (off, off + max(infos[v].nbytes, 1)) for v, off in plan.offsets.items()}
    assert set(blocks) == set(life)
    for o, e in blocks.values():
        assert o % ALIGN == 0 and e <= plan.arena_bytes
    for v in life:
        for w in life:
            meet = not (life[v][1] < life[w][0] or life[w][1] < life[v][0])
            if v < w and meet:
                assert blocks[v][1] <= blocks[w][0] or blocks[w][1] <= blocks[v][0], (v, w)
    assert plan.arena_bytes <= plan.naive_bytes


def test_values_whose_lifetimes_do_not_meet_share_the_arena() -> None:
    infos = {v: ValueInfo((256,), "float32") for v in "abc"}
    plan = plan_memory(infos, {"a": (0, 1), "b": (2, 3), "c": (1, 2)})
    assert plan.offsets["a"] == plan.offsets["b"] != plan.offsets["c"]
    assert plan.arena_bytes == 2 * 1024
