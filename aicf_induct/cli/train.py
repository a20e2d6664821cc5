"""`aicf-induct train`: train a model on a dataset, log the run, print the final metrics."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from aicf_induct.cli import from_proposal, options
from aicf_induct.cli.ir import softmax_note
from aicf_induct.cli.json_out import json_text
from aicf_induct.cli.options import API_KEY_ENV
from aicf_induct.compiler.fusion import PRECISIONS
from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.file_kinds import special_file
from aicf_induct.frontend.families import CNNSpec, parse_spec, spec_graph
from aicf_induct.interrupts import sigterm_interrupts
from aicf_induct.ir import canonical
from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.validate import infer_types
from aicf_induct.kernels.autotune import TuningStore
from aicf_induct.problems.problem import Problem
from aicf_induct.records import NullRecorder, Recorder
from aicf_induct.runtime.backend import BACKENDS, gpu_available, select_backend
from aicf_induct.runtime.data import least_rows
from aicf_induct.runtime.executor import check_size
from aicf_induct.runtime.parallel import Communicator, DataParallel
from aicf_induct.runtime.trainer import TrainConfig, Trainer, TrainResult, check_trainable
from aicf_induct.words import counted

DEFAULT_MODEL = "mlp"


def add_train_options(p: argparse.ArgumentParser, epochs: bool = True) -> None:
    """Recipe options shared by `train` and later commands that train (adapt, sweep);
    `epochs`: whether the run's length is counted in epochs (adapt counts --steps)."""
    g = p.add_argument_group("training recipe")
    d = TrainConfig()
    if epochs:
        g.add_argument("--epochs", type=options.positive_int, default=d.epochs,
                       help=f"(default {d.epochs})")
    # the recipe a proposal brings: None when not given, so --from-proposal can tell a
    # value the user chose from the default (`train_config` fills the default in)
    g.add_argument("--batch-size", type=options.positive_int, default=None,
                   help=f"(default {d.batch_size})")
    g.add_argument("--optimizer", default=None, choices=["sgd", "adam", "adamw"],
                   help=f"(default {d.optimizer})")
    g.add_argument("--lr", type=options.positive_float, default=None,
                   help=f"learning rate (default {d.lr})")
    g.add_argument("--weight-decay", type=options.non_negative_float, default=None,
                   help=f"(default {d.weight_decay})")
    g.add_argument("--momentum", type=options.fraction, default=d.momentum,
                   help=f"SGD momentum (default {d.momentum})")
    g.add_argument("--schedule", default=d.schedule, choices=["constant", "cosine"],
                   help=f"learning-rate schedule (default {d.schedule})")
    g.add_argument("--warmup-steps", type=options.non_negative_int, default=d.warmup_steps,
                   help="linear warm-up steps (default 0)")
    g.add_argument("--clip-norm", type=options.non_negative_float, default=d.clip_norm,
                   help="clip the global gradient norm (default 0: off)")
    g.add_argument("--patience", type=options.non_negative_int, default=d.patience,
                   help=f"early stopping patience in epochs, 0 to disable (default {d.patience})")
    g.add_argument("--label-smoothing", type=options.fraction, default=d.label_smoothing,
                   help="cross-entropy label smoothing (default 0)")
    g.add_argument("--seed", type=options.seed, default=d.seed,
                   help="seed for the data split, initialisation, batch order and dropout")
    g = p.add_argument_group("device")
    g.add_argument("--backend", default=d.backend, choices=BACKENDS,
                   help="auto: CuPy on an NVIDIA GPU when CuPy sees one, else NumPy; cupy "
                        "and numpy insist (default auto)")
    g.add_argument("--precision", default=d.precision, choices=PRECISIONS,
                   help="the GPU's matrix products: fp32, or TF32 / bf16 tensor cores with "
                        "fp32 master weights and sums (default fp32). The NumPy backend "
                        "computes in the model's dtype whatever this says")


