"""The service's settings: environment variables `AICF_SERVICE_<NAME>` (e.g.
`AICF_SERVICE_WAREHOUSE=/data/wh`), each default stated and explained here."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from aicf_induct.induction.pack_location import DEFAULT_PACK
from warehouse.catalog import default_root
from warehouse.keys import default_path
from warehouse.sandbox import Limits


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AICF_SERVICE_", frozen=True)

    # The warehouse served: $AICF_WAREHOUSE, else ./aicf_warehouse (as for the CLI).
    warehouse: Path = Field(default_factory=default_root)
    # Where `aicf-induct serve` binds: loopback only unless told, the port uvicorn's usual.
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    # Say at start that a warehouse not made yet is served empty (each process building the
    # app); `aicf-induct serve` says it once itself and sets this false for its workers.
    note_empty_warehouse: bool = True
    # Key file (hashed keys); None: <warehouse>/_service_keys.json.
    keys_file: Path | None = None
    # Read routes (runs, reports, SQL) open to anyone who can reach the port (False), or only
    # to read or write keys (True). Write routes always need a write key.
    read_requires_key: bool = False
    # Request bodies larger than this are refused with 413, counted as they arrive.
    max_body_bytes: int = Field(default=1 << 20, ge=1)
    # ... except on the ingest routes, whose batches are larger (10^5 step rows as JSON).
    max_ingest_bytes: int = Field(default=64 << 20, ge=1)
    # SQL sandbox: wall time per query, rows and result bytes at most (more: 422, not
    # truncated), DuckDB memory and threads per query, and queries at once (more: 429).
    sql_time_limit_s: float = Field(default=5.0, gt=0)
    sql_max_rows: int = Field(default=10_000, ge=1)
    sql_max_bytes: int = Field(default=16 << 20, ge=1)
    sql_memory_limit: str = Field(default="512MB", pattern=r"(?i)^\d+(\.\d+)?\s*[KMGT]i?B$")
    sql_threads: int = Field(default=1, ge=1)
    sql_concurrency: int = Field(default=2, ge=1)
    # Proposals: the knowledge pack they rank from (loaded once per worker, on first use), the
    # uploads (CSV/Parquet) it featurises, at most this large, and how many proposals that
    # need work (featurising a dataset, an upload, ranking) run at once (more wait a second,
    # then 429); answers for known problems are cached and need no slot, nor does a request
    # waiting for another's featurisation of its problem.
    pack: Path = DEFAULT_PACK
    max_upload_bytes: int = Field(default=64 << 20, ge=1)
    # ... and cells (rows × columns) of a Parquet upload, which compression makes
    # small: what a CSV of max_upload_bytes can hold at most ("1," a cell)
    max_upload_cells: int = Field(default=32 << 20, ge=1)
    proposal_concurrency: int = Field(default=2, ge=1)

    def key_path(self) -> Path:
        return self.keys_file or default_path(self.warehouse)

    def sql_limits(self) -> Limits:
        return Limits(time_limit_s=self.sql_time_limit_s, max_rows=self.sql_max_rows,
                      max_bytes=self.sql_max_bytes, memory_limit=self.sql_memory_limit,
                      threads=self.sql_threads)
