"""For tests that press Ctrl-C on a child process.

A job started in the background by a non-interactive shell (a CI runner's, `cmd &`) inherits
SIGINT *ignored*, and Python then keeps ignoring it: a SIGINT sent to such a child does
nothing, and the test would measure its harness instead of the program. Children that a
test interrupts start with SIGINT at its default, as in a terminal.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """`preexec_fn` for subprocess.Popen: SIGINT back to its default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
