"""Writing a figure: whole or not at all."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from aicf_induct.atomic_file import atomic_write
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
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a directory")
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
    except OSError as err:
        raise ConfigError(f"{option} {path}: cannot write in the folder {path.parent} "
                          f"({err.strerror or err})") from None
    return path