def train_config(args: argparse.Namespace) -> TrainConfig:
    d = TrainConfig()
    recipe = {name: getattr(args, name) if getattr(args, name) is not None else getattr(d, name)
              for name in options.recipe_options().values()}
    config = TrainConfig(epochs=getattr(args, "epochs", d.epochs), **recipe,
                         momentum=args.momentum, schedule=args.schedule,
                         warmup_steps=args.warmup_steps, clip_norm=args.clip_norm,
                         patience=args.patience, label_smoothing=args.label_smoothing,
                         seed=args.seed, backend=args.backend, precision=args.precision)
    # "cupy" where it cannot run fails here, with its reason, before a row is written
    if config.backend == "cupy" and not gpu_available():
        select_backend(config.backend)
    # a precision policy that will not apply is said, not silently dropped
    if config.precision != "fp32" and not select_backend(config.backend).is_gpu:
        note_precision_dropped(config.precision)
    return config


def note_precision_dropped(precision: str) -> None:
    print(f"note: --precision {precision} applies to the GPU backend; this run is on NumPy "
          "and computes in the model's dtype", file=sys.stderr)


def model_graph(problem: Problem, model: str | None, ir_file: str | None) -> Graph:
    """The graph to train: an IR file, or a model spec built for the problem's shapes."""
    if ir_file:
        graph = canonical.load(ir_file)
        if len(graph.inputs) != 1 or len(graph.outputs) != 1:  # what a batch feeds and scores
            raise ConfigError(
                f"{ir_file}: training feeds one input and scores one output; the graph has "
                f"inputs {', '.join(repr(n.id) for n in graph.inputs)} and outputs "
                f"{', '.join(repr(o) for o in graph.outputs)}")
        _check_input(ir_file, graph.inputs[0], problem)
        types = infer_types(graph)
        out = graph.outputs[0]
        n_out = types[out].shape[-1]
        if n_out != problem.n_outputs:
            raise ConfigError(f"{ir_file}: output '{out}' has {n_out} values per example, the "
                              f"dataset '{problem.name}' needs {problem.n_outputs}")
        check_size(graph, ir_file, types)  # as Trainer checks it, said with the file's name
        note = softmax_note(graph, ir_file) if problem.task == "classification" else None
        if note:
            print(note, file=sys.stderr)
        return graph
    from aicf_induct.problems.sklearn_datasets import IMAGE_SIDES, image_side

    spec = parse_spec(model or DEFAULT_MODEL)
    if isinstance(spec, CNNSpec) and image_side(problem.name) is None:
        shapes = ", ".join(f"{k} ({v}x{v})" for k, v in IMAGE_SIDES.items())
        raise ConfigError(f"model kind cnn needs an image-shaped problem; '{problem.name}' is "
                          f"not one (image-shaped: {shapes})")
    return spec_graph(spec, problem.n_features, problem.n_outputs)


def _check_input(ir_file: str, x: Node, problem: Problem) -> None:
    """A table feeds rows of float features: the IR's input must take exactly that (a rank-3
    or integer input failed in the first step's copy, a traceback and a failed run)."""
    shape, dtype = list(x.attrs.get("shape") or [None]), x.attrs.get("dtype", "float64")
    per_example = shape[1:]
    if dtype not in ("float32", "float64"):
        raise ConfigError(f"{ir_file}: input '{x.id}' takes {dtype} values (token ids?); a "
                          f"table feeds rows of float features")
    if len(per_example) > 1:
        size = math.prod(d or 0 for d in per_example)
        fix = (": reshape inside the model (x.view(-1, "
               f"{', '.join(str(d) for d in per_example)}))"
               if size == problem.n_features else "")
        raise ConfigError(f"{ir_file}: input '{x.id}' takes {tuple(per_example)} per example; "
                          f"the dataset '{problem.name}' feeds rows of {problem.n_features} "
                          f"features{fix}")
    width = per_example[0] if per_example else None
    if width != problem.n_features:
        raise ConfigError(f"{ir_file}: input '{x.id}' takes {width} features, the dataset "
                          f"'{problem.name}' has {problem.n_features}")


