"""Service benchmark: proposal, read and SQL report latency, ingest throughput, each beside a
plain FastAPI endpoint of the same server as the floor.

    .venv/bin/python benchmarks/service_bench.py [--pack PACK] [--seconds 5] [--write-results]

The server is the real app (`api.app.create_app`, uvicorn, one worker, access log on as
`aicf-induct serve` runs it) on a free loopback port, in its own process, with two routes
added for the floor: `GET /hello` (answers `{"hello": "world"}`) and `POST /sink` (reads the
body, answers its size). It serves a warehouse holding a real corpus: the tiny corpus the
induction tests use (4 problems × 4 candidates × 2 seeds, a real sweep), packed by
`aicf-induct induce fit` into the pack the proposals rank from (or `--pack`).

Clients: asyncio, one keep-alive HTTP/1.1 connection each, each sending its next request
when the last answer has arrived; latency is from the request's first byte sent to the
answer's last byte read, after a warm-up. Client and server share this machine's cores.

1. Proposals for a known problem (`{"dataset": "wine", "top": 3}`) at 1 and 32 clients,
   beside `GET /hello`; and for meta-features given directly (1 client: ranked on every
   request).
2. Reads: `GET /v1/runs?limit=50`, `GET /v1/runs/{id}` (1 and 32 clients), a run's steps.
3. Reports: `GET /v1/reports/leaderboard` and a `POST /v1/sql` aggregate.
4. Ingest: step rows per second, JSON batches (`POST /v1/ingest/batches`) and Arrow IPC
   (`POST /v1/ingest/runs/{id}/steps`), each batch committed (written, fsynced) before its
   answer; beside `POST /sink` of the same bodies (the transfer alone).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from fastapi import Request  # at module level: the routes' annotations are resolved here

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import cpu_model, git_commit, publish

from aicf_induct.cli.background import free_port

REPO = Path(__file__).resolve().parents[1]
TINY_PROBLEMS = ("iris", "diabetes", "breast_cancer", "synthetic:moons?n=300&seed=1")
TINY_SPACE = "depth=1,2;act=relu,tanh;width=8"
KNOWN = {"dataset": "wine", "top": 3}


# -- the server ----------------------------------------------------------------------------------
def serve_app(port: int) -> None:
    """The benchmarked process: the service's app plus the floor's two plain routes."""
    import uvicorn
    from fastapi import FastAPI

    from api.app import create_app

    app: FastAPI = create_app()

    @app.get("/hello", include_in_schema=False)
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    @app.post("/sink", include_in_schema=False)
    async def sink(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="info")


def server_stack() -> str:
    """The event loop and HTTP parser uvicorn picks ("auto": uvloop and httptools when
    installed, as `uvicorn[standard]` installs them)."""
    parts = []
    for name, fallback in (("uvloop", "asyncio loop"), ("httptools", "h11 parser")):
        try:
            parts.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            parts.append(fallback)
    return ", ".join(parts)


@contextlib.contextmanager
def server(root: Path, pack: Path, log: Path) -> Iterator[int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "AICF_SERVICE_WAREHOUSE": str(root),
           "AICF_SERVICE_PACK": str(pack), "AICF_SERVICE_SQL_THREADS": "1",
           # the floor's /sink takes the ingest batches: the body limit of the ingest routes
           "AICF_SERVICE_MAX_BODY_BYTES": str(64 << 20)}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, __file__, "--serve-on", str(port)], env=env,
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited: {log.read_text()}")
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not start")
                time.sleep(0.2)
            yield port
        finally:
            proc.terminate()
            proc.wait(20)


# -- the client ----------------------------------------------------------------------------------
def raw_request(method: str, path: str, body: bytes = b"", kind: str = "application/json",
                key: str | None = None) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if key:
        head.append(f"Authorization: Bearer {key}")
    if method == "POST":
        head += [f"Content-Type: {kind}", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


_LENGTH = re.compile(rb"(?i)\r\ncontent-length: *(\d+)")


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   raw: bytes) -> tuple[int, bytes]:
    writer.write(raw)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    m = _LENGTH.search(head)
    assert m is not None, head
    return int(head[9:12]), await reader.readexactly(int(m.group(1)))


async def _client(port: int, raw: bytes, warm_until: float, stop_at: float,
                  out: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
    try:
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                return
            status, body = await exchange(reader, writer, raw)
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {body[:300]!r}")
            if t0 >= warm_until:
                out.append(time.perf_counter() - t0)
    finally:
        writer.close()


def latency(port: int, raw: bytes, clients: int, seconds: float,
            warmup: float = 1.0) -> dict[str, float]:
    """p50/p99 (ms) and answers per second of `clients` clients for `seconds`."""
    async def run() -> list[float]:
        out: list[float] = []
        now = time.perf_counter()
        await asyncio.gather(*[_client(port, raw, now + warmup, now + warmup + seconds, out)
                               for _ in range(clients)])
        return out

    times = np.array(asyncio.run(run())) * 1e3
    return {"p50": float(np.percentile(times, 50)), "p99": float(np.percentile(times, 99)),
            "rps": len(times) / seconds, "n": float(len(times))}


def send_all(port: int, requests: list[bytes]) -> float:
    """Send requests one after the other on one connection; seconds taken."""
    async def run() -> float:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
        t0 = time.perf_counter()
        for raw in requests:
            status, body = await exchange(reader, writer, raw)
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {body[:300]!r}")
        took = time.perf_counter() - t0
        writer.close()
        return took

    return asyncio.run(run())


def call(port: int, raw: bytes) -> Any:
    async def run() -> Any:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
        status, body = await exchange(reader, writer, raw)
        writer.close()
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {body[:300]!r}")
        return json.loads(body)

    return asyncio.run(run())


# -- setup ---------------------------------------------------------------------------------------
def cli(*argv: str) -> str:
    out = subprocess.run([sys.executable, "-m", "aicf_induct", *argv], cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"aicf-induct {' '.join(argv)}: {out.stderr}")
    return out.stdout


def build_corpus(root: Path, pack: Path | None) -> Path:
    """The tiny corpus (a real sweep) and, unless given, its pack."""
    cli("corpus", "build", "--problems", ",".join(TINY_PROBLEMS), "--space", TINY_SPACE,
        "--seeds", "2", "--epochs", "3", "--patience", "2", "--workers", "2",
        "--warehouse", str(root), "--quiet")
    if pack is not None:
        return pack
    out = root.parent / "pack.parquet"
    cli("induce", "fit", "--warehouse", str(root), "--min-problems", "2", "--bootstrap", "200",
        "--no-write", "--quiet", "-o", str(out))
    return out


def step_rows(run_id: str, start: int, n: int) -> dict[str, list[Any]]:
    steps = np.arange(start, start + n)
    rng = np.random.default_rng(start)
    return {"run_id": [run_id] * n, "step": steps.tolist(), "epoch": (steps // 100).tolist(),
            "loss": (rng.random(n) / (steps + 1)).tolist(), "grad_norm": rng.random(n).tolist(),
            "update_ratio": (rng.random(n) * 1e-3).tolist(), "lr": [1e-3] * n,
            "step_time_s": (rng.random(n) * 1e-3).tolist(), "batch_size": [64] * n}


def json_batch(batch_id: str, cols: dict[str, list[Any]]) -> bytes:
    names = list(cols)
    rows = [dict(zip(names, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]
    return json.dumps({"batch_id": batch_id, "steps": rows}).encode()


def arrow_batch(cols: dict[str, list[Any]]) -> bytes:
    t = pa.table({k: v for k, v in cols.items() if k != "run_id"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return bytes(sink.getvalue().to_pybytes())


# -- the measures --------------------------------------------------------------------------------
def bench_latency(port: int, root: Path, seconds: float) -> dict[str, dict[str, float]]:
    import warehouse

    conn = warehouse.connect(root)
    run_id = conn.execute("SELECT run_id FROM runs ORDER BY run_id LIMIT 1").fetchone()[0]
    conn.close()
    wine = call(port, raw_request("POST", "/v1/proposals", json.dumps(KNOWN).encode()))
    feats = _features()
    cases = {
        "hello": raw_request("GET", "/hello"),
        "proposal, known problem": raw_request("POST", "/v1/proposals",
                                               json.dumps(KNOWN).encode()),
        "proposal, meta-features": raw_request("POST", "/v1/proposals", json.dumps(
            {"features": feats, "top": 3}).encode()),
        "GET /v1/runs?limit=50": raw_request("GET", "/v1/runs?limit=50"),
        "GET /v1/runs/{id}": raw_request("GET", f"/v1/runs/{run_id}"),
        "GET /v1/runs/{id}/steps": raw_request("GET", f"/v1/runs/{run_id}/steps"),
        "report leaderboard": raw_request("GET", "/v1/reports/leaderboard"),
        "POST /v1/sql (aggregate)": raw_request("POST", "/v1/sql", json.dumps(
            {"sql": "SELECT problem_name, count(*), avg(wall_time_s) FROM runs "
                    "GROUP BY ALL ORDER BY ALL"}).encode()),
        "POST /v1/rewrites, 4,000-node IR": raw_request("POST", "/v1/rewrites", json.dumps(
            {"ir": chain_ir(4000), "features": {"simple.n_rows": 150},
             "task": "classification", "top": 10}).encode()),
    }
    assert len(wine["candidates"]) == 3
    plan = [("hello", 1), ("hello", 32), ("proposal, known problem", 1),
            ("proposal, known problem", 32), ("proposal, meta-features", 1),
            ("GET /v1/runs?limit=50", 1), ("GET /v1/runs/{id}", 1), ("GET /v1/runs/{id}", 32),
            ("GET /v1/runs/{id}/steps", 1), ("report leaderboard", 1),
            ("POST /v1/sql (aggregate)", 1), ("POST /v1/rewrites, 4,000-node IR", 1)]
    out = {}
    for name, clients in plan:
        r = latency(port, cases[name], clients, seconds)
        out[f"{name} @{clients}"] = r
        print(f"  {name} @{clients}: p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms, "
              f"{r['rps']:,.0f}/s", flush=True)
    return out


def chain_ir(n: int) -> dict[str, Any]:
    """A small MLP's IR with `n` relus chained after its activation: a large IR whose every
    relu is a rewrite site (finding the sites was quadratic in the graph's size)."""
    from aicf_induct.frontend.families import parse_spec, spec_graph
    from aicf_induct.ir.canonical import to_dict

    d = to_dict(spec_graph(parse_spec("mlp:depth=1,width=4"), 4, 3))
    nodes = d["nodes"]
    at = next(i for i, node in enumerate(nodes) if node["op"] == "relu")
    first = nodes[at]["id"]
    chain = [{**nodes[at], "id": f"r{k}", "inputs": [f"r{k - 1}" if k else first]}
             for k in range(n)]
    for node in nodes[at + 1:]:
        node["inputs"] = [f"r{n - 1}" if i == first else i for i in node["inputs"]]
    return {**d, "nodes": nodes[:at + 1] + chain + nodes[at + 1:]}


def _features() -> dict[str, float]:
    from aicf_induct.induction.proposals import featurise

    return featurise("wine")[1]


def bench_ingest(port: int, key: str, rows: int, batch: int) -> dict[str, float]:
    run = {"run_id": "bench-ingest", "problem_id": "p", "problem_name": "bench",
           "task": "regression", "config": {}, "seed": 0, "device": "cpu",
           "library_versions": {}, "origin": "api"}
    call(port, raw_request("POST", "/v1/ingest/runs", json.dumps(
        {"batch_id": "bench-run", "run": run}).encode(), key=key))
    out: dict[str, float] = {}
    for fmt in ("json", "arrow"):
        bodies = []
        for i, start in enumerate(range(0, rows, batch)):
            cols = step_rows(run["run_id"], start + (0 if fmt == "json" else rows), batch)
            if fmt == "json":
                bodies.append(("/v1/ingest/batches", json_batch(f"j{i}", cols),
                               "application/json"))
            else:
                bodies.append((f"/v1/ingest/runs/{run['run_id']}/steps?batch_id=a{i}",
                               arrow_batch(cols), "application/vnd.apache.arrow.stream"))
        took = send_all(port, [raw_request("POST", p, b, k, key) for p, b, k in bodies])
        floor = send_all(port, [raw_request("POST", "/sink", b, k) for _, b, k in bodies])
        size = sum(len(b) for _, b, _ in bodies)
        out[f"{fmt}_rows_per_s"] = rows / took
        out[f"{fmt}_sink_rows_per_s"] = rows / floor
        out[f"{fmt}_mb"] = size / 1e6
        print(f"  ingest {fmt}: {rows / took:,.0f} step rows/s ({size / 1e6:.0f} MB in "
              f"{took:.2f} s); /sink of the same bodies {rows / floor:,.0f} rows/s", flush=True)
    return out


# -- the report ----------------------------------------------------------------------------------
def results_section(lat: dict[str, dict[str, float]], ing: dict[str, float],
                    args: argparse.Namespace, load: tuple[float, float], pack: str) -> str:
    import duckdb
    import fastapi
    import uvicorn

    ok = lambda good: "yes" if good else "**no**"  # noqa: E731
    lines = [
        "## Service", "",
        f"Measured {dt.date.today().isoformat()} on {cpu_model()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, FastAPI {fastapi.__version__}, uvicorn "
        f"{uvicorn.__version__} (one worker, access log on, {server_stack()}), DuckDB "
        f"{duckdb.__version__} "
        f"(commit {git_commit()}); 1-minute load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end (other engineers' jobs share the cores). Client and server "
        "on the same machine. One run of:", "",
        "```", " ".join([".venv/bin/python", "benchmarks/service_bench.py", *sys.argv[1:]]),
        "```", "",
        f"Warehouse: the tiny corpus (4 problems × 4 candidates × 2 seeds, 32 sweep runs); "
        f"pack: {pack}. Latency in ms from the request's first byte to the answer's last "
        f"({args.seconds:g} s per line after 1 s of warm-up, keep-alive connections); the "
        "floor is `GET /hello` of the same server.", "",
        "| request | clients | p50 (ms) | p99 (ms) | answers/s | floor p50 / p99 (ms) | goal "
        "| met |", "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in lat.items():
        what, _, clients = name.rpartition(" @")
        floor = lat.get(f"hello @{clients}") or lat["hello @1"]
        goal, met = "", ""
        if what == "proposal, known problem":
            goal, met = "p50 ≤ 10, p99 ≤ 50", ok(r["p50"] <= 10 and r["p99"] <= 50)
        elif what.startswith("GET /v1/runs") and clients == "1":
            goal, met = "p50 ≤ 10", ok(r["p50"] <= 10)
        lines.append(f"| {what} | {clients} | {r['p50']:.2f} | {r['p99']:.2f} | "
                     f"{r['rps']:,.0f} | {floor['p50']:.2f} / {floor['p99']:.2f} | {goal} | "
                     f"{met} |")
    lines += [
        "", f"Ingest, one client, {args.ingest_rows:,} step rows in batches of "
        f"{args.batch:,} (each written as a Parquet part and fsynced before its answer); the "
        "floor posts the same bodies to `POST /sink`, which reads and drops them:", "",
        "| format | step rows/s | body (MB) | floor: /sink rows/s | goal | met |",
        "|---|---|---|---|---|---|",
        f"| JSON batches | {ing['json_rows_per_s']:,.0f} | {ing['json_mb']:.0f} | "
        f"{ing['json_sink_rows_per_s']:,.0f} | ≥ 100,000 | "
        f"{ok(ing['json_rows_per_s'] >= 1e5)} |",
        f"| Arrow IPC | {ing['arrow_rows_per_s']:,.0f} | {ing['arrow_mb']:.0f} | "
        f"{ing['arrow_sink_rows_per_s']:,.0f} | ≥ 1,000,000 | "
        f"{ok(ing['arrow_rows_per_s'] >= 1e6)} |",
        "",
        *notes(lat, ing),
    ]
    return "\n".join(lines) + "\n"


def notes(lat: dict[str, dict[str, float]], ing: dict[str, float]) -> list[str]:
    """How to read the figures (what bounds each), from the figures."""
    h1, h32 = lat["hello @1"], lat["hello @32"]
    k1, k32 = lat["proposal, known problem @1"], lat["proposal, known problem @32"]
    return [
        f"A proposal for a known problem is served from memory: "
        f"{max(k1['p50'] - h1['p50'], 0.0):.2f} ms over the floor at 1 client. At 32 clients "
        f"the floor itself answers in {h32['p50']:.1f} ms p50 (proposals {k32['p50']:.1f} "
        f"ms): one uvicorn worker, sharing the 2 cores with the clients, answers "
        f"~{h32['rps']:,.0f} plain requests/s, so each of 32 clients waits "
        f"~32/{h32['rps']:,.0f} s per answer (Little's law); a p50 of 10 ms at 32 clients "
        f"needs 3,200 answers/s, which this floor "
        f"{'reaches' if h32['rps'] >= 3200 else 'does not reach'}. The server runs on "
        f"{server_stack()}: with asyncio's loop and h11 (uvicorn without its `standard` "
        "extras) the floor answered ~2,600 requests/s and proposals at 32 clients took "
        "17 ms p50 (measured 2026-11-23 on the 2-core development VM, not by this run). "
        "Proposals for meta-features and uploads rank on every request (the "
        "meta-model over every candidate: `propose_features`).",
        "",
        "Reads run DuckDB queries over in-memory copies of the tables (`warehouse/cached.py`); "
        "before, each read opened a fresh connection that listed every part and read the "
        "files (65-115 ms p50 on the test warehouse, measured 2026-11-23, not by this run). "
        "The views whose queries cost more than their result (`runs`: a window over the "
        "end rows and a join) are kept as tables too, computed again when what they read "
        "changes, and a page comes with its total in one query; before both (2026-11-29, "
        "the same VM, not by this run) a page of runs took 10.3 ms p50 and one of steps "
        "10.0 ms. What is left is DuckDB's own time for a query on the 2 cores. "
        "`POST /v1/sql` opens a fresh sandboxed connection per query "
        "(`warehouse/sandbox.py`: views over the parts listed again), most of its time, in "
        "a worker process of the server's (`warehouse/sandbox_pool.py`, so that a query "
        "past its time limit can be killed): a pipe's round trip more.",
        "",
        f"`POST /v1/rewrites` with a 4,000-node IR (a chain of relus, each a rewrite site; "
        f"315 kB): {lat['POST /v1/rewrites, 4,000-node IR @1']['p50']:,.0f} ms p50, the IR "
        "parsed and validated, every transform's sites found and ranked; it took 24 s when "
        "each site inferred the whole graph's types again (the thirty-fourth sitting's audit).",
        "",
        f"Ingest: a JSON batch is parsed, checked value by value and converted in Python "
        f"({ing['json_mb']:.0f} MB of JSON for the rows here), which bounds it; an Arrow IPC "
        "batch is cast and written as it comes, "
        "the Parquet write (zstd) and its fsync being most of the time.",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--pack", type=Path, default=None,
                    help="knowledge pack to propose from (default: one built from the corpus)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per line")
    ap.add_argument("--ingest-rows", type=int, default=500_000, help="step rows per format")
    ap.add_argument("--batch", type=int, default=50_000, help="step rows per ingest batch")
    ap.add_argument("--write-results", action="store_true",
                    help="replace the '## Service' section of benchmarks/RESULTS.md")
    ap.add_argument("--serve-on", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_on is not None:
        serve_app(args.serve_on)
        return
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="aicf-service-bench-") as td:
        root = Path(td) / "wh"
        print("building the corpus and its pack ...", flush=True)
        pack = build_corpus(root, args.pack)
        key = cli("keys", "create", "--scope", "write", "--warehouse", str(root)).strip()
        with server(root, pack, Path(td) / "server.log") as port:
            lat = bench_latency(port, root, args.seconds)
            ing = bench_ingest(port, key, args.ingest_rows, args.batch)
    load = (load_before, os.getloadavg()[0])
    text = results_section(lat, ing, args, load, "given" if args.pack else
                           "built from it by `aicf-induct induce fit`")
    publish(text, args.write_results)


if __name__ == "__main__":
    main()
