"""`make demo`: the main job end to end, on the embedded defaults, in a few minutes on two cores.

1. the knowledge pack: the shipped one, or (a fresh clone without it) a small one built from a
   quick sweep with adaptive runs (`corpus build --adaptive`, then `induce fit`), the demo's
   problem left out;
2. the real service (`aicf-induct serve`) on a free local port, with a write key;
3. a proposal over HTTP for a problem the pack does not include: the request and the answer
   with its evidence;
4. adaptive training from that proposal, rewrites proposed by the learned rewrite proposer
   (`POST /v1/rewrites`), logged through the service: the timeline as it happens;
5. a report of what the run did, read back from the service;
6. the service stopped. Any failing step ends the demo with a non-zero status.

Everything is logged into one warehouse (./aicf_warehouse, or $AICF_WAREHOUSE).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aicf_induct.cli.background import HOST, ServiceDidNotStart, free_port, serve_args, serving
from aicf_induct.cli.main import main as cli

SEED = "1"
CANDIDATES = ("wine", "breast_cancer", "digits", "iris", "diabetes")  # the demo's problem:
# the first the pack does not include
QUICK_PROBLEMS = "iris,diabetes,breast_cancer,synthetic:moons?n=300&seed=1," \
                 "synthetic:circles?n=300&seed=2"
QUICK_SPACE = "depth=1,2;act=relu,tanh;width=16,64"
ADAPT = ["--steps", "400", "--trigger-warmup", "40", "--trigger-epochs", "5", "--eval-every",
         "20", "--guard-steps", "30", "--seed", SEED]
PLOT_FILE = "demo_adapt_run.png"  # in the working directory, like the warehouse


class DemoError(Exception):
    """A step failed; the message says which and why."""


def step(k: int, title: str) -> None:
    print(f"\n== {k}/6 {title}", flush=True)


def run_cli(args: list[str]) -> None:
    print(f"$ aicf-induct {shlex.join(args)}", flush=True)
    code = cli(args)
    if code:
        raise DemoError(f"`aicf-induct {shlex.join(args)}` failed with status {code}")


def knowledge_pack(root: Path) -> tuple[Path | None, str]:
    """The pack the demo uses (None: the shipped one) and the demo's problem."""
    from aicf_induct.induction.pack import DEFAULT_PACK, load_pack

    if DEFAULT_PACK.is_file():
        pack = load_pack()
        known = {p.split("?")[0] for p in pack.problems}
        name = next((c for c in CANDIDATES if c not in known), "synthetic:moons?n=400&seed=7")
        print(f"the shipped pack {DEFAULT_PACK}: {pack.header['problems']} problems × "
              f"{pack.header['candidates']} candidates; '{name}' is not among its problems")
        return None, name
    name = CANDIDATES[0]
    path = root.parent / f"{root.name}_demo_pack.parquet"  # beside the warehouse, not in it
    print(f"no shipped pack ({DEFAULT_PACK} is absent): a small one from a quick sweep, "
          f"'{name}' left out")
    run_cli(["corpus", "build", "--problems", QUICK_PROBLEMS, "--space", QUICK_SPACE,
             "--seeds", "2", "--epochs", "6", "--patience", "3", "--workers", "2",
             "--warehouse", str(root), "--adaptive", "3", "--adaptive-steps", "250", "--quiet"])
    run_cli(["induce", "fit", "--warehouse", str(root), "-o", str(path), "--min-problems", "2",
             "--bootstrap", "100", "--quiet"])
    return path, name


