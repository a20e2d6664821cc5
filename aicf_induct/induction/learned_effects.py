"""Where a run's learned rewrite proposer comes from: the knowledge pack's rewrite table
pooled with a warehouse's rewrite history (`RewriteEffects`, `rewrite_effects.py`). Its own
module because it reads the pack, and the pack builds a `RewriteEffects` of its own table
(`Pack.rewrite_effects`): here the two meet without importing each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from aicf_induct.induction.pack import DEFAULT_PACK, Pack, load_pack
from aicf_induct.induction.rewrite_effects import RewriteEffects
from aicf_induct.induction.rewrite_history import load_rewrite_history
from aicf_induct.induction.rewrite_table import aggregate, combine_tables


def learned_effects(pack: Any = None, warehouse_root: str | Path | None = None,
                    **params: Any) -> tuple[RewriteEffects, dict[str, Any]]:
    """The learned rewrite proposer of a knowledge pack's rewrite table (a loaded `Pack`, a
    path, or None: the shipped pack, when there is one) pooled with the rewrite history of
    the warehouse at `warehouse_root` (when given and present); and where its evidence came
    from. A missing shipped pack is no error: the warehouse's history alone is used."""
    tables: list[pd.DataFrame] = []
    source: dict[str, Any] = {"pack": None, "pack_decisions": 0, "warehouse": None,
                              "warehouse_decisions": 0}
    if isinstance(pack, str | Path) and Path(pack).resolve() == DEFAULT_PACK \
            and not DEFAULT_PACK.is_file():
        pack = None  # the shipped pack, named (a service's default setting), but not built yet
    if pack is not None or DEFAULT_PACK.is_file():
        p = pack if isinstance(pack, Pack) else load_pack(pack)
        tables.append(p.rewrites)
        source["pack"] = str(p.path) if p.path else None
        source["pack_decisions"] = int(p.rewrites["n"][p.rewrites["level"] == 0].sum()) \
            if len(p.rewrites) else 0
    if warehouse_root is not None and Path(warehouse_root).is_dir():
        history = load_rewrite_history(warehouse_root)
        if len(history):
            tables.append(aggregate(history))
        source["warehouse"] = str(warehouse_root)
        source["warehouse_decisions"] = len(history)
    return RewriteEffects.from_table(combine_tables(*tables), **params), source