def load_values(path: str, graph: Graph) -> dict[str, Any]:
    """Parameter values from an .npz file, checked as the runtime checks values (each name the
    graph's, numeric, finite, of its shape: `check_values`); those it lacks start from their
    initializers, said in a note."""
    import zipfile

    import numpy as np

    from aicf_induct.runtime.executor import check_values

    special = special_file(path)
    if special:
        raise ConfigError(f"{path}: not a regular file ({special})")
    if Path(path).is_dir():
        raise ConfigError(f"{path} is a folder, not an .npz file")
    if not Path(path).exists():
        raise ConfigError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):  # NumPy's reason names pickles
        raise ConfigError(f"{path}: not an .npz file (numpy.savez writes one)")
    try:
        with np.load(path) as arrays:
            raw = {k: arrays[k] for k in arrays.files}
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: not a readable .npz file ({err})") from None
    if not raw:
        raise ConfigError(f"{path}: the file holds no values")
    values, missing = check_values(graph, raw, source=path)
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more"
                                          if len(missing) > 4 else "")
        print(f"note: {path} has no value for {shown}: "
              f"{'they start' if len(missing) > 1 else 'it starts'} from the initializer",
              file=sys.stderr)
    return values


LOGGED_IN_PART = 3  # exit status: the run ended, but the service did not take all of it


def logged_line(recorder: Recorder, where: str | None) -> tuple[str | None, int]:
    """The command's last line and exit status: where the run was logged (the local
    warehouse a `SpillRecorder` wrote it to when the service did not take it all), or, when
    the service did not take every record and nothing logged them elsewhere, that it is
    logged in part, with a status a script can tell from success."""
    where = getattr(recorder, "spilled_to", None) or where
    lost = int(getattr(recorder, "undelivered", 0))
    if lost:
        return (f"logged to {where} in part: {lost} record(s) not delivered (see above); "
                f"the run's results are the lines above", LOGGED_IN_PART)
    return (f"logged to {where}" if where else None), 0


def open_recorder(args: argparse.Namespace) -> tuple[Recorder, str | None]:
    """The warehouse recorder unless --no-log (or the service's with --log-to); returns it and
    where it writes. Opening it checks that the warehouse can be written (or that the service
    takes the key), before anything trains."""
    if args.no_log and args.log_to:
        raise ConfigError("--no-log and --log-to contradict each other: give one")
    if args.no_log:
        return NullRecorder(), None
    if args.log_to:
        return open_remote(args), args.log_to
    import warehouse

    root = warehouse.default_root(args.warehouse)
    return warehouse.open_recorder(root), str(root)


def log_to_key(args: argparse.Namespace) -> str:
    """The write key for --log-to (--api-key, else $AICF_API_KEY); --warehouse refused: the
    service logs into its own."""
    if args.warehouse is not None:
        raise ConfigError("--log-to logs through the service, which has its own warehouse: "
                          "drop --warehouse")
    key = args.api_key or os.environ.get(API_KEY_ENV)
    if not key:
        raise ConfigError(f"--log-to needs a write key: --api-key KEY or ${API_KEY_ENV}")
    return str(key)


def open_remote(args: argparse.Namespace) -> Recorder:
    """A `RemoteRecorder` into the service at --log-to, with --api-key (or $AICF_API_KEY)."""
    from aicf_induct.runtime.remote_recorder import RemoteLogError, RemoteRecorder

    try:
        return RemoteRecorder(args.log_to, log_to_key(args))
    except RemoteLogError as err:
        raise ConfigError(str(err)) from None


def tuning_store(where: str | None) -> TuningStore | None:
    """Where the GPU autotuner keeps its choices: the warehouse's kernel_tuning table (none
    for a run logged through the service)."""
    if where is None or where.startswith(("http://", "https://")):
        return None
    from warehouse.tuning_store import WarehouseTuningStore

    return WarehouseTuningStore(where)


def add_log_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warehouse", metavar="DIR", type=options.warehouse_dir, default=None,
                   help="warehouse directory (default: $AICF_WAREHOUSE, else ./aicf_warehouse)")
    p.add_argument("--no-log", action="store_true", help="do not log the run to the warehouse")
    add_remote_options(p)


def add_remote_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-to", metavar="URL", type=options.service_url, default=None,
                   help="log through the service at URL (`aicf-induct serve`) instead of a "
                        "local warehouse")
    p.add_argument("--api-key", metavar="KEY", default=None,
                   help=f"write key for --log-to (default: ${API_KEY_ENV})")