@contextlib.contextmanager
def service(root: Path, pack: Path | None) -> Iterator[str]:
    """`aicf-induct serve` on a free loopback port until the block ends; its URL."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    env = {"AICF_SERVICE_PACK": str(pack.resolve())} if pack is not None else {}  # its setting
    print(f"$ aicf-induct {shlex.join(serve_args(root, port))}  (in the background)")
    try:
        with serving(root, port=port, env=env) as served:
            print(f"service up at {url} (pid {served.proc.pid})")
            yield url
    except ServiceDidNotStart as err:
        raise DemoError(str(err)) from None
    finally:
        print(f"\nservice at {url} stopped")


def http(method: str, url: str, body: dict[str, Any] | None = None,
         key: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        try:
            return err.code, json.loads(err.read())
        except ValueError:
            return err.code, None
    except OSError as err:
        raise DemoError(f"{method} {url}: {err}") from None


def show_proposal(url: str, name: str) -> bool:
    """POST /v1/proposals, printed; False when the service has no proposals route."""
    body = {"dataset": name, "top": 3}
    print(f"> POST {url}/v1/proposals\n> {json.dumps(body)}")
    status, answer = http("POST", f"{url}/v1/proposals", body)
    if status == 404:
        print("< 404: this service has no /v1/proposals route; the run below asks the "
              "embedded proposer for its start")
        return False
    if status != 200 or not isinstance(answer, dict) or not answer.get("candidates"):
        raise DemoError(f"POST /v1/proposals answered {status}: {answer}")
    print(f"< 200 ({len(json.dumps(answer))} bytes; the candidates' IR left out here)")
    brief = {"dataset": answer.get("dataset"), "level": answer.get("level"),
             "candidates": [{k: c.get(k) for k in ("rank", "model", "recipe",
                                                   "expected_norm_error", "low", "high",
                                                   "on_neighbors", "rules")}
                            for c in answer["candidates"]],
             "neighbors": answer.get("neighbors"), "pack": answer.get("pack")}
    print("< " + json.dumps(brief, indent=1).replace("\n", "\n< "))
    return True


def show_rewrite_exchange(url: str, name: str) -> None:
    """One POST /v1/rewrites for the start of a small model on the problem, printed."""
    from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
    from aicf_induct.ir.canonical import to_dict
    from aicf_induct.problems import load_problem

    p = load_problem(name, seed=int(SEED))
    body = {"ir": to_dict(mlp_graph(parse_model_spec("mlp:depth=1,width=16"), p.n_features,
                                    p.n_outputs)),
            "trigger": "plateau", "dynamics": {"val_loss": [0.52, 0.50], "train_loss": 0.47},
            "problem": name, "top": 2}
    print(f"> POST {url}/v1/rewrites  (the IR of mlp:depth=1,width=16 at a plateau)")
    status, answer = http("POST", f"{url}/v1/rewrites", body)
    if status != 200 or not isinstance(answer, dict):
        raise DemoError(f"POST /v1/rewrites answered {status}: {answer}")
    top = answer["considered"][:3]
    print(f"< 200 decision '{answer['decision']}': {answer['reason']}")
    for r in top:
        print(f"<   {r['transform']:<10} at {r['site']:<18} uplift {r['expected_effect']:+.3f} "
              f"[{r['low']:+.3f}, {r['high']:+.3f}]  n={r['evidence']['n']}")
    print(f"<   history: {answer['history']} decisions ({answer['source']})")


def report(url: str) -> str:
    """What the last adaptive run did, read back from the service; its run id."""
    status, runs = http("GET", f"{url}/v1/runs?origin=adapt&limit=1")
    if status != 200 or not runs.get("items"):
        raise DemoError(f"GET /v1/runs answered {status}: {runs}")
    run = runs["items"][0]
    print(f"> GET {url}/v1/runs?origin=adapt&limit=1")
    print(f"< run {run['run_id']}: {run.get('problem_name')} {run.get('status')}, "
          f"{run.get('steps_taken')} steps")
    sql = ("SELECT kind, name, count(*) AS n FROM events WHERE run_id = '"
           f"{run['run_id']}' AND kind IN ('decision', 'rewrite', 'guard', 'rollback') "
           "GROUP BY ALL ORDER BY kind, name")
    print(f"> POST {url}/v1/sql  {sql}")
    status, rows = http("POST", f"{url}/v1/sql", {"sql": sql})
    if status != 200:
        raise DemoError(f"POST /v1/sql answered {status}: {rows}")
    for r in rows.get("rows", []):
        print(f"<   {r}")
    return str(run["run_id"])


def plots(run_id: str) -> None:
    """The adaptive run as an image: loss with its triggers, rewrites and rollbacks."""
    run_cli(["plot", "run", run_id, "-o", PLOT_FILE])


def main() -> int:
    import warehouse

    t0 = time.perf_counter()
    root = warehouse.default_root()
    try:
        step(1, "The knowledge pack")
        pack, name = knowledge_pack(root)
        step(2, "Start the service (real uvicorn, a free local port)")
        root.mkdir(parents=True, exist_ok=True)
        key = _write_key(root)
        with service(root, pack) as url:
            step(3, f"Ask the service for structures for '{name}' (not in the pack)")
            show_proposal(url, name)
            show_rewrite_exchange(url, name)
            step(4, "Adaptive training from the top proposal, rewrites from the learned "
                    "proposer, logged through the service")
            args = ["adapt", "--dataset", name, "--from-proposal", "--service", url,
                    "--api-key", key, *ADAPT]
            if pack is not None:
                args += ["--pack", str(pack)]
            print(f"$ aicf-induct {shlex.join(args).replace(key, 'KEY')}", flush=True)
            if cli(args):
                raise DemoError("the adaptive run failed")
            time.sleep(1.0)  # the service commits the last batch
            step(5, "Report, read back over HTTP")
            run_id = report(url)
            plots(run_id)
        step(6, "Done")
    except DemoError as err:
        print(f"demo failed: {err}", file=sys.stderr)
        return 1
    print(f"the whole loop in {time.perf_counter() - t0:.0f} s; explore: aicf-induct runs | "
          "aicf-induct report rewrite_effects | aicf-induct serve")
    return 0


def _write_key(root: Path) -> str:
    """A write key in the warehouse's key file (as `aicf-induct keys create` makes one)."""
    from warehouse.keys import create_key, default_path

    return create_key(default_path(root), "write")


if __name__ == "__main__":
    sys.exit(main())
