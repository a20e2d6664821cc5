"""What `adapt --resume` checks before a resumed run starts: the options it does not read,
the checkpoint directory, and the warehouse the run goes on logging to (it must hold the
run, not ended; its rows past the checkpoint are left out of the replay)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from aicf_induct.cli import options
from aicf_induct.errors import ConfigError
from aicf_induct.runtime import snapshot as disk
from aicf_induct.runtime.adaptive import checkpoint_run_id
from aicf_induct.runtime.replay import KINDS

# what a resume reads from the command line; every other option is the checkpoint's (its
# model, recipe, settings, length and directory) and is refused when given. (--gpus/--ranks,
# --from-proposal and its options are refused with their own reasons.)
RESUME_TAKES = {"dataset", "resume", "policy", "inject_nan", "inject_spike", "warehouse",
                "no_log", "log_to", "api_key", "json", "gpus", "ranks", "from_proposal",
                "pack", "service", "help"}


def resume_dir(args: argparse.Namespace) -> str:
    """--resume's checkpoint directory, after refusing the options a resume does not read:
    DIR, or DIR/ckpt-N when that is DIR's latest checkpoint."""
    given = options.given_options(args)  # (only those a resume does not read are recorded)
    if given:
        raise ConfigError(f"--resume goes on with the checkpoint's model, recipe, settings, "
                          f"length and directory: drop {' and '.join(given)}")
    path = Path(args.resume)
    if path.name.startswith(disk.PREFIX) and (path / "snapshot.json").is_file():
        if disk.latest(path.parent) != path:
            raise ConfigError(f"--resume {path}: a run goes on from its latest checkpoint; "
                              f"give the checkpoint directory's parent (--resume {path.parent})")
        path = path.parent
    if disk.latest(path) is None:
        raise ConfigError(f"no checkpoint in {path}")
    return str(path)


def logged_rows(args: argparse.Namespace) -> dict[str, int] | None:
    """The resumed run's rows per kind in the local warehouse it logs to (None without one:
    --no-log, --log-to), after refusing a warehouse that does not hold the run, or holds it
    ended or still running."""
    run_id = checkpoint_run_id(args.resume)
    if args.no_log or args.log_to or run_id is None:
        return None  # (a checkpoint naming no run: resuming it says why)
    import warehouse

    root = Path(args.warehouse) if args.warehouse is not None else warehouse.default_root()

    def read(conn: Any) -> tuple[Any, dict[str, int]]:
        row = conn.execute("SELECT status, steps_taken FROM runs WHERE run_id = ?",
                           [run_id]).fetchone()
        return row, {k: int(conn.execute(f"SELECT count(*) FROM {k} WHERE run_id = ?",
                                         [run_id]).fetchone()[0]) for k in KINDS.values()}

    row, counts = warehouse.with_retry(root, read) if root.is_dir() else (None, {})
    if row is None:
        raise ConfigError(f"run {run_id} is not in the warehouse {root}: resume it into the "
                          f"one it was logged to (--warehouse DIR), or with --no-log")
    status, steps = row
    if status in ("completed", "early_stopped"):
        raise ConfigError(f"run {run_id} already {status.replace('_', ' ')} at step {steps}")
    if status == "running":
        raise ConfigError(f"run {run_id} is still running (its writer is alive)")
    return counts
