"""The knowledge pack: what `propose` needs, in one small Parquet file with its provenance.

A pack holds the corpus's meta-dataset **averaged over seeds** (one row per problem ×
candidate: the meta-dataset's id columns, the mean of every score column and `*_std`, its
standard deviation over seeds (a diverged run's infinite error left out; normalized errors
are always finite), `n_seeds`, **the per-seed values as lists** (`seeds`, `val_score_seeds`,
`test_score_seeds`, `param_steps_seeds`: what `Pack.seed_meta()` turns back into the
per-seed meta-dataset, so the benchmarks run from the pack alone, as TabRepo ships its
per-fold matrix), the problem's meta-features `f.*` and the candidate's patterns `p.*` (its
lowest seed's; `pattern_overrides` holds, as JSON, the other seeds' patterns that differ:
the input width, so a residual's projection and the parameter counts, follows the seed's
split of categorical columns)),
and, in the Parquet file's key-value metadata, the mined
`rules` and `correlations` tables, the learned rewrite proposer's aggregate table `rewrites`
(`rewrite_table.aggregate`: per transform and condition, the effect's count, mean and
variance; optional: a pack built from a corpus without adaptive runs has none, and a pack
without the entry reads as one with an empty table) and the **fitted meta-model** (its
three ensembles' trees as arrays, `induction.forest`; fitted on the averaged table, so its
target is the same per-problem mean normalized error the full meta-dataset gives), as JSON,
with the format and library versions. Loading a pack fits nothing: `Pack.proposer()`
restores the model and indexes the corpus problems for the neighbours in milliseconds, with
neither a refit (seconds) nor a pickle. Beside it, `PACK.json` records the provenance:
command, commit, date, problem list, versions.

The Parquet file depends only on the corpus and the build options (no dates inside), so a
rebuild from the same corpus gives the same bytes (with the same pyarrow, which names itself
in the file, and the same scikit-learn, which fits the trees). `load_pack` refuses an empty
file, a file that is not a pack, a damaged one, and a pack of another format version, each
with a one-line error.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from aicf_induct import __version__
from aicf_induct.atomic_file import atomic_write_all
from aicf_induct.errors import ConfigError
from aicf_induct.induction.meta_dataset import (
    ID_COLUMNS,
    feature_columns,
    pattern_columns,
    with_derived_scores,
)
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.mining import CORRELATION_COLUMNS, RULE_COLUMNS, Miner
from aicf_induct.induction.pack_location import DEFAULT_PACK as DEFAULT_PACK
from aicf_induct.induction.pack_location import PACK_ENV as PACK_ENV
from aicf_induct.induction.proposer import Proposer
from aicf_induct.induction.rewrite_table import DamagedRow, table_from_records, table_records

if TYPE_CHECKING:  # lazy (see rewrite_effects): the runtime it imports costs `propose` ~20 ms
    from aicf_induct.induction.rewrite_effects import RewriteEffects

# the shipped intervals are conformalized over this many group folds: the quantile models
# alone covered 63 % of the top-1's held-out outcomes at the nominal 80 %, conformalized 78 %
# (benchmarks/RESULTS.md, "Induction")
CONFORMAL_FOLDS = 5
# ... and their out-of-fold scores pooled over this many assignments of the groups to the
# folds: one assignment's margin moved by ~0.006 (sd) with the groups' names
CONFORMAL_REPEATS = 5
FORMAT = "aicf.pack/3"  # bump on any change a reader of the old format would misread
META_KEY = b"aicf.pack"  # the Parquet key-value metadata entry holding the pack's header
BUILD_COMMAND = "aicf-induct induce fit --warehouse DIR"  # writes DEFAULT_PACK
SCORE_COLUMNS = ("val_score", "test_score", "val_error", "test_error", "val_norm_error",
                 "test_norm_error", "rank_score", "param_steps")
# per-seed values kept as lists (list column -> meta-dataset column); the rest is derived
SEED_LISTS = {"seeds": "seed", "val_score_seeds": "val_score",
              "test_score_seeds": "test_score", "param_steps_seeds": "param_steps"}
OVERRIDES = "pattern_overrides"  # JSON {seed: {pattern: value}}; "" when none
PAIR_COLUMNS = tuple(c for c in ID_COLUMNS if c not in SCORE_COLUMNS and c != "seed")
HEADER_KEYS = ("library", "problems", "candidates")  # beside "format": what a proposal says


@dataclass
class Pack:
    """A loaded (or built) knowledge pack; see the module docstring."""

    table: pd.DataFrame  # one row per (problem, candidate)
    rules: pd.DataFrame  # Miner.rules_
    correlations: pd.DataFrame  # Miner.correlations_
    header: dict[str, Any]  # format, library, counts (stored in the Parquet file)
    metamodel: dict[str, Any]  # MetaModel.export() of the model fitted on `table`
    provenance: dict[str, Any] = field(default_factory=dict)  # the JSON beside it
    path: Path | None = None
    rewrites: pd.DataFrame = field(default_factory=pd.DataFrame)  # rewrite_table.aggregate
    _digest: str = field(default="", repr=False, compare=False)

    def __repr__(self) -> str:  # the model's trees and the tables would be megabytes
        return (f"Pack(problems={self.header.get('problems')}, "
                f"candidates={self.header.get('candidates')}, "
                f"path={self.path.name if self.path else None!r}, "
                f"digest={self.digest()[:12]!r})")

    @property
    def problems(self) -> list[str]:
        return sorted(self.table["problem"].astype(str).unique())

    def meta(self) -> pd.DataFrame:
        """The pack as a meta-dataset (one pseudo-seed, -1, holding the means over seeds)."""
        t = self.table  # the kept columns only: copying the per-seed lists too cost ~10 ms
        df = t[[*(c for c in ID_COLUMNS if c != "seed"), *feature_columns(t), *pattern_columns(t)]]
        df.insert(list(ID_COLUMNS).index("seed"), "seed", -1)
        return df

    def seed_meta(self, n_seeds: int | None = None) -> pd.DataFrame:
        """The per-seed meta-dataset the pack was built from (seeds 0..n_seeds-1 when
        given): the same frame `load_meta_dataset` reads from the corpus's warehouse, its
        errors, normalized errors and rank scores derived again from the per-seed scores."""
        pairs = self.table.drop(columns=[*SCORE_COLUMNS, *(f"{c}_std" for c in SCORE_COLUMNS),
                                         "n_seeds"])
        long = pairs.explode(list(SEED_LISTS), ignore_index=True).rename(columns=SEED_LISTS)
        long["seed"] = long["seed"].astype("int64")
        for c in ("val_score", "test_score", "param_steps"):
            long[c] = long[c].astype(float)
        _apply_overrides(long)
        if n_seeds is not None:
            long = long[long["seed"] < n_seeds]
        long = with_derived_scores(long.reset_index(drop=True))
        cols = [*ID_COLUMNS, *feature_columns(long), *pattern_columns(long)]
        return long[cols].sort_values(["problem", "candidate", "seed"]).reset_index(drop=True)

    def miner(self) -> Miner:
        """A Miner holding the pack's mined tables (as `fit` would have left them)."""
        return restored_miner(self.correlations, self.rules, self.header.get("miner", {}))

    def digest(self) -> str:
        """Hash of the pack's content (its tables, header and model); computed once (a pack
        is not changed once built or loaded, and hashing the model's trees takes ~0.1 s
        that every proposal would pay), and for a loaded pack remembered per file across
        processes (`_remembered_digest`)."""
        if not self._digest:
            self._digest = self._hash() if self.path is None else _remembered_digest(self)
        return self._digest

    def _hash(self) -> str:
        h = hashlib.sha256(json.dumps(self.header, sort_keys=True).encode())
        h.update(json.dumps(self.metamodel, sort_keys=True).encode())
        # the rewrite table counts only when present: a pack without one keeps its digest
        extra = (self.rewrites,) if len(self.rewrites) else ()
        table = self.table.copy()
        for c in SEED_LISTS:  # arrays are not hashable: their bytes are
            table[c] = table[c].map(lambda a: np.asarray(a).tobytes().hex())
        for df in (table, self.rules, self.correlations, *extra):
            h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
            h.update(json.dumps(list(map(str, df.columns))).encode())
        return h.hexdigest()[:16]

    def rewrite_effects(self) -> RewriteEffects:
        """The learned rewrite proposer on the pack's rewrite table (empty: no history)."""
        from aicf_induct.induction.rewrite_effects import RewriteEffects

        return RewriteEffects.from_table(self.rewrites)

    def proposer(self) -> Proposer:
        """The pack's Proposer: the shipped meta-model restored, no fitting (kept per
        process: the service builds it once per pack)."""
        return _proposer(self)


