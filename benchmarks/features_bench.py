"""Problem meta-features: ours vs pymfe, same features, on a 20,000 x 100 dataset.

Each variant runs in a fresh child process (so imports, caches and memory peaks do not
leak between them) on the same data (make_classification, 3 classes, standardised):

- `ours`: `compute_features` with the default row budget (5,000 rows sampled);
- `ours-sequential`: `ours` with the landmarks' folds fitted one after another
  (`fold_threads=1`); `ours` fits them in threads on a large sample (one per core, at most
  10), with the same values;
- `ours-full`: every row (row_budget=None): the exact pymfe definitions on the same rows;
- `pymfe-lean`: pymfe's MFE restricted to the features both compute
  (`PYMFE_EQUIVALENTS`), fitted without precomputation (`precomp_groups=None`): the
  fastest and smallest way pymfe computes exactly these features; the speed ratio is
  taken against it;
- `pymfe`: the same with pymfe's default fit (precomputation for every selected group;
  for the complexity group that means n x n matrices).

Each child runs under an address-space limit (--mem-limit-gb, default 8): a variant that
needs more fails with MemoryError, reported as such, instead of waking the OOM killer on a
shared machine.

Every variant runs with the same BLAS thread count (OPENBLAS_NUM_THREADS, default 1).

Reported: wall time, peak memory above the process's state before extraction (peak RSS,
from getrusage), the speed ratio, and the agreement of values with pymfe.

    .venv/bin/python benchmarks/features_bench.py [--rows 20000] [--cols 100]
        [--variants ours,ours-sequential,ours-full,pymfe-lean,pymfe]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import cpu_model  # noqa: E402

VARIANTS = ("ours", "ours-sequential", "ours-full", "pymfe-lean", "pymfe")


def make_data(rows: int, cols: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification

    # at least 3 informative features: 3 classes of 2 clusters need 2 ** 3 corners (the
    # same data as before from 15 columns up)
    X, y = make_classification(n_samples=rows, n_features=cols,
                               n_informative=max(3, cols // 5),
                               n_redundant=cols // 10, n_classes=3, random_state=seed)
    X = (X - X.mean(0)) / X.std(0)
    return X, y.astype(np.int64)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_child(variant: str, rows: int, cols: int, seed: int) -> dict[str, object]:
    """Extract in this (fresh) process; return time, memory and values."""
    from aicf_induct.problems.features import FeatureConfig, compute_features
    from aicf_induct.problems.features.oracle import pymfe_features

    X, y = make_data(rows, cols, seed)
    if variant.startswith("pymfe"):
        pymfe_features(X[:300], y[:300], seed=seed, precompute=False)  # warm imports
    else:
        compute_features(X[:300], y[:300], True)  # warm imports and first-call setup
    base = peak_rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    if variant.startswith("pymfe"):
        try:
            values = pymfe_features(X, y, seed=seed, precompute=variant == "pymfe")
        except Exception as err:  # pymfe re-raises MemoryError as a bare Exception
            cause = err if isinstance(err, MemoryError) else (err.__cause__ or err)
            return {"variant": variant, "wall_s": time.perf_counter() - t0,
                    "cpu_s": time.process_time() - c0, "peak_mb": peak_rss_mb() - base,
                    "values": {}, "failed": type(cause).__name__}
    else:
        budget = None if variant == "ours-full" else FeatureConfig().row_budget
        threads = 1 if variant == "ours-sequential" else None
        values = compute_features(X, y, True, FeatureConfig(row_budget=budget, seed=seed,
                                                            fold_threads=threads))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"variant": variant, "wall_s": wall, "cpu_s": cpu,
            "peak_mb": peak_rss_mb() - base, "values": values}


def compare(ours: dict[str, float], theirs: dict[str, float]) -> tuple[float, str]:
    """Largest relative difference over the shared features, and which feature."""
    worst, name = 0.0, ""
    for key, v in theirs.items():
        o = ours.get(key, float("nan"))
        rel = abs(o - v) / max(abs(v), 1e-6) if np.isfinite(v) else 0.0  # sd of equal values: ~0
        if not np.isfinite(o) or rel > worst:
            worst, name = (rel if np.isfinite(o) else float("inf")), key
    return worst, name


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000,
                    help="rows of the synthetic 3-class table (default 20000; at least 20)")
    ap.add_argument("--cols", type=int, default=100,
                    help="its columns (default 100; at least 4)")
    ap.add_argument("--seed", type=int, default=0, help="its generator's seed (default 0)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated, of {', '.join(VARIANTS)} (default all)")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS/OpenMP threads for every variant alike (default 1)")
    ap.add_argument("--out", default="features_bench.json",
                    help="JSON with every measurement (merged with earlier runs' variants)")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0,
                    help="address-space limit of each child process (default 8)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:  # (an unknown name ran as ours, then left the table empty)
        ap.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    if args.rows < 20 or args.cols < 4:
        ap.error(f"--rows must be at least 20 and --cols at least 4, got {args.rows} and "
                 f"{args.cols}")
    if args.child:
        limit = int(args.mem_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        print(json.dumps(run_child(args.child, args.rows, args.cols, args.seed)))
        return 0
    out = Path(args.out)
    results: dict[str, dict[str, object]] = {}
    if out.exists():  # keep earlier variants (pymfe takes long) for the same setup
        old = json.loads(out.read_text())
        setup = (args.rows, args.cols, args.seed, args.blas_threads)
        if (old.get("rows"), old.get("cols"), old.get("seed"), old.get("blas_threads")) == setup:
            results = old["results"]
    for variant in args.variants.split(","):
        print(f"running {variant} on {args.rows} x {args.cols} ...", file=sys.stderr)
        proc = subprocess.run([sys.executable, __file__, "--child", variant, "--rows",
                               str(args.rows), "--cols", str(args.cols), "--seed",
                               str(args.seed), "--mem-limit-gb", str(args.mem_limit_gb)],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONWARNINGS": "ignore",
                                   "OPENBLAS_NUM_THREADS": str(args.blas_threads),
                                   "OMP_NUM_THREADS": str(args.blas_threads)})
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"  {results[variant]['wall_s']:.1f} s", file=sys.stderr)
        out.write_text(json.dumps({  # after each variant: a later failure loses nothing
            "rows": args.rows, "cols": args.cols, "seed": args.seed,
            "blas_threads": args.blas_threads, "mem_limit_gb": args.mem_limit_gb,
            "cpu": cpu_model(), "cores": os.cpu_count(), "results": results}, indent=1))
    report(results, args.rows, args.cols, args.mem_limit_gb)
    return 0


def report(results: dict[str, dict[str, object]], rows: int, cols: int,
           mem_limit: float = 8.0) -> None:
    print(f"{rows} x {cols}, 3 classes; {cpu_model()}, {os.cpu_count()} cores\n")
    print("| variant | wall time (s) | CPU time (s) | peak memory above start (MB) "
          "| vs pymfe-lean (wall / CPU) |")
    print("|---|---:|---:|---:|---:|")
    ref = results.get("pymfe-lean")
    for name in VARIANTS:
        r = results.get(name)
        if r is None:
            continue
        wall, cpu = float(r["wall_s"]), float(r.get("cpu_s", float("nan")))  # type: ignore
        if r.get("failed"):
            print(f"| {name} | failed after {wall:.0f} | {cpu:.0f} | {r['failed']} at "
                  f"{float(r['peak_mb']):.0f} (limit {mem_limit:g} GB) | |")  # type: ignore
            continue
        ratio = ""
        if ref and name.startswith("ours"):
            ratio = (f"{float(ref['wall_s']) / wall:.1f}x / "  # type: ignore
                     f"{float(ref.get('cpu_s', float('nan'))) / cpu:.1f}x")  # type: ignore
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {float(r['peak_mb']):.0f} "  # type: ignore
              f"| {ratio} |")
    if "ours" in results and "ours-sequential" in results:
        same = results["ours"]["values"] == results["ours-sequential"]["values"]
        print(f"\nours (folds in threads) and ours-sequential: "
              f"{'the same values' if same else 'VALUES DIFFER'}")
    if ref:
        theirs: dict[str, float] = ref["values"]  # type: ignore[assignment]
        for name in ("ours-full", "ours"):
            if name in results:
                mine: dict[str, float] = results[name]["values"]  # type: ignore[assignment]
                worst, feat = compare(mine, theirs)
                print(f"\n{name} vs pymfe: {len(theirs)} shared features, "
                      f"largest relative difference {worst:.2e} ({feat})")
        if "ours" in results:  # the row sample's error, feature by feature
            mine = results["ours"]["values"]  # type: ignore[assignment]
            diffs = sorted(((abs(mine[k] - v), k, mine[k], v) for k, v in theirs.items()),
                           reverse=True)[:6]
            print("\nlargest differences of the sampled run (feature: ours / pymfe):")
            for _, k, o, v in diffs:
                print(f"  {k}: {o:.4g} / {v:.4g}")


if __name__ == "__main__":
    sys.exit(main())
