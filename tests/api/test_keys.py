"""API keys: made by `aicf-induct keys create`, stored hashed, checked per scope; read routes
closed by `serve --read-requires-key`; a write route refuses read keys. And the catch-all:
an unexpected error is a generic 500 problem, never a stack trace."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import httpx
import pytest

from aicf_induct.cli.main import main
from api.app import create_app
from api.deps import WriteAccess
from api.settings import Settings
from tests.api.conftest import REPO, Server, cli, serve, serve_in_thread
from tests.api.test_service import problem
from warehouse.keys import (
    KEYS_FILE,
    KeyStore,
    create_key,
    digest,
    id_of,
    list_keys,
    revoke_key,
)


def test_keys_are_stored_hashed(tmp_path: Path) -> None:
    keys = [cli("keys", "create", "--scope", s, "--warehouse", str(tmp_path)).strip()
            for s in ("write", "read", "read")]
    assert len(set(keys)) == 3 and all(k.startswith("aicf_") and len(k) > 40 for k in keys)
    path = tmp_path / KEYS_FILE
    text = path.read_text()
    assert not any(k in text for k in keys)
    stored = json.loads(text)["keys"]
    assert [e["sha256"] for e in stored] == [digest(k) for k in keys]
    assert path.stat().st_mode & 0o077 == 0  # owner only
    store = KeyStore(path)
    assert [store.scope_of(k) for k in keys] == ["write", "read", "read"]
    assert store.scope_of(keys[0] + "x") is None and store.scope_of("") is None
    assert store.scope_of(stored[0]["sha256"]) is None  # the hash itself is no key


def test_keys_are_listed_by_id_and_revoked_by_id(tmp_path: Path, capsys) -> None:
    path = tmp_path / KEYS_FILE
    keys = [create_key(path, s) for s in ("write", "read")]
    listed = list_keys(path)
    assert [k["scope"] for k in listed] == ["write", "read"]
    assert [k["id"] for k in listed] == [id_of(path, k) for k in keys]
    assert all(set(k) == {"id", "scope", "created_at"} for k in listed)  # never the hash
    table = cli("keys", "list", "--warehouse", str(tmp_path))
    assert table.splitlines()[0].split() == ["id", "scope", "created"]
    assert all(k["id"] in table for k in listed)
    assert revoke_key(path, listed[0]["id"]) == listed[0]
    assert list_keys(path) == listed[1:] and KeyStore(path).scope_of(keys[0]) is None
    assert KeyStore(path).scope_of(keys[1]) == "read"
    # an unknown id: one line naming the ids there are; the file as it was
    before = path.read_bytes()
    assert main(["keys", "revoke", "nope", "--warehouse", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: no key with id 'nope' in {path} (ids: {listed[1]['id']})")
    assert path.read_bytes() == before
    # no key file: said, and nothing made
    assert main(["keys", "revoke", "x", "--warehouse", str(tmp_path / "none")]) == 2
    assert "no key file at" in capsys.readouterr().err and not (tmp_path / "none").exists()
    assert cli("keys", "list", "--warehouse", str(tmp_path / "none")).startswith("no keys in ")


def test_keys_create_refuses_a_bad_scope(tmp_path: Path, capsys) -> None:
    assert main(["keys", "create", "--scope", "admin", "--warehouse", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument --scope: invalid choice: 'admin'")
    assert err.count("\n") == 1
    assert not (tmp_path / KEYS_FILE).exists()


@pytest.mark.parametrize("argv", [["--port", "70000"], ["--workers", "0"]])
def test_serve_refuses_bad_options(tmp_path: Path, capsys, argv: list[str]) -> None:
    assert main(["serve", "--warehouse", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {argv[0]}") and err.count("\n") == 1


def test_read_routes_closed_by_option(server: Server) -> None:
    with serve(server.root, "--read-requires-key") as url:
        server = Server(url, server.root, server.runs, server.write_key, server.read_key)
        for path in ("/v1/runs", "/v1/reports", "/v1/reports/leaderboard"):
            r = server.client().get(path)
            problem(r, 401, "header.Authorization")
            assert r.headers["www-authenticate"] == "Bearer"
            problem(server.client("aicf_wrong").get(path), 401, "header.Authorization")
            assert server.client(server.read_key).get(path).status_code == 200
            assert server.client(server.write_key).get(path).status_code == 200
        problem(server.client().post("/v1/sql", json={"sql": "SELECT 1"}), 401)
        assert server.client(server.read_key).post(
            "/v1/sql", json={"sql": "SELECT 1"}).status_code == 200
        assert server.client().get("/v1/health").status_code == 200  # always open
        doc = server.client().get("/openapi.json").json()  # the document says so too
        assert doc["paths"]["/v1/runs"]["get"]["security"] == [{"ReadKey": []}]
        assert "security" not in doc["paths"]["/v1/health"]["get"]


# what stays open with --read-requires-key: the API's description and the pages' scripts,
# no warehouse data (docs/service.md, Keys, says so)
OPEN = ("/docs", "/openapi.json", "/docs-static/swagger-ui-bundle.js", "/assets/plotly.min.js")


def test_docs_and_static_assets_stay_open_as_documented(server: Server) -> None:
    keys = (REPO / "docs" / "service.md").read_text().split("## Keys", 1)[1].split("\n## ")[0]
    for path in ("/docs", "/openapi.json", "/docs-static/", "/assets/plotly.min.js"):
        assert f"`{path}" in keys, path
    with serve(server.root, "--read-requires-key") as url, httpx.Client(base_url=url) as c:
        for path in OPEN:
            assert c.get(path).status_code == 200, path
        assert c.get("/").status_code == 401  # the dashboard's pages hold data: closed


def _app(root: Path) -> contextlib.AbstractContextManager[httpx.Client]:
    """The real app plus two probe routes."""
    app = create_app(Settings(warehouse=root))

    @app.post("/v1/probe-write")
    def probe(scope: WriteAccess) -> dict[str, str]:
        return {"scope": scope}

    @app.get("/v1/probe-crash")
    def crash() -> None:
        raise RuntimeError("secret internals /etc/shadow")

    return serve_in_thread(app)


def test_write_routes_need_a_write_key(tmp_path: Path) -> None:
    write = cli("keys", "create", "--scope", "write", "--warehouse", str(tmp_path)).strip()
    read = cli("keys", "create", "--scope", "read", "--warehouse", str(tmp_path)).strip()
    with _app(tmp_path) as c:
        _write_scope(c, write, read, tmp_path)


def _write_scope(c: httpx.Client, write: str, read: str, tmp_path: Path) -> None:
    problem(c.post("/v1/probe-write"), 401, "header.Authorization")
    problem(c.post("/v1/probe-write", headers={"Authorization": f"Bearer {read}"}), 403,
            "header.Authorization")
    r = c.post("/v1/probe-write", headers={"Authorization": f"Bearer {write}"})
    assert r.json() == {"scope": "write"}
    # a key made while the server runs works at once
    late = cli("keys", "create", "--scope", "write", "--warehouse", str(tmp_path)).strip()
    assert c.post("/v1/probe-write", headers={"Authorization": f"Bearer {late}"}).json() == {
        "scope": "write"}
    # and one revoked while it runs is refused at once, the others still work
    listed = json.loads(cli("keys", "list", "--json", "--warehouse", str(tmp_path)))
    late_id = id_of(tmp_path / KEYS_FILE, late)
    assert [k["id"] for k in listed][-1] == late_id
    assert cli("keys", "revoke", str(late_id), "--warehouse", str(tmp_path)).startswith(
        f"revoked write key {late_id} (created ")
    problem(c.post("/v1/probe-write", headers={"Authorization": f"Bearer {late}"}), 401,
            "header.Authorization")
    assert c.post("/v1/probe-write", headers={"Authorization": f"Bearer {write}"}).json() == {
        "scope": "write"}


def test_unexpected_errors_are_a_generic_500(tmp_path: Path, caplog) -> None:
    with _app(tmp_path) as c:
        r = c.get("/v1/probe-crash")
    body = problem(r, 500)
    assert body["type"].endswith("internal")
    assert "secret" not in r.text and "RuntimeError" not in r.text
    assert "secret internals" in caplog.text  # logged server-side


@pytest.mark.parametrize("case", ["parent missing", "not a warehouse"])
def test_a_key_is_not_stored_in_a_warehouse_path_that_is_not_one(tmp_path: Path,
                                                                 case: str) -> None:
    """`keys create --warehouse` with a typo made the directories and stored the key in
    them, where the server never looks: refused as `serve` refuses the path, nothing made."""
    root = tmp_path / "typo" / "wh" if case == "parent missing" else tmp_path / "src"
    if case == "not a warehouse":
        root.mkdir()
        (root / "notes.txt").write_text("not a warehouse")
    before = sorted(tmp_path.rglob("*"))
    assert main(["keys", "create", "--scope", "read", "--warehouse", str(root)]) == 2
    assert sorted(tmp_path.rglob("*")) == before
    assert main(["keys", "create", "--scope", "read", "--warehouse",
                 str(tmp_path / "fresh")]) == 0  # a warehouse not made yet: as before
