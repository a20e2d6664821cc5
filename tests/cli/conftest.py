"""Fixtures of the CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def log_fails_at_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warehouse whose disk fills during the run: every record is written, and closing
    the log (its last commit) raises the error a full disk gives."""
    from warehouse import WarehouseError, WarehouseRecorder

    real_close = WarehouseRecorder.close

    def full(self: WarehouseRecorder) -> None:
        real_close(self)
        raise WarehouseError(f"warehouse {self.root}: could not commit 2 part(s): "
                             "[Errno 28] No space left on device")

    monkeypatch.setattr(WarehouseRecorder, "close", full)
