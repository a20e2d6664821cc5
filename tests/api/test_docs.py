"""docs/service.md's examples (and those of the README's service section) are tested: every
`$ curl ...` line in their console blocks is parsed and sent (as the equivalent httpx request)
to the live server, and the answer must have the documented status and the documented
fields."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import REPO, Server, cli, serve

DOC = REPO / "docs" / "service.md"
README = REPO / "README.md"  # its service section has examples too
DOC_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Example:
    command: str
    status: int
    body: Any  # the documented JSON


def examples(path: Path = DOC) -> list[Example]:
    blocks = re.findall(r"```console\n(.*?)```", path.read_text(), flags=re.S)
    out = []
    for block in blocks:
        for chunk in re.split(r"^(?=\$ )", block, flags=re.M):
            if not chunk.startswith("$ curl"):
                continue
            command, _, answer = chunk[2:].partition("\n")
            status = 200
            if answer.startswith("HTTP/1.1 "):
                status = int(answer.split()[1])
                answer = answer.split("\n\n", 1)[1]  # past the headers shown
            out.append(Example(command, status, json.loads(answer)))
    return out


def to_request(command: str, base: str, env: dict[str, str]) -> httpx.Request:
    """The httpx request a curl command line sends (the options the doc uses)."""
    for name, value in env.items():
        command = command.replace(f"${name}", value)
    args = shlex.split(command)
    assert args[0] == "curl"
    method, headers, data, url = None, {}, None, None
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, bytes]] = {}
    it = iter(args[1:])
    for a in it:
        if a in ("-s", "-i"):
            continue
        if a == "-X":
            method = next(it)
        elif a == "-H":
            k, _, v = next(it).partition(":")
            headers[k.strip()] = v.strip()
        elif a == "-d":
            data = next(it).encode()
        elif a == "-F":  # multipart: name=value, or name=@path (from the repository root)
            k, _, v = next(it).partition("=")
            if v.startswith("@"):
                files[k] = (Path(v[1:]).name, (REPO / v[1:]).read_bytes())
            else:
                fields[k] = v
        elif a.startswith("http"):
            url = a.replace(DOC_URL, base)
        else:
            raise AssertionError(f"curl option {a!r} not understood by this test")
    assert url is not None, command
    if files or fields:
        return httpx.Request(method or "POST", url, headers=headers, files=files or None,
                             data=fields)
    return httpx.Request(method or ("POST" if data is not None else "GET"), url,
                         headers=headers, content=data)


def same_shape(doc: Any, real: Any, top: bool = True) -> None:
    """Every documented field is there (at the top level: exactly those), nested alike."""
    if isinstance(doc, dict):
        assert isinstance(real, dict), real
        if top:
            assert set(doc) == set(real), (set(doc) ^ set(real))
        else:
            assert set(doc) <= set(real), set(doc) - set(real)
        for k, v in doc.items():
            same_shape(v, real[k], top=False)
    elif isinstance(doc, list) and doc and isinstance(doc[0], dict):
        assert isinstance(real, list) and real, real
        same_shape(doc[0], real[0], top)


def _iris_ir() -> str:
    """The IR the /v1/rewrites example sends: mlp:depth=1,width=4 for iris."""
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.ir.canonical import to_json

    return to_json(mlp_graph(parse_model_spec("mlp:depth=1,width=4"), 4, 3))


def test_the_doc_has_examples_for_every_route() -> None:
    text = " ".join(e.command for e in examples())
    for route in ("/v1/health", "/v1/runs?", "/v1/runs/$RUN_ID", "/steps", "/v1/reports ",
                  "/v1/reports/leaderboard", "/v1/sql", "/v1/ingest/runs ", "/v1/ingest/batches",
                  "/end ", "/v1/proposals -d", "/v1/proposals -F", "/v1/proposals/features",
                  "/v1/rewrites"):
        assert route in text + " ", route


@pytest.fixture(scope="module")
def ingest_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The ingest examples write: they get a server of their own, on an empty warehouse."""
    root = tmp_path_factory.mktemp("doc-ingest") / "wh"
    write_key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
    read_key = cli("keys", "create", "--scope", "read", "--warehouse", str(root)).strip()
    with serve(root) as url:
        yield Server(url, root, {}, write_key, read_key)


def _ingest(example: Example) -> bool:
    return "/v1/ingest/" in example.command


def _send(server: Server, example: Example) -> None:
    iris = next((r for r, v in server.runs.items() if v["dataset"] == "iris"), "")
    req = to_request(example.command, server.url,
                     {"RUN_ID": iris, "WRITE_KEY": server.write_key, "KEY": server.read_key,
                      "IR": _iris_ir().replace('"', '\\"')})  # inside "..." in the shell
    with httpx.Client(timeout=30) as client:
        r = client.send(req)
    assert r.status_code == example.status, (example.command, r.text)
    real = r.json()
    same_shape(example.body, real)
    if "written" in example.body:  # a retried ingest batch is not written again
        assert real["written"] == example.body["written"]
    if example.status >= 400:
        assert r.headers["content-type"] == "application/problem+json"
        for k in ("type", "status", "field"):
            assert real[k] == example.body[k]


@pytest.mark.parametrize("example", [e for e in examples() + examples(README) if not _ingest(e)],
                         ids=lambda e: e.command[8:70])
def test_doc_example(server: Server, example: Example) -> None:
    _send(server, example)


def test_doc_ingest_session(ingest_server: Server) -> None:
    """The ingest examples are one session (a run is started, logged to, retried, ended): in
    one test, in the doc's order, so test workers never split it (the README has none)."""
    session = [e for e in examples() + examples(README) if _ingest(e)]
    assert len(session) >= 4, "the service doc lost its ingest examples"
    for example in session:
        _send(ingest_server, example)
