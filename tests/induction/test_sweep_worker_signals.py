"""A sweep worker's signal protocol, in a real child process: the first SIGTERM interrupts
its run, and later ones (the process pool's manager terminates every worker again once
one has exited) do not kill it while it logs the run's end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A stand-in for run_local_task: a run in flight, then an end that takes a while to log
WORKER = """
import os, sys, time
from aicf_induct.induction import sweep_worker as w
w.init_local_worker(os.getppid())
w._IN_RUN = True
try:  # "running" inside: a SIGTERM right after it (a loaded machine) must be caught too
    print("running", flush=True)
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    time.sleep(1.0)  # logging and flushing the run's end
    print("end logged", flush=True)
"""


def test_second_sigterm_does_not_kill_a_worker_logging_its_end() -> None:
    proc = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running"
    proc.send_signal(signal.SIGTERM)  # the sweep's Ctrl-C handling
    assert proc.stdout.readline().strip() == "interrupted"
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # the pool's manager, after another worker exited
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip() == "end logged", (proc.returncode, out)
