"""What `adapt --resume` checks before a resumed run starts: the options it does not read,
the checkpoint directory, and the warehouse the run goes on logging to (it must hold the
run, not ended; its rows past the checkpoint are left out of the replay). And what `adapt
--fork` checks before a new run branches from an ended one's final state."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from aicf_induct.cli import options
from aicf_induct.errors import ConfigError
from aicf_induct.runtime import snapshot as disk
from aicf_induct.runtime.adaptive import branch_point, checkpoint_run_id
from aicf_induct.runtime.replay import KINDS

# what a resume reads from the command line; every other option is the checkpoint's (its
# model, recipe, settings, length and directory) and is refused when given. (--gpus/--ranks,
# --from-proposal and its options are refused with their own reasons.)
RESUME_TAKES = {"dataset", "resume", "policy", "inject_nan", "inject_spike", "warehouse",
                "no_log", "log_to", "api_key", "json", "gpus", "ranks", "from_proposal",
                "pack", "service", "help", "quiet"}


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
        if _is_final(path):
            raise ConfigError(f"no checkpoint in {path}: it is the final state of an ended "
                              f"run, which --fork {path.parent} --steps N branches a new run "
                              f"from")
        raise ConfigError(f"no checkpoint in {path}")
    return str(path)


def _is_final(path: Path) -> bool:
    """Whether `path` is the final state an ended run left beside its checkpoints."""
    return path.name == disk.FINAL and disk.final_of(path.parent) == path


# what --fork reads from the command line beyond what a resume reads: the branch's length,
# its own checkpoints and rewrite budget (its rewrites count from 0; --policy, which a
# resume reads too, gives it another policy)
FORK_TAKES = ("--steps", "--checkpoint-dir", "--checkpoint-steps", "--max-rewrites")


def fork_dir(args: argparse.Namespace) -> str:
    """--fork's directory, after refusing the options a branch does not read and a length
    no longer than the ended run's."""
    given = [o for o in options.given_options(args) if o not in (*FORK_TAKES, "--fork")]
    if given:
        raise ConfigError(f"--fork goes on with the ended run's model, recipe and settings: "
                          f"drop {' and '.join(given)}")
    if "--steps" not in options.given_options(args):
        raise ConfigError("--fork needs --steps N: the branch's steps in all, more than the "
                          "ended run took")
    path = Path(args.fork)
    if _is_final(path):
        raise ConfigError(f"--fork {path}: give the checkpoint directory it is in "
                          f"(--fork {path.parent})")
    if disk.final_of(path) is None and disk.checkpoints(path):
        failed = _failed_end(args, path)
        if failed:
            raise ConfigError(f"no final state in {path}: {failed}, and a run leaves one "
                              f"only when it ends completed or early-stopped")
    branch_point(args.fork, args.steps)
    return str(args.fork)


def _failed_end(args: argparse.Namespace, directory: Path) -> str | None:
    """How the run whose checkpoints `directory` holds ended, when the local warehouse
    says it failed (a failed run leaves no end on disk); else None."""
    run_id = checkpoint_run_id(directory)
    if args.no_log or args.log_to or run_id is None:
        return None
    import warehouse

    root = warehouse.default_root(args.warehouse)
    if not root.is_dir():
        return None
    row = warehouse.with_retry(root, lambda conn: conn.execute(
        "SELECT status, steps_taken FROM runs WHERE run_id = ?", [run_id]).fetchone())
    if row is None or row[0] != "failed":
        return None
    return f"run {run_id} ended failed at step {row[1]}"


# the `work` of each earlier resume of a run (its `checkpoint resume` event), as text
RESUMED_AT = ("SELECT CAST(json_extract(detail, '$.work') AS VARCHAR) AS work FROM events "
              "WHERE run_id = {run} AND kind = 'checkpoint' AND name = 'resume'")


