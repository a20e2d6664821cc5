"""Claims: racing processes take each item once; a dead holder's item is taken over; an item
ended as done stays done, one ended otherwise is taken again."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

from warehouse import Writer
from warehouse.claims import State, end_claim, item_dir, try_claim
from warehouse.lease import lease_path

KEYS = [f"item-{i}" for i in range(40)]
DONE = ("completed",)


def _worker(root: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    with Writer(root) as w:
        taken = []
        for key in KEYS:
            _, claim = try_claim(Path(root), "ns", key, w.writer_id, DONE)
            if claim is not None:
                taken.append(key)
                end_claim(claim, "completed")
        out.put(taken)


def test_racing_processes_take_each_item_exactly_once(root: Path) -> None:
    root.mkdir()
    ctx = multiprocessing.get_context("fork")  # fast: no re-import; they share nothing
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(root), out)) for _ in range(4)]
    for p in procs:
        p.start()
    taken = [k for _ in procs for k in out.get(timeout=60)]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(taken) == sorted(KEYS)  # every item once, none twice


def test_states_and_takeover(root: Path) -> None:
    with Writer(root) as me, Writer(root) as other:
        state, mine = try_claim(root, "ns", "a", me.writer_id, DONE)
        assert state is State.CLAIMED and mine is not None and mine.generation == 1
        # a live holder keeps it
        assert try_claim(root, "ns", "a", other.writer_id, DONE) == (State.HELD, None)
        end_claim(mine, "interrupted")  # not done: the next taker gets generation 2
        state, again = try_claim(root, "ns", "a", other.writer_id, DONE)
        assert state is State.CLAIMED and again is not None and again.generation == 2
        assert again.previous is not None and again.previous["status"] == "interrupted"
        end_claim(again, "completed")
        assert try_claim(root, "ns", "a", me.writer_id, DONE) == (State.DONE, None)
        # a holder whose process is gone (SIGKILL: its lease stays, its pid does not)
        dead = lease_path(root, "dead")
        data = json.loads(lease_path(root, me.writer_id).read_text())
        dead.write_text(json.dumps({**data, "writer_id": "dead", "pid": 2**22 + 1}))
        assert try_claim(root, "ns", "b", "dead", DONE)[0] is State.CLAIMED
        state, taken = try_claim(root, "ns", "b", me.writer_id, DONE)
        assert state is State.CLAIMED and taken is not None and taken.generation == 2
        assert taken.previous is not None and taken.previous["holder"] == "dead"
    names = sorted(os.listdir(item_dir(root, "ns", "a")))
    assert names == ["00000001.json", "00000002.json"]  # no temporary left behind
