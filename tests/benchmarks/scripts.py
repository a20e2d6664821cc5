"""Running a benchmark script as its users do: `python benchmarks/NAME.py ARGS` in a fresh
process of this interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(name: str, *args: str, timeout: float = 600
               ) -> subprocess.CompletedProcess[str]:
    """benchmarks/`name` run with `args`; its exit status and output, text."""
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args],
                          capture_output=True, text=True, timeout=timeout)