def print_metrics(metrics: dict[str, float]) -> None:
    """Final metrics, one line per split: `  test  loss 0.0619  accuracy 0.9667`."""
    for split in ("train", "val", "test"):
        cells = [f"{k.split('_', 1)[1]} {v:.4f}" for k, v in metrics.items()
                 if k.startswith(split + "_")]
        print(f"  {split:5s} " + "  ".join(cells))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "train", help="train a model on a dataset and log the run",
        description=textwrap.fill(
            "Train a model on a dataset (on an NVIDIA GPU through CuPy when there is one, "
            "else with NumPy), log the run (IR snapshot, per-step dynamics, per-epoch "
            "metrics, results) to the warehouse, and print the final metrics. With "
            "--from-proposal, train the top proposals for the dataset instead (each a logged "
            "run) and keep the best by validation.", 79, break_on_hyphens=False),
        epilog='examples:\n'
               '  aicf-induct train --dataset iris '
               '--model "mlp:depth=2,width=64,act=gelu,norm=layernorm" --epochs 50 --seed 0\n'
               '  aicf-induct train --dataset wine --from-proposal --top 3 --epochs 500 '
               '--patience 20   # the corpus\'s protocol',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", required=True,
                   help="dataset name: iris, wine, breast_cancer, digits, diabetes, or any "
                        "name `aicf-induct problems list` shows")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", default=None, type=options.model_spec,
                     help=f'model spec, e.g. "mlp:depth=2,width=64,act=gelu,norm=layernorm", '
                          f'"ftt:depth=2,d_token=32,heads=4", "resmlp:blocks=2,d=64", or, '
                          f'for image-shaped problems (digits), "cnn:stages=2,channels=16" '
                          f'(default "{DEFAULT_MODEL}")')
    src.add_argument("--ir", metavar="FILE", help="train the graph in this canonical IR file")
    p.add_argument("--values", metavar="FILE.npz",
                   help="with --ir: start from these parameter and buffer values (by name, "
                        "as `aicf-induct ir import --values` writes them) instead of the "
                        "initializers")
    p.add_argument("--save-ir", metavar="FILE", type=options.new_file,
                   help="write the model's IR (canonical JSON)")
    add_train_options(p)
    add_parallel_options(p)
    from_proposal.add_options(p, shortlist=True)
    add_log_options(p)
    p.add_argument("--json", action="store_true", help="print the final metrics as JSON")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (one shows only when stderr is a terminal)")
    p.set_defaults(func=run)


def add_parallel_options(p: argparse.ArgumentParser) -> None:
    dp = p.add_mutually_exclusive_group()
    dp.add_argument("--gpus", type=options.int_at_least(1), default=None, metavar="N",
                    help="data parallel over N GPUs of this machine: one process each, every "
                         "batch split between them, the gradients summed by NCCL inside the "
                         "captured step; one run logged (rank 0's)")
    dp.add_argument("--ranks", type=options.ranks, default=None, metavar="N",
                    help="data parallel over N processes on this machine's CPUs (NumPy): "
                         "the same arithmetic, the ranks joined by pipes; N at most the "
                         f"CPU count ({options.RANKS_FLOOR} on a machine with fewer)")


def parallel_setup(args: argparse.Namespace, config: TrainConfig
                   ) -> tuple[int, bool, TrainConfig]:
    """(ranks, on GPUs, the config with the backend the ranks use) from --gpus/--ranks."""
    if args.gpus:
        if config.backend == "numpy":
            raise ConfigError("--gpus trains on GPUs: drop --backend numpy (or use --ranks N "
                              "for CPU processes)")
        return args.gpus, True, dataclasses.replace(config, backend="cupy")
    if args.ranks and args.ranks > 1:
        if config.backend == "cupy":
            raise ConfigError("--ranks N is the CPU path: on GPUs use --gpus N")
        if config.precision != "fp32" and select_backend(config.backend).is_gpu:
            note_precision_dropped(config.precision)  # (train_config took auto for the GPU)
        return args.ranks, False, dataclasses.replace(config, backend="numpy")
    return 1, False, config