def logged_rows(args: argparse.Namespace) -> tuple[dict[str, int], list[int]] | None:
    """The resumed run's rows per kind in the warehouse it logs to, local or the service's,
    and the `work` of its earlier resumes (`AdaptiveRun.resume`'s `logged`, `resumed_at`;
    None with --no-log), after refusing a warehouse that does not hold the run, or holds it
    ended or (a local one) still running."""
    run_id = checkpoint_run_id(args.resume)
    if args.no_log or run_id is None:
        return None  # (a checkpoint naming no run: resuming it says why)
    if args.log_to:
        return _service_rows(args, run_id)
    import warehouse

    root = warehouse.default_root(args.warehouse)

    def read(conn: Any) -> tuple[Any, dict[str, int], list[int]]:
        row = conn.execute("SELECT status, steps_taken FROM runs WHERE run_id = ?",
                           [run_id]).fetchone()
        resumed = conn.execute(RESUMED_AT.format(run="?"), [run_id]).fetchall()
        return row, {k: int(conn.execute(f"SELECT count(*) FROM {k} WHERE run_id = ?",
                                         [run_id]).fetchone()[0]) for k in KINDS.values()}, \
            [int(w) for (w,) in resumed if w is not None]

    row, counts, resumed_at = warehouse.with_retry(root, read) if root.is_dir() \
        else (None, {}, [])
    if row is None:
        raise ConfigError(f"run {run_id} is not in the warehouse {root}: resume it into the "
                          f"one it was logged to (--warehouse DIR), or with --no-log")
    status, steps = row
    if status in ("completed", "early_stopped"):
        raise ConfigError(_ended(args, run_id, status, steps))
    if status == "running":
        raise ConfigError(f"run {run_id} is still running (its writer is alive)")
    return counts, resumed_at


def _service_rows(args: argparse.Namespace, run_id: str) -> tuple[dict[str, int], list[int]]:
    """logged_rows through the service's SQL sandbox (which binds no parameters: the run id,
    read from our own checkpoint, is checked to be one of ours). A run the service reads as
    `running` is resumed: a client killed outright leaves it so under the server's lease."""
    from aicf_induct.cli.train import log_to_key
    from aicf_induct.runtime.remote_recorder import RemoteLogError
    from aicf_induct.runtime.remote_sql import remote_sql

    if not run_id.isalnum():
        raise ConfigError(f"the checkpoint names run {run_id!r}, which is no run id")
    where = f"WHERE run_id = '{run_id}'"
    counts = ", ".join(f"(SELECT count(*) FROM {k} {where})" for k in KINDS.values())
    resumed = f"(SELECT string_agg(work, ',') FROM ({RESUMED_AT.format(run=repr(run_id))}))"
    try:
        rows = remote_sql(args.log_to, log_to_key(args),
                          f"SELECT status, steps_taken, {resumed}, {counts} FROM runs {where}")
    except RemoteLogError as err:
        raise ConfigError(f"cannot read run {run_id} from the service: {err}") from None
    if not rows:
        raise ConfigError(f"run {run_id} is not in the warehouse of the service at "
                          f"{args.log_to}: resume it where it was logged (--log-to URL, or "
                          f"--warehouse DIR), or with --no-log")
    status, steps, resumed_at, *logged = rows[0]
    if status in ("completed", "early_stopped"):
        raise ConfigError(_ended(args, run_id, status, steps))
    return ({k: int(n) for k, n in zip(KINDS.values(), logged, strict=True)},
            [int(w) for w in (resumed_at or "").split(",") if w])


def _ended(args: argparse.Namespace, run_id: str, status: str, steps: int) -> str:
    """Why an ended run does not resume, and how it goes further when it left its final
    state (`adapt --fork`)."""
    why = f"run {run_id} already {status.replace('_', ' ')} at step {steps}"
    if disk.final_of(args.resume) is None:
        return why
    return f"{why}; --fork {args.resume} --steps N branches a new run from its final state"