def restored_miner(correlations: pd.DataFrame, rules: pd.DataFrame,
                   params: dict[str, Any] | None = None) -> Miner:
    miner = Miner(**(params or {}))
    miner.correlations_ = correlations
    miner.rules_ = rules
    return miner


# -- building ------------------------------------------------------------------------------------
def aggregate(meta: pd.DataFrame) -> pd.DataFrame:
    """The meta-dataset averaged over seeds: one row per (problem, candidate)."""
    keys = ["problem_id", "candidate"]
    grouped = meta.groupby(keys, sort=True)
    first = grouped[[c for c in PAIR_COLUMNS if c not in keys]].first()
    with np.errstate(invalid="ignore"):
        scores = meta[[*keys, *SCORE_COLUMNS]].replace([np.inf, -np.inf], np.nan)
        g = scores.groupby(keys, sort=True)
        means, stds = g.mean(), g.std(ddof=1).add_suffix("_std")
    n = grouped.size().rename("n_seeds")
    by_seed = meta.sort_values("seed").groupby(keys, sort=True)
    # one array per cell, as pyarrow reads a list column back
    lists = pd.DataFrame({name: by_seed[col].agg(_array) for name, col in SEED_LISTS.items()})
    extra = by_seed[[*feature_columns(meta), *pattern_columns(meta)]].first()
    overrides = _pattern_overrides(meta, keys).reindex(extra.index, fill_value="").astype(str)
    # copy(): one block per dtype before reset_index inserts the keys (pandas warns otherwise)
    out = pd.concat([first, means, stds, n, lists, overrides, extra], axis=1).copy() \
        .reset_index()
    cols = [*PAIR_COLUMNS, *SCORE_COLUMNS, *stds.columns, "n_seeds", *SEED_LISTS, OVERRIDES,
            *feature_columns(meta), *pattern_columns(meta)]
    out = out[cols].sort_values(["problem", "candidate"]).reset_index(drop=True)
    out["n_seeds"] = out["n_seeds"].astype("int64")
    return out


