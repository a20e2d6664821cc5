"""The warehouse's user-facing error."""

from __future__ import annotations

from aicf_induct.errors import AicfError


class WarehouseError(AicfError):
    """A warehouse problem a user can cause or fix: bad SQL, unknown report, a refused write,
    an unreadable part. The CLI prints it as one line."""
