"""Writing a figure: whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure

from aicf_induct.errors import ConfigError

FORMATS = ("png", "svg", "pdf")  # what -o may end in


def check_output(path: str | Path, option: str = "-o") -> str:
    """The image format `path` asks for; ConfigError naming `option` when it cannot be
    written."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ConfigError(f"{option} {path}: the file must end in "
                          f"{', '.join('.' + f for f in FORMATS)}")
    if not path.parent.is_dir():
        raise ConfigError(f"{option} {path}: the folder {path.parent} does not exist")
    return fmt


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Write `fig` to `path` (format from its suffix) through a temporary file renamed into
    place, so a failed write leaves no partial image."""
    fmt = check_output(path)
    path = Path(path)
    # created with open(), not mkstemp: the image gets the umask's mode, as any file would
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            fig.savefig(f, format=fmt, dpi=dpi, bbox_inches="tight")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