def _pattern_overrides(meta: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per (problem, candidate): JSON of the patterns by which a seed's run differs from the
    lowest seed's (the pack row's), for the pairs that have any."""
    pats = pattern_columns(meta)
    ordered = meta.sort_values([*keys, "seed"])
    base = ordered.groupby(keys, sort=False)[pats].transform("first")
    differs = ordered[pats].ne(base) & ordered[pats].notna()
    found: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for idx in ordered.index[differs.any(axis=1)]:
        row = ordered.loc[idx]
        cols = [c for c in pats if differs.at[idx, c]]
        found.setdefault((row["problem_id"], row["candidate"]), {})[str(int(row["seed"]))] = \
            {c: float(row[c]) for c in cols}
    index = pd.MultiIndex.from_tuples(list(found), names=keys) if found else \
        pd.MultiIndex.from_arrays([[], []], names=keys)
    return pd.Series([json.dumps(v, sort_keys=True) for v in found.values()], index=index,
                     name=OVERRIDES, dtype=object)


def _apply_overrides(long: pd.DataFrame) -> None:
    """Put the per-seed patterns of `pattern_overrides` back on the exploded rows."""
    for idx in long.index[long[OVERRIDES] != ""]:
        seed_patterns = json.loads(str(long.at[idx, OVERRIDES])).get(str(long.at[idx, "seed"]), {})
        for col, value in seed_patterns.items():
            long.at[idx, col] = value


def _array(values: pd.Series) -> np.ndarray:
    dtype = np.int64 if pd.api.types.is_integer_dtype(values) else np.float64
    return np.asarray(values, dtype=dtype)


def build_pack(meta: pd.DataFrame, miner: Miner, excluded: Sequence[str] | str = (),
               rewrites: pd.DataFrame | None = None,
               conformal_folds: int = CONFORMAL_FOLDS,
               conformal_repeats: int = CONFORMAL_REPEATS) -> Pack:
    """A pack of `meta` (the corpus, excluded problems already dropped), a fitted miner and
    the rewrite history's aggregate table (None or empty: none). `excluded`: the names of
    the problems dropped (a str: one name), as the header records them."""
    check_is_fitted(miner, ["rules_", "correlations_"],
                    msg="build_pack's miner (%(name)s) is not fitted: the pack holds its "
                        "rules, so fit it on the corpus first (miner.fit(meta))")
    if isinstance(excluded, str):  # one name, not one name per character
        excluded = [excluded]
    if meta.empty:
        raise ConfigError("no corpus rows left to pack")
    table = aggregate(meta)
    params = {k: v for k, v in miner.get_params().items()
              if isinstance(v, int | float | str | bool)}
    header = {"format": FORMAT, "library": __version__,
              "problems": int(table["problem_id"].nunique()),
              "groups": int(table["group"].nunique()),
              "candidates": int(table["candidate"].nunique()),
              "seeds": sorted(int(s) for s in meta["seed"].unique()),
              "runs": len(meta), "excluded": sorted(excluded), "miner": params}
    rw = rewrites if rewrites is not None and len(rewrites) else pd.DataFrame()
    if len(rw):
        header["rewrite_decisions"] = int(rw.loc[rw["level"] == 0, "n"].sum())
    pack = Pack(table, miner.rules_[list(RULE_COLUMNS)].reset_index(drop=True),
                miner.correlations_[list(CORRELATION_COLUMNS)].reset_index(drop=True), header,
                {}, rewrites=rw)
    pack.metamodel = MetaModel(conformal_folds=conformal_folds,
                               conformal_repeats=conformal_repeats).fit(pack.meta()).export()
    return pack


def provenance(pack: Pack, command: Sequence[str] | None = None,
               refit_of: dict[str, Any] | None = None,
               history: dict[str, int] | None = None,
               protocol: str | None = None) -> dict[str, Any]:
    """What the JSON beside the pack records (`refit_of`: for a pack refit from another
    pack's corpus, that pack's digest and how it was built; `history`: what the rewrite
    table aggregates, when it was read from a warehouse of adaptive runs; `protocol`: the
    sweep protocol of the corpus, which a warehouse growing it must share)."""
    probs = pack.table.drop_duplicates("problem_id").sort_values("problem")
    return {"format": FORMAT, "library": __version__,
            "command": " ".join(command if command is not None else
                                ["aicf-induct", *sys.argv[1:]]),
            "commit": git_commit(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
            **{k: pack.header[k] for k in ("problems", "groups", "candidates", "seeds", "runs",
                                           "excluded")},
            "problem_list": [{"problem": str(r.problem), "problem_id": str(r.problem_id),
                              "group": str(r.group), "task": str(r.task)}
                             for r in probs.itertuples()],
            "digest": pack.digest(), **({"protocol": protocol} if protocol else {}),
            **({"rewrite_history": history} if history else {}),
            **({"refit_of": refit_of} if refit_of else {})}


def git_commit() -> str:
    """The source tree's commit, or "unknown" outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def write_pack(pack: Pack, path: str | Path, command: Sequence[str] | None = None,
               refit_of: dict[str, Any] | None = None,
               history: dict[str, int] | None = None, protocol: str | None = None) -> Path:
    """Write PATH (Parquet, named .parquet: `pack_path`) and PATH with `.json`
    (provenance, `refit_of`, `history` and `protocol` as `provenance` takes them), each
    atomically, neither when one of them cannot be (a ConfigError naming that one);
    returns PATH."""
    import pyarrow as pa

    from warehouse.writer import write_parquet

    path = pack_path(path)
    header = {**pack.header, "rules": _records(pack.rules),
              "correlations": _records(pack.correlations), "metamodel": pack.metamodel}
    if len(pack.rewrites):
        header["rewrites"] = table_records(pack.rewrites)
    t = pa.Table.from_pandas(pack.table, preserve_index=False)
    t = t.replace_schema_metadata({META_KEY: json.dumps(header, sort_keys=True).encode()})
    prov = provenance(pack, command, refit_of, history, protocol)
    prov_path = json_path(path)

    def failed(where: Path, err: OSError | str) -> ConfigError:
        # the path that failed, worded as `induce fit` refuses an -o before the fit
        why = err if isinstance(err, str) else err.strerror or str(err)
        its = "" if where == path else f"its provenance {where}: "
        return ConfigError(f"cannot write the knowledge pack to {path}: {its}{why}")

    # both destinations checked, then both written to temporaries and renamed together: a
    # pack must not be left beside a provenance that says another one is (an interrupt or a
    # refused rename between two renames left the old pack under the new provenance)
    for where in (path, prov_path):
        if where.is_dir():
            raise failed(where, "is a folder, not a file")

    def write_prov(p: Path) -> None:
        try:
            p.write_text(json.dumps(prov, indent=1) + "\n")
        except OSError as err:
            raise failed(prov_path, err) from None

    def write_table(tmp: Path) -> None:
        try:  # no page checksums: the shipped pack's bytes stay what its documented refit writes
            write_parquet(t, tmp, page_checksum=False)
        except OSError as err:
            raise failed(path, err) from None

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_all([(path, write_table), (prov_path, write_prov)])
    except OSError as err:  # a rename's, which names the final file second
        raise failed(prov_path if err.filename2 == str(prov_path) else path, err) from None
    pack.provenance, pack.path = prov, path
    return path


