"""Writing a figure: whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure

from aicf_induct.atomic_file import atomic_write, unwritable
from aicf_induct.errors import ConfigError

FORMATS = ("png", "svg", "pdf")  # what -o may end in


def check_output(path: str | Path, option: str = "-o") -> str:
    """The image format `path` asks for; ConfigError naming `option` (and `path` as given)
    when it cannot be written (`atomic_file.unwritable`)."""
    text = os.fspath(path)
    why = unwritable(text)
    fmt = Path(text).suffix.lower().lstrip(".")
    if why is None and fmt not in FORMATS:
        why = f"the file must end in {', '.join('.' + f for f in FORMATS)}"
    if why:
        raise ConfigError(f"{option} {text}: {why}")
    return fmt


def save_figure(fig: Figure, path: str | Path, dpi: int = 120, option: str = "-o") -> Path:
    """Write `fig` to `path` (format from its suffix) through a temporary file renamed into
    place, so a failed write leaves no partial image. Errors name `path` as `option` gave
    it, never the temporary file."""
    fmt = check_output(path, option)
    path = Path(path)

    def write(tmp: Path) -> None:
        with tmp.open("wb") as f:
            fig.savefig(f, format=fmt, dpi=dpi, bbox_inches="tight")

    try:
        atomic_write(path, write, durable=False)
    except OSError as err:  # the folder took a probe file (check_output): the file or the disk
        raise ConfigError(f"{option} {path}: cannot write it ({err.strerror or err})") from None
    return path