def note_idle_ranks(ranks: int, batch_size: int, graph: Graph) -> None:
    """Say when a batch is too small to give every rank rows: a rank takes one row at least,
    two with batchnorm (`data.least_rows`), and the rest wait at each step's sum."""
    least = least_rows(graph)
    busy = min(ranks, max(batch_size // least, 1))
    if busy < ranks:
        idle = "the other waits" if ranks - busy == 1 else f"the other {ranks - busy} wait"
        print(f"note: batches of {counted(batch_size, 'row')} keep {busy} of the {ranks} "
              f"ranks busy (a rank takes {least} row{'s' * (least > 1)} at least"
              f"{' with batchnorm' if least > 1 else ''}); {idle}: a batch size of "
              f"{least * ranks} or more uses them all", file=sys.stderr)


def dataset(args: argparse.Namespace) -> Problem:
    """The problem --dataset names, split by --seed. Its loaders (scikit-learn's among them)
    are imported here, when a command runs: `--help` needs none of them."""
    from aicf_induct.problems.registry import load_problem

    return load_problem(args.dataset, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    from_proposal.check(args)
    if args.from_proposal:
        return run_shortlist(args)
    ranks, gpus, config = parallel_setup(args, train_config(args))
    problem = dataset(args)
    graph = model_graph(problem, args.model, args.ir)
    if args.values and not args.ir:
        raise ConfigError("--values needs --ir (the graph whose parameters they are)")
    values = load_values(args.values, graph) if args.values else None
    check_trainable(problem, graph, config, args.ir or f"model {args.model or DEFAULT_MODEL}")
    recorder, where = open_recorder(args)
    if args.save_ir:  # once the run can start: a command refused leaves no file behind
        try:
            canonical.save(graph, args.save_ir)
        except BaseException:
            recorder.close()
            raise
    extra: dict[str, Any] = {"model": args.model or (Path(args.ir).name if args.ir
                                                     else DEFAULT_MODEL)}
    parallel = gpus or ranks > 1
    if parallel:
        extra["data_parallel"] = {"ranks": ranks, "gpus": gpus}
        note_idle_ranks(ranks, config.batch_size, graph)

    def rank0(comm: Communicator | None) -> TrainResult:
        return Trainer(problem, graph, config, recorder=recorder, origin="cli", values=values,
                       progress=not args.quiet, extra_config=extra,
                       tuning=tuning_store(where),
                       parallel=None if comm is None else DataParallel(comm)).fit()

    with sigterm_interrupts():  # kill, a scheduler: like Ctrl-C, the run ends logged
        try:
            if parallel:
                from aicf_induct.runtime.ranks import run_ranks

                result = run_ranks(ranks, rank0, train_other_rank, (args, config, where),
                                   gpus=gpus)
            else:
                result = rank0(None)
        except BaseException:
            recorder.close()
            raise
    line, status, log_error = close_log(recorder, recorder, where)
    if result.error:  # stopped other than by plan: a time budget, divergence
        print(f"note: {result.error}", file=sys.stderr)
    if args.json:
        print(json_text(result.as_dict(), indent=1))
    else:
        print(f"{problem.name}: {problem.task}, {counted(problem.n_rows, 'row')}, "
              f"{counted(problem.n_features, 'feature')}; model "
              f"{graph.name or extra['model']} ({graph.param_count()} parameters)")
        print(f"run {result.run_id} {result.status} after {counted(result.epochs, 'epoch')}, "
              f"{counted(result.steps, 'step')}, {result.wall_time_s:.2f} s (best epoch "
              f"{result.best_epoch})")
        print_metrics(result.metrics)
        if line:
            print(line)
        if args.save_ir:
            print(f"IR written to {args.save_ir}")
    if log_error is not None:  # after the run's results: why its log is incomplete
        raise log_error
    return status


def close_log(closing: Recorder, recorder: Recorder, where: str | None
              ) -> tuple[str | None, int, AicfError | None]:
    """Close the run's log (`closing`: `recorder`, or a fan-out holding it) and give the
    command's last line and exit status (`logged_line`) and the close's error (a disk that
    filled, say), returned rather than raised: a run that trained to its end has its results
    printed before it, and no "logged to" line."""
    error: AicfError | None = None
    try:
        closing.close()
    except AicfError as err:
        error = err
    line, status = logged_line(recorder, where)
    return (None if error else line), status, error


def train_other_rank(comm: Communicator, payload: tuple[argparse.Namespace, TrainConfig,
                                                         str | None]) -> None:
    """A data-parallel rank other than 0 (its own process): the same problem, graph and
    starting values as rank 0 (the same seeds), its share of every batch; it logs nothing."""
    args, config, where = payload
    problem = dataset(args)
    graph = model_graph(problem, args.model, args.ir)
    values = load_values(args.values, graph) if args.values else None
    Trainer(problem, graph, config, values=values, tuning=tuning_store(where),
            parallel=DataParallel(comm)).fit()


def run_shortlist(args: argparse.Namespace) -> int:
    """`train --from-proposal`: the top proposals trained one after another, the best by
    validation kept (`aicf_induct.induction.shortlist`)."""
    from aicf_induct.cli.table import format_table
    from aicf_induct.induction.mainjob import StartPoint
    from aicf_induct.induction.shortlist import shortlist_size, train_shortlist
    from aicf_induct.runtime.metrics import score_name

    if args.gpus or (args.ranks and args.ranks > 1):
        raise ConfigError("--from-proposal trains its proposals in this process one after "
                          "another: drop --gpus/--ranks")
    config = train_config(args)
    problem = dataset(args)
    top = args.top or from_proposal.TOP
    features = from_proposal.proposal_features(problem)
    proposal, source = from_proposal.ask_proposal(args, problem, features, top)
    recorder, where = from_proposal.service_recorder(args) or open_recorder(args)
    tuning = tuning_store(where)
    n = shortlist_size(proposal, top)

    def train(start: StartPoint, cfg: TrainConfig) -> TrainResult:
        return Trainer(problem, start.graph, cfg, recorder=recorder, origin="cli",
                       progress=not args.quiet, tuning=tuning,
                       extra_config={"model": start.model, "proposal": start.record}).fit()

    def announce(i: int, start: StartPoint) -> None:
        if not args.json:
            r = start.recipe
            print(f"[{i + 1}/{n}] proposal #{start.record['rank']}: {start.model} | "
                  f"{r['optimizer']} lr {r['lr']:g} weight decay {r['weight_decay']:g} "
                  f"batch {r['batch_size']}", flush=True)

    if not args.json:
        print(f"{problem.name}: {problem.task}, {counted(problem.n_rows, 'row')}, "
              f"{counted(problem.n_features, 'feature')}; the top {n} proposal{'s' * (n > 1)} "
              f"from {source}")
    with sigterm_interrupts():
        try:
            shortlist = train_shortlist(proposal, problem, config, train, top=top,
                                        source=source, announce=announce)
        finally:
            recorder.close()
    picked = shortlist.picked
    if args.save_ir:
        canonical.save(picked.start.graph, args.save_ir)
    line, status = logged_line(recorder, where)
    if args.json:
        print(json_text({"dataset": proposal.get("dataset"), "source": source,
                         **shortlist.as_dict()}, indent=1))
        return status
    name = score_name(problem.task)
    rows = [[t.rank, t.start.record["candidate"], t.score("val", problem.task),
             t.result.metrics.get("val_loss", float("nan")), t.score("test", problem.task),
             t.result.epochs, t.start.record["expected_norm_error"], t.result.run_id,
             "<- picked" if t is picked else ""] for t in shortlist.trained]
    print(format_table(rows, ["#", "candidate", f"val {name}", "val loss", f"test {name}",
                              "epochs", "expected norm. error", "run", "pick"], digits=4))
    print(f"picked by validation (the best val {name}, the lowest val loss between equals): "
          f"proposal #{picked.rank}, {picked.start.model}")
    print_metrics(picked.result.metrics)
    if line:
        print(line)
    if args.save_ir:
        print(f"IR of the pick written to {args.save_ir}")
    return status