DIGESTS_FILE = "pack-digests.json"  # under the cache dir: file identity -> digest


def _remembered_digest(pack: Pack) -> str:
    """`pack._hash()` for a pack loaded from `pack.path`, remembered under the cache dir
    ($AICF_CACHE_DIR) by the file's path, size and modification time, so that a command
    that loads the same file again (every `propose`) reads it instead of hashing; a file
    rewritten since is another key. A cache that cannot be read or written is skipped."""
    from aicf_induct.cache import cache_dir, read_json, write_json

    assert pack.path is not None
    try:
        st = pack.path.stat()
    except OSError:
        return pack._hash()
    where = str(pack.path.resolve())
    key = f"{where}|{st.st_size}|{st.st_mtime_ns}"
    memo = cache_dir() / DIGESTS_FILE
    known = read_json(memo)
    if not isinstance(known, dict):
        known = {}
    if isinstance(known.get(key), str):
        return str(known[key])
    value = pack._hash()
    # one entry per file: an older version of it is dropped
    known = {k: v for k, v in known.items() if k.rsplit("|", 2)[0] != where}
    known[key] = value
    write_json(memo, known)
    return value


def json_path(path: Path) -> Path:
    """Where the provenance of the pack at `path` goes: beside it, the same name .json."""
    return path.with_suffix(".json")


