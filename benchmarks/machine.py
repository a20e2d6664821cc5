"""What every benchmark records about where and on what it ran, and how it writes its own
section of RESULTS.md. Imported by the benchmark scripts (run as `python benchmarks/X.py`,
which puts this folder on sys.path)."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def git_commit(tree: Path | None = None) -> str:
    """The short hash of HEAD of `tree` (default: this checkout), or "unknown" outside one."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True,
                              cwd=tree or Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_section(text: str, path: Path = RESULTS) -> None:
    """Replace the section of RESULTS.md whose heading is `text`'s first line (append it if
    absent); other sections belong to other benchmarks."""
    heading = text.splitlines()[0]
    content = path.read_text() if path.exists() else "# Benchmark results\n"
    lines = content.splitlines()
    try:
        start = lines.index(heading)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        lines[start:end] = [*text.rstrip("\n").splitlines(), ""]
    except ValueError:
        lines += ["", *text.rstrip("\n").splitlines()]
    path.write_text("\n".join(lines).rstrip("\n") + "\n")


def publish(text: str, write_results: bool) -> None:
    """A benchmark's report: printed, and with `--write-results` its section of RESULTS.md
    replaced."""
    print(text)
    if write_results:
        write_section(text)
