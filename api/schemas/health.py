from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class WarehouseHealth(BaseModel):
    readable: bool = Field(description="the views could be built and queried")
    runs: int | None = None
    steps: int | None = None
    problems: int | None = None
    error: str | None = Field(default=None, description="why it is not readable")
    writable: bool = Field(default=True, description="the server can write into it (runs "
                                                     "logged through it are refused when not)")
    skipped_parts: list[str] = Field(
        default_factory=list, description="unreadable part files every read skips "
                                          "(`aicf-induct warehouse check --repair` quarantines "
                                          "them): `path: reason`")


class Health(BaseModel):
    status: Literal["ok", "degraded"] = Field(description="degraded: the warehouse is not "
                                                          "readable or not writable, or reads "
                                                          "skip damaged parts")
    version: str
    warehouse: WarehouseHealth