def pack_path(path: str | Path) -> Path:
    """`path` as a pack to write: named .parquet (what is written is Parquet), so that its
    provenance (`json_path`) is a file of its own, never the pack itself (X.json) nor a
    file the name did not announce (pk.txt beside pk.json)."""
    p = Path(path)
    if p.suffix != ".parquet":
        raise ConfigError(f"cannot write the knowledge pack to {p}: a knowledge pack is "
                          f"Parquet: name it .parquet ({p.with_suffix('.parquet').name}, its "
                          f"provenance beside it as {json_path(p).name})")
    return p


def _records(df: pd.DataFrame) -> dict[str, Any]:
    """A table as JSON-ready columns + rows (Python floats round-trip exactly)."""
    return {"columns": [str(c) for c in df.columns],
            "rows": [[_plain(v) for v in row] for row in df.itertuples(index=False)]}


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None if np.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _frame(rec: dict[str, Any], columns: Sequence[str]) -> pd.DataFrame:
    """A mined table back from `_records`, with the warehouse's column types."""
    df = pd.DataFrame(rec["rows"], columns=rec["columns"]).reindex(columns=list(columns))
    for c in df.columns:
        if c in INT_COLUMNS:
            df[c] = df[c].astype("int64")
        elif c not in TEXT_COLUMNS:
            df[c] = pd.to_numeric(df[c].replace({"inf": np.inf, "-inf": -np.inf}),
                                  errors="raise").astype(float)
    return df


