"""Fixtures of the CLI tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


@pytest.fixture
def returns(monkeypatch: pytest.MonkeyPatch) -> Callable[[type, str], list[Any]]:
    """`returns(cls, name)`: a list that receives every value `cls.name` returns while the
    test runs (the method itself still runs), e.g. the result a command printed."""
    def keep(cls: type, name: str) -> list[Any]:
        kept: list[Any] = []
        real = getattr(cls, name)

        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            kept.append(real(self, *args, **kwargs))
            return kept[-1]

        monkeypatch.setattr(cls, name, wrapped)
        return kept
    return keep
