"""`make demo`: the main job end to end on bundled data, in about a minute.

Trains the default MLP and a layernorm/GELU variant on four bundled datasets with the NumPy
runtime, logs every run into a warehouse (./aicf_warehouse, or $AICF_WAREHOUSE), prints the
final metrics, then queries the warehouse's leaderboard with SQL.
"""

from __future__ import annotations

import os
import sys

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.problems import load_problem
from aicf_induct.runtime.metrics import score_name
from aicf_induct.runtime.trainer import TrainConfig, Trainer

DATASETS = ("iris", "wine", "breast_cancer", "diabetes")
MODELS = ("mlp", "mlp:depth=2,width=64,act=gelu,norm=layernorm")
SEED = 1  # split, init and batch order; see README ("Reproducing the figures")


def main() -> int:
    import warehouse

    root = warehouse.default_root()
    print(f"aicf_induct demo: {len(DATASETS)} datasets x {len(MODELS)} models, "
          f"logged to {root}\n")
    recorder = warehouse.open_recorder(root)
    rows = []
    try:
        for name in DATASETS:
            problem = load_problem(name, seed=SEED)
            for spec in MODELS:
                graph = mlp_graph(parse_model_spec(spec), problem.n_features, problem.n_outputs)
                result = Trainer(problem, graph, TrainConfig(epochs=100, seed=SEED),
                                 recorder=recorder, origin="demo",
                                 progress=sys.stderr.isatty(),
                                 extra_config={"model": spec}).fit()
                metric = score_name(problem.task)
                rows.append((name, spec, result.epochs, metric, result.metrics[f"test_{metric}"]))
    finally:
        recorder.close()
    print(f"{'dataset':<14} {'model':<46} {'epochs':>6}  test score")
    for name, spec, epochs, metric, value in rows:
        print(f"{name:<14} {spec:<46} {epochs:>6}  {metric} {value:.4f}")
    conn = warehouse.connect(root)
    print("\nleaderboard (from the warehouse, SQL in warehouse/sql/leaderboard.sql):")
    print(warehouse.run_report(conn, "leaderboard", {}).head(8).to_string(index=False))
    print(f"\nexplore: aicf-induct runs --warehouse {root}; "
          f"aicf-induct sql \"SELECT count(*) FROM steps\" --warehouse {root}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