INT_COLUMNS = ("problems", "depth")
TEXT_COLUMNS = ("feature", "trait", "trait_column", "trait_op", "trait_value", "condition",
                "conditions", "text")


# -- loading -------------------------------------------------------------------------------------
def env_pack() -> Path | None:
    """`$AICF_PACK`, the pack a command given none reads (None: unset, the shipped one); a
    ConfigError naming it when no file is there."""
    given = os.environ.get(PACK_ENV)
    if not given:
        return None
    if not Path(given).is_file():
        raise ConfigError(f"${PACK_ENV}: no knowledge pack at {given}")
    return Path(given)


def load_pack(path: str | Path | None = None) -> Pack:
    """The pack at `path` (None: `$AICF_PACK`, else the one shipped with the package),
    validated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path is None:
        path = env_pack()
    p = Path(path) if path is not None else DEFAULT_PACK
    if not p.is_file():
        if path is None:
            raise ConfigError(f"no knowledge pack is installed ({p} does not exist yet): build "
                              "one from a corpus with `aicf-induct corpus build --warehouse "
                              f"DIR` then `{BUILD_COMMAND}` (it writes there), or pass "
                              "--pack PACK")
        if p.is_dir():
            raise ConfigError(f"{p} is a directory, not a knowledge pack (a .parquet file: "
                              f"{DEFAULT_PACK.name}, say)")
        raise ConfigError(f"no knowledge pack at {p}")
    if p.stat().st_size == 0:
        raise ConfigError(f"knowledge pack {p} is empty (0 bytes)")
    try:
        pf = pq.ParquetFile(p)
        meta = pf.schema_arrow.metadata or {}
    except (pa.ArrowException, OSError) as err:
        raise ConfigError(f"{p} is not a knowledge pack (not a Parquet file: "
                          f"{str(err).splitlines()[0]})") from None
    if META_KEY not in meta:
        raise ConfigError(f"{p} is not a knowledge pack (a Parquet file without the "
                          f"'{META_KEY.decode()}' header)")
    try:
        header = json.loads(meta[META_KEY])
        fmt = header["format"]
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"{p}: the knowledge pack header is damaged") from None
    if fmt != FORMAT:
        raise ConfigError(_format_message(p, fmt, header))
    lacking = [k for k in HEADER_KEYS if k not in header]
    if lacking:  # what a proposal reports of its pack
        raise ConfigError(f"{p}: the knowledge pack header is damaged (it lacks "
                          f"{', '.join(map(repr, lacking))})")
    try:
        table = pf.read().to_pandas()
    except (pa.ArrowException, OSError) as err:  # a footer intact, the rows not
        raise ConfigError(f"{p}: the knowledge pack is damaged (its rows cannot be read: "
                          f"{str(err).splitlines()[0]})") from None
    missing = [c for c in (*PAIR_COLUMNS, *SCORE_COLUMNS, *SEED_LISTS, OVERRIDES)
               if c not in table.columns]
    if missing:
        raise ConfigError(f"{p}: the knowledge pack lacks column(s) {', '.join(missing)}")
    not_numbers = [c for c in (*SCORE_COLUMNS, *feature_columns(table), *pattern_columns(table))
                   if not pd.api.types.is_numeric_dtype(table[c])]
    if not_numbers:
        raise ConfigError(f"{p}: the knowledge pack's column '{not_numbers[0]}' holds "
                          f"{table[not_numbers[0]].dtype} values, not numbers")
    _check_model_columns(p, table, header.get("metamodel"))
    if table.empty:
        raise ConfigError(f"knowledge pack {p} holds no problems")
    try:
        rules = _frame(header.pop("rules"), RULE_COLUMNS)
        corr = _frame(header.pop("correlations"), CORRELATION_COLUMNS)
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"{p}: the knowledge pack's mined tables are damaged") from None
    try:
        rewrites = table_from_records(header.pop("rewrites")) if "rewrites" in header \
            else pd.DataFrame()
    except (KeyError, TypeError, ValueError) as err:
        which = f": {err}" if isinstance(err, DamagedRow) else ""
        raise ConfigError(f"{p}: the knowledge pack's rewrite table is damaged{which}") \
            from None
    model = header.pop("metamodel", None)
    if not isinstance(model, dict):
        raise ConfigError(f"{p}: the knowledge pack holds no fitted meta-model")
    prov: dict[str, Any] = {}
    with_json = json_path(p)
    if with_json.is_file():
        try:
            prov = json.loads(with_json.read_text())
        except ValueError:
            raise ConfigError(f"{with_json}: the pack's provenance is not valid JSON") from None
        if not isinstance(prov, dict):  # every reader asks it for keys
            raise ConfigError(f"{with_json}: the pack's provenance is not a JSON object")
    return Pack(table, rules, corr, header, model, prov, p, rewrites)


def _format_message(p: Path, fmt: object, header: dict[str, Any]) -> str:
    """Why a pack of another format cannot be read, and what to do: a newer one needs a
    newer aicf-induct; an older one is rebuilt from its corpus."""
    said = (f"{p}: knowledge pack format '{fmt}' (written by aicf-induct "
            f"{header.get('library', '?')}) is not the '{FORMAT}' this aicf-induct "
            f"{__version__} reads")
    ours, theirs = _format_number(FORMAT), _format_number(fmt)
    if theirs is not None and ours is not None and theirs > ours:
        return (f"{said}: it was made by a newer aicf-induct: upgrade aicf-induct, or use a "
                "pack of this version")
    return (f"{said}: rebuild it from its corpus with `{BUILD_COMMAND}`, or refit a pack of "
            "this version with `aicf-induct induce fit --pack PACK`")


def _format_number(fmt: object) -> int | None:
    """N of 'aicf.pack/N'; None for anything else."""
    name, _, n = str(fmt).partition("/")
    return int(n) if name == FORMAT.split("/")[0] and n.isdigit() else None


def _check_model_columns(p: Path, table: pd.DataFrame, model: object) -> None:
    """The meta-feature and pattern columns the fitted meta-model (and the neighbours'
    scaling, over the same features) was fitted on must all be in the table: a pack that
    lost one would propose from other inputs, and measure other distances, without a word."""
    if not isinstance(model, dict):
        return  # no meta-model: said below
    names = [model.get("feature_names", []), model.get("pattern_names", [])]
    if not all(isinstance(n, list) for n in names):
        raise ConfigError(f"{p}: the knowledge pack's meta-model is damaged (its feature or "
                          "pattern names are not a list)")
    needed = [*names[0], *names[1]]
    missing = [str(c) for c in needed if c not in table.columns]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ConfigError(f"{p}: the knowledge pack lacks the column '{missing[0]}'{more} "
                          "its meta-model was fitted on")


# -- the fitted proposer ---------------------------------------------------------------------------
def _proposer(pack: Pack) -> Proposer:
    key = pack.digest()
    if key not in _RESTORED:
        meta = pack.meta()
        where = f"{pack.path}: " if pack.path else ""
        try:
            model = MetaModel.restore(meta, pack.metamodel)
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"{where}the knowledge pack's meta-model is damaged "
                              f"({type(err).__name__}: {err})") from None
        _RESTORED[key] = Proposer(metamodel=model, miner=pack.miner()).fit(meta)
    return _RESTORED[key]


_RESTORED: dict[str, Proposer] = {}  # per process, by pack digest
