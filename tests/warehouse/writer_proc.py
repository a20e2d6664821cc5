"""A training-like writer process for the concurrency tests (run as a script).

    python writer_proc.py ROOT RUN_ID STEPS FLUSH_S [PAUSE_EVERY]

Logs a run through WarehouseRecorder: start, snapshot, STEPS steps whose loss is a known
function of (run, step), a result and the run's end. Prints `committed N` lines (steps rows
committed so far) so a parent can kill it after a known flush.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aicf_induct.records import (
    ResultRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    StepRecord,
)
from warehouse import WarehouseRecorder


def loss_of(run_index: int, step: int) -> float:
    return run_index + 1.0 / (step + 1)


def main() -> None:
    root, run_id, steps, flush_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    pause_every = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    idx = int(run_id.rsplit("-", 1)[-1])
    rec = WarehouseRecorder(root, flush_interval_s=flush_s)
    rec.run_start(RunStartRecord(run_id, "p", "prob", "regression", {"i": idx}, idx, "cpu",
                                 {}, "test"))
    rec.snapshot(SnapshotRecord(run_id, 0, "start", "{}", f"fp{idx % 3}", 10, {"depth": 2.0}))
    last = -1
    for s in range(steps):
        rec.step(StepRecord(run_id, s, s // 1000, loss_of(idx, s), 1.0, 0.01, 0.1, 1e-3, 32))
        if pause_every and s % pause_every == 0:
            time.sleep(0.002)  # spread the run over time so readers and compaction overlap
            done = rec.writer.stats.rows.get("steps", 0)
            if done != last:
                print(f"committed {done}", flush=True)
                last = done
    rec.result(ResultRecord(run_id, steps, 0, "test", "r2", 1.0 / (idx + 1), True))
    rec.run_end(RunEndRecord(run_id, "completed", steps, 1.0))
    rec.close()
    print(f"committed {rec.writer.stats.rows.get('steps', 0)}", flush=True)


if __name__ == "__main__":
    main()
