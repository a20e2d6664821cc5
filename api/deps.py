"""Everything a route depends on, as `Annotated` aliases: settings, the warehouse, API keys.
The dependencies are coroutines: they do not block, and FastAPI would run a plain function
in its thread pool, a hop that costs more than the work on every request.

Keys come as `Authorization: Bearer <key>`. Write routes need a write key; read routes need a
read or write key when `read_requires_key` is set, and look at no key otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import duckdb
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.errors import ApiProblem
from api.settings import Settings
from warehouse.cached import CachedCatalog
from warehouse.keys import KeyStore
from warehouse.sandbox_pool import SandboxPool

T = TypeVar("T")


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


class Warehouse:
    """The served warehouse: `read(fn)` runs `fn` on a cursor of a kept read-only connection,
    rebuilt when parts change (`warehouse.cached`; retried if a compaction collects a part
    under it)."""

    def __init__(self, root: Path, sql_slots: int) -> None:
        self.root = root
        self.sql = SandboxPool(sql_slots)  # sandbox queries at once, each in a process
        self.catalog = CachedCatalog(root)

    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        return self.catalog.read(fn)


async def get_warehouse(request: Request) -> Warehouse:
    wh: Warehouse = request.app.state.warehouse
    return wh


WarehouseDep = Annotated[Warehouse, Depends(get_warehouse)]


async def get_keys(request: Request) -> KeyStore:
    keys: KeyStore = request.app.state.keys
    return keys


KeysDep = Annotated[KeyStore, Depends(get_keys)]

# Two names for one scheme, so the OpenAPI document says which key each route takes (and
# the app drops ReadKey from it when reads are open).
read_bearer = HTTPBearer(scheme_name="ReadKey", auto_error=False,
                         description="a read or write key (`aicf-induct keys create`)")
write_bearer = HTTPBearer(scheme_name="WriteKey", auto_error=False,
                          description="a write key (`aicf-induct keys create --scope write`)")
ReadCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(read_bearer)]
WriteCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(write_bearer)]


def _scope(keys: KeyStore, cred: HTTPAuthorizationCredentials | None) -> str:
    if cred is None:
        raise ApiProblem(401, "unauthorized", "this route needs an API key "
                                              "(Authorization: Bearer <key>)",
                         field="header.Authorization", headers={"WWW-Authenticate": "Bearer"})
    scope = keys.scope_of(cred.credentials)
    if scope is None:
        raise ApiProblem(401, "unauthorized", "unknown API key", field="header.Authorization",
                         headers={"WWW-Authenticate": "Bearer"})
    return scope


async def require_read(settings: SettingsDep, keys: KeysDep, cred: ReadCredentials) -> str | None:
    """The caller's scope on a read route; None when reads are open."""
    return _scope(keys, cred) if settings.read_requires_key else None


async def require_write(keys: KeysDep, cred: WriteCredentials) -> str:
    scope = _scope(keys, cred)
    if scope != "write":
        raise ApiProblem(403, "forbidden", "this route needs a write key; this key can only "
                                           "read", field="header.Authorization")
    return scope


ReadAccess = Annotated[str | None, Depends(require_read)]
WriteAccess = Annotated[str, Depends(require_write)]
