"""The figures of `benchmarks/ftt_vs_torch.py` as one JSON document, and the RESULTS.md
section drawn from it: the paired comparison of test scores over seeds and the step times.
Several documents (one per command on the GPU machine, say) merge into one section."""

from __future__ import annotations

import math
from datetime import date
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError

R2_FLOOR = 0.002  # the smallest tolerance on R²: differences below it are not resolved
HEADING = "## FT-Transformer against PyTorch on the {} (`benchmarks/ftt_vs_torch.py`)"
INIT_TEXT = {"shared": "PyTorch starts from the runtime's weights and batch order for the seed",
             "torch": "PyTorch draws its own weights and batch order from the seed"}
SAME = ("device", "model", "recipe", "init", "dtype")  # what merged documents must share


def compare(ours: np.ndarray, theirs: np.ndarray, floor: float) -> dict[str, Any]:
    """Paired difference over seeds, its 95% CI (t), the tolerance and whether it holds:
    |mean diff| <= max(2 x the pooled seed sd of the two sides, floor)."""
    from scipy import stats

    d = ours - theirs
    k = len(d)
    mean = float(d.mean())
    if k < 2:
        return {"diff": mean, "ci_low": math.nan, "ci_high": math.nan, "seed_sd": math.nan,
                "tolerance": floor, "within": abs(mean) <= floor}
    half = float(stats.t.ppf(0.975, k - 1)) * float(d.std(ddof=1)) / math.sqrt(k)
    pooled = math.sqrt((ours.var(ddof=1) + theirs.var(ddof=1)) / 2)
    tol = max(2 * pooled, floor)
    return {"diff": mean, "ci_low": mean - half, "ci_high": mean + half, "seed_sd": pooled,
            "tolerance": tol, "within": bool(abs(mean) <= tol)}


def floor_of(problem: dict[str, Any]) -> float:
    """One test row's share for accuracy; R2_FLOOR for R²."""
    return 1 / problem["rows"][2] if problem["task"] == "classification" else R2_FLOOR


def scores(problem: dict[str, Any], side: str) -> np.ndarray:
    return np.array([f["test_score"] for f in problem[side]])


def merge(docs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One document from several (path, document) that share device, model and recipe."""
    path0, first = docs[0]
    out = {**first, "problems": [], "commands": []}
    for path, doc in docs:
        for key in SAME:
            if doc.get(key) != first.get(key):
                raise ConfigError(f"{path}: its {key} {doc.get(key)!r} is not {path0}'s "
                                  f"{first.get(key)!r}; merge runs of one setting only")
        out["problems"] += doc["problems"]
        out["commands"] += doc.get("commands", [])
    return out


def _sd(v: np.ndarray) -> str:
    return f"{v.std(ddof=1):.4f}" if len(v) > 1 else "-"


def _ms(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else "-"


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}×" if isinstance(a, float) and isinstance(b, float) else "-"


def report(doc: dict[str, Any]) -> str:
    """The RESULTS.md section of a document."""
    gpu = doc["device"] == "cuda"
    env, r = doc["env"], doc["recipe"]
    cmds = "; ".join(f"`{c}`" for c in doc["commands"])
    lines = [HEADING.format("GPU" if gpu else "CPU"), "",
             f"Run on {doc.get('date', date.today())}: {env['device']}, PyTorch {env['torch']}"
             f"{', CuPy ' + env['cupy'] if 'cupy' in env else ''}, code at commit "
             f"{env['commit']}. Command(s): {cmds}.", "",
             f"Model `{doc['model']}`; AdamW lr {r['lr']:g}, weight decay "
             f"{r['weight_decay']:g}, batch {r['batch_size']}, at most {r['epochs']} epochs, "
             f"patience {r['patience']}; {doc['dtype']}; init `{doc['init']}` "
             f"({INIT_TEXT[doc['init']]}). Within noise: |mean diff| <= 2 × seed sd (pooled "
             f"over both sides), floor one test row (accuracy) or {R2_FLOOR} (R²); CI: 95%, "
             "t over the paired seeds.", "",
             "| problem | task | rows train/val/test | features | seeds | score | runtime | "
             "PyTorch | diff [95% CI] | tolerance | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in doc["problems"]:
        a, b = scores(p, "ours"), scores(p, "torch")
        c = compare(a, b, floor_of(p))
        lines.append(
            f"| {p['name']} | {p['task']} | {'/'.join(map(str, p['rows']))} | "
            f"{p['features']} | {len(a)} | {'accuracy' if p['task'] == 'classification' else 'R²'}"
            f" | {a.mean():.4f} ± {_sd(a)} | {b.mean():.4f} ± {_sd(b)} | {c['diff']:+.4f} "
            f"[{c['ci_low']:+.4f}, {c['ci_high']:+.4f}] | {c['tolerance']:.4f} | "
            f"{'within noise' if c['within'] else '**outside**'} |")
    lines += ["", "Step time, median ms per optimizer step (a batch of the recipe's size, the "
                  "loss fetched every step):", "",
              "| problem | tokens | ours | PyTorch eager | "
              + ("PyTorch CUDA graph | " if gpu else "")
              + "ours / eager |" + (" ours / graph | our step |" if gpu else ""),
              "|---|---|---|---|" + ("---|" if gpu else "") + "---|"
              + ("---|---|" if gpu else "")]
    for p in doc["problems"]:
        t = p["step_ms"]
        cells = [p["name"], str(p["features"]), _ms(t["ours"]), _ms(t.get("torch_eager"))]
        if gpu:
            cells.append(_ms(t.get("torch_graph")))
        cells.append(_ratio(t["ours"], t.get("torch_eager")))
        if gpu:
            how = str(t.get("ours_graph", "-")).replace("|", "/")
            cells += [_ratio(t["ours"], t.get("torch_graph")), how[:100]]
        lines.append("| " + " | ".join(cells) + " |")
    skipped = [f"{p['name']} {k}: {v}" for p in doc["problems"] for k, v in p["step_ms"].items()
               if isinstance(v, str) and v.startswith("skipped")]
    lines += [""] + [f"- {s}" for s in skipped]
    return "\n".join(lines).rstrip("\n") + "\n"
