"""A declarative space of IR structures: structure × training recipe.

A `Space` holds axes, each a list of values; a point picks one value per axis and gives a
`Candidate` (a model spec plus a `Recipe`). The `family` axis (default `mlp`) picks the
structure family: an MLP reads the `MLPSpec` axes (depth, width, ...); `ftt`, `resmlp` and
`cnn` read the axes named `<family>.<key>` after their spec's keys (`ftt.d_token`,
`resmlp.blocks`, `cnn.channels`, ...); `act` applies to every family. A space without a
`family` axis is the MLP space it always was: its candidates and their draws are unchanged.
`cnn` candidates train on image-shaped problems only (`Candidate.applies_to`). MLP candidates
are canonicalised so that points that build the same network share one key (norm placement
without a norm, a width profile with one hidden layer, ... change nothing), and enumeration
drops such repeats (of any family): `grid()` in axis
order, `random(n, seed)` and `sobol(n, seed)` as n distinct candidates, deterministic under
the seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.families import (
    FAMILIES,
    POOLS,
    RES_NORMS,
    AnySpec,
    parse_spec,
    spec_graph,
)
from aicf_induct.frontend.specs import (
    ACTS,
    MIN_WIDTH,
    NORM_PLACES,
    NORMS,
    PROFILES,
    MLPSpec,
)
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph

OPTIMIZERS = ("sgd", "adam", "adamw")
MODEL_AXES = tuple(f.name for f in dataclasses.fields(MLPSpec))
RECIPE_AXES = ("optimizer", "lr", "weight_decay", "batch_size")
FAMILY_NAMES = ("mlp", *FAMILIES)
# `<family>.<key>` for every key of the other families' specs but `act` (shared), with its type
FAMILY_KINDS: dict[str, type] = {
    f"{fam}.{f.name}": {"int": int, "float": float}.get(str(f.type), str)
    for fam, cls in FAMILIES.items() for f in dataclasses.fields(cls) if f.name != "act"}
FAMILY_AXES = tuple(FAMILY_KINDS)
AXES = MODEL_AXES + RECIPE_AXES + ("family",) + FAMILY_AXES
ALIASES = {"opt": "optimizer", "wd": "weight_decay", "bs": "batch_size", "place": "norm_place",
           "activation": "act"}
# Axes whose values come from a closed set; the others are numbers or booleans.
CHOICES: dict[str, tuple[str, ...]] = {"act": ACTS, "norm": NORMS, "norm_place": NORM_PLACES,
                                       "profile": PROFILES, "optimizer": OPTIMIZERS,
                                       "family": FAMILY_NAMES, "cnn.pool": POOLS,
                                       "resmlp.norm": RES_NORMS}
KINDS: dict[str, type] = {"depth": int, "width": int, "residual": bool, "dropout": float,
                          "lr": float, "weight_decay": float, "batch_size": int,
                          **FAMILY_KINDS}
RANDOM_TRIES = 20  # draws per wanted candidate before random/sobol give up on finding more
MAX_GRID = 1_000_000  # points a grid may enumerate; past it a space is sampled (random, sobol)


@dataclass(frozen=True)
class Recipe:
    """The training recipe a candidate is trained with (the rest comes from the sweep)."""

    optimizer: str = "adam"  # sgd | adam | adamw
    lr: float = 1e-3
    weight_decay: float = 0.0  # L2 for sgd/adam, decoupled for adamw
    batch_size: int = 32

    def to_string(self) -> str:
        return (f"optimizer={self.optimizer},lr={self.lr!r},weight_decay={self.weight_decay!r},"
                f"batch_size={self.batch_size}")


@dataclass(frozen=True)
class Candidate:
    """One point of a space: a structure and its recipe."""

    spec: AnySpec
    recipe: Recipe = Recipe()

    @property
    def structure_key(self) -> str:
        """Problem-independent and readable: the spec string, `|`, the recipe."""
        return f"{self.spec.to_string()}|{self.recipe.to_string()}"

    @property
    def key(self) -> str:
        """A short stable id of `structure_key` (16 hex digits)."""
        return hashlib.sha256(self.structure_key.encode()).hexdigest()[:16]

    def graph(self, n_in: int, n_out: int) -> Graph:
        return spec_graph(self.spec, n_in, n_out)

    def applies_to(self, problem_name: str) -> bool:
        """Whether the candidate trains on this problem: cnn needs an image-shaped one."""
        return applies_to(self.structure_key, problem_name)

    def fingerprint(self, n_in: int, n_out: int) -> str:
        """The IR fingerprint; it depends on the problem's input and output sizes."""
        return fingerprint(self.graph(n_in, n_out))

    def canonical(self) -> Candidate:
        if not isinstance(self.spec, MLPSpec):
            return self
        return Candidate(canonical_spec(self.spec), self.recipe)


def canonical_spec(spec: MLPSpec) -> MLPSpec:
    """`spec` with the fields that cannot change its network set to their defaults."""
    d = MLPSpec()
    if spec.depth == 0:  # a linear model: only the head
        return dataclasses.replace(d, depth=0)
    changes: dict[str, Any] = {}
    if spec.norm == "none":
        changes["norm_place"] = d.norm_place
    if spec.depth == 1 or spec.width <= MIN_WIDTH:
        changes["profile"] = d.profile  # every profile gives the same widths
    return dataclasses.replace(spec, **changes)


def convert(axis: str, raw: object) -> object:
    """A value for `axis` from text or JSON/YAML; ConfigError naming the axis and the value."""
    kind = KINDS.get(axis, str)
    if kind is bool and isinstance(raw, bool):
        return raw
    if kind is bool:
        text = str(raw).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"bad value {raw!r} for axis '{axis}': expected true or false")
    expected = "an integer" if kind is int else "a number" if kind is float else "text"
    if isinstance(raw, bool):  # (YAML's true is a bool: said as the text form says it)
        raise ConfigError(f"bad value {raw!r} for axis '{axis}': expected {expected}")
    try:
        if kind is int:
            f = float(raw)  # type: ignore[arg-type]
            if not f.is_integer():
                raise ValueError
            value: object = int(f)
        elif kind is float:
            x = float(raw)  # type: ignore[arg-type]
            if not math.isfinite(x):
                raise ValueError
            value = x
        else:
            value = str(raw).strip()
    except (TypeError, ValueError):
        raise ConfigError(f"bad value {raw!r} for axis '{axis}': expected {expected}") \
            from None
    valid = CHOICES.get(axis)
    if valid is not None and value not in valid:
        raise ConfigError(f"bad value {raw!r} for axis '{axis}' (valid: {', '.join(valid)})")
    return value


def axis_name(name: str) -> str:
    key = ALIASES.get(name.strip(), name.strip())
    if key not in AXES:
        raise ConfigError(f"unknown axis '{name}' (valid: {', '.join(AXES)}; aliases: "
                          f"{', '.join(f'{a}={b}' for a, b in ALIASES.items())})")
    return key


def check_candidate(c: Candidate) -> None:
    """ConfigError unless `c`'s recipe makes a TrainConfig (lr > 0: the optimizers take 0,
    which trains nothing) that builds an optimizer (the spec checks itself)."""
    from aicf_induct.runtime.trainer import TrainConfig

    r = c.recipe
    TrainConfig(batch_size=r.batch_size, optimizer=r.optimizer, lr=r.lr,
                weight_decay=r.weight_decay).make_optimizer()


class Space:
    """Axes (name → values, in the given order); axes not given keep their default value."""

    def __init__(self, axes: Mapping[str, Sequence[object]]) -> None:
        if isinstance(axes, str):
            raise ConfigError(f"Space takes a mapping of axis -> values, not the string "
                              f"{axes!r}: a preset name, space file or 'axis=v1,v2;...' text "
                              f"is read by aicf_induct.induction.parse_space({axes!r}), "
                              "whose .space is the Space")
        if not isinstance(axes, Mapping):
            raise ConfigError(f"Space takes a mapping of axis -> values (e.g. "
                              f"{{'depth': [1, 2]}}), got {type(axes).__name__}")
        self.axes: dict[str, tuple[object, ...]] = {}
        for name, values in axes.items():
            key = axis_name(name)
            if key in self.axes:
                raise ConfigError(f"axis '{key}' given twice")
            if isinstance(values, str | bytes) or not isinstance(values, Iterable):
                values = [values]
            vals = tuple(dict.fromkeys(convert(key, v) for v in values))  # drop repeats
            if not vals:
                raise ConfigError(f"axis '{key}' has no values")
            self.axes[key] = vals
        self._check_families()
        self._check_values()

    def _check_families(self) -> None:
        """An axis that no family of the space reads would be dropped from every point (one
        candidate where the user asked for several): named instead."""
        families = sorted(map(str, self.axes.get("family", ("mlp",))))
        for key in self.axes:
            owner = key.partition(".")[0] if key in FAMILY_AXES else \
                "mlp" if key in MODEL_AXES and key != "act" else None
            if owner is None or owner in families:
                continue
            theirs = [f"{f}.{key}" for f in families if f"{f}.{key}" in FAMILY_AXES]
            hint = f" (did you mean {' or '.join(theirs)}?)" if theirs else ""
            raise ConfigError(f"axis '{key}' is read by family {owner}, which the space's "
                              f"family axis ({', '.join(families)}) does not hold{hint}")

    def _check_values(self) -> None:
        # each value alone, on top of the defaults: a bad one is named before any sweep runs
        for name, values in self.axes.items():
            family = {"family": name.partition(".")[0]} if name in FAMILY_AXES else {}
            for v in values:
                try:
                    check_candidate(self.candidate({**family, name: v}))
                except ConfigError as err:
                    raise ConfigError(f"axis '{name}' value {v!r}: {err}") from None

    @property
    def size(self) -> int:
        """Points in the grid, repeats included (`len(grid())` is at most this)."""
        return math.prod(len(v) for v in self.axes.values())

    def candidate(self, point: Mapping[str, object]) -> Candidate:
        """The candidate at a point (axis -> value; axes left out keep their defaults): the
        family's spec from the model axes, the recipe from the recipe axes, an MLP in
        canonical form so that equal models get one key."""
        recipe = {k: v for k, v in point.items() if k in RECIPE_AXES}
        family = point.get("family", "mlp")
        if family == "mlp":
            model = {k: v for k, v in point.items() if k in MODEL_AXES}
            return Candidate(MLPSpec(**model), Recipe(**recipe)).canonical()  # type: ignore[arg-type]
        prefix = f"{family}."
        keys = {k[len(prefix):]: v for k, v in point.items() if k.startswith(prefix)}
        if "act" in point:
            keys["act"] = point["act"]
        spec = FAMILIES[str(family)](**keys)  # type: ignore[arg-type]
        return Candidate(spec, Recipe(**recipe))  # type: ignore[arg-type]

    def at(self, index: Sequence[int]) -> Candidate:
        """The candidate at one value index per axis."""
        return self.candidate({k: vals[i] for (k, vals), i in zip(self.axes.items(), index,
                                                                   strict=True)})

    def points(self) -> Iterator[Candidate]:
        """Every point of the grid as a candidate, lazily, repeats included (two points
        may build one canonical model): what `grid` de-duplicates."""
        for combo in itertools.product(*self.axes.values()):
            yield self.candidate(dict(zip(self.axes, combo, strict=True)))

    def grid(self) -> list[Candidate]:
        """The distinct candidates of the whole grid, in axis order; a ConfigError past
        `MAX_GRID` points (each is built and hashed: sample a large space instead)."""
        if self.size > MAX_GRID:  # enumerated, canonicalised and hashed point by point
            raise ConfigError(f"the grid has {self.size:,} points (at most {MAX_GRID:,}): "
                              "sample it (sample=sobol;n=N)")
        return _distinct(self.points())

    def random(self, n: int, seed: int = 0) -> list[Candidate]:
        """n distinct candidates drawn uniformly (fewer when the space has fewer)."""
        n, seed = _draw_args(n, seed)
        if n >= self.size:  # all of them: the draws could only find the grid, slowly
            return self.grid()
        rng = np.random.default_rng(seed)
        lens = [len(v) for v in self.axes.values()]
        draws = (self.at([int(rng.integers(k)) for k in lens]) for _ in _tries(n))
        return _distinct(draws, n)

    def sobol(self, n: int, seed: int = 0) -> list[Candidate]:
        """n distinct candidates from a scrambled Sobol sequence over the axes (each unit
        coordinate picks the value `floor(u * len(axis))`): better balanced than random."""
        from scipy.stats import qmc

        n, seed = _draw_args(n, seed)
        lens = [len(v) for v in self.axes.values()]
        if not lens or n >= self.size:  # all of them, as `random`
            return self.grid()[:n]
        sampler = qmc.Sobol(d=len(lens), scramble=True, seed=seed)

        def draws() -> Iterator[Candidate]:
            block = 1 << max(n - 1, 1).bit_length()  # powers of two keep Sobol balanced
            for _ in _tries(n, block):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    u = sampler.random(block)
                for row in u:
                    yield self.at([min(int(x * k), k - 1) for x, k in zip(row, lens,
                                                                          strict=True)])

        return _distinct(draws(), n)

    def sample(self, method: str, n: int | None = None, seed: int = 0) -> list[Candidate]:
        """The candidates a space spec draws: "grid" (all, or its first n), "random" or
        "sobol" (n distinct, seeded); what a sweep trains."""
        if method == "grid":
            if n is not None:  # before the grid is built: grid[:-1] would drop its last
                n = check_int("n", n, 1)
            grid = self.grid()
            return grid if n is None else grid[:n]
        if n is None:
            raise ConfigError(f"sample '{method}' needs n, the number of candidates")
        if method == "random":
            return self.random(n, seed)
        if method == "sobol":
            return self.sobol(n, seed)
        raise ConfigError(f"unknown sample method '{method}' (valid: grid, random, sobol)")

    def __repr__(self) -> str:
        return f"Space({self.axes!r})"


def check_int(key: str, v: object, low: int, high: int | None = None) -> int:
    """`v` as an int in low..high, or a ConfigError naming `key` (as a space spec's `n` and
    `seed` are refused): a bool, a float or a str is no count, and n <= 0 drew one candidate
    (or the grid less its last) where none were asked."""
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise ConfigError(f"'{key}' must be an integer, got {v!r}")
    if v < low or (high is not None and v > high):  # a seed: what NumPy and SciPy take
        bound = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ConfigError(f"'{key}' must be {bound}, got {v}")
    return int(v)


def _draw_args(n: object, seed: object) -> tuple[int, int]:
    """`random`'s and `sobol`'s n and seed, checked as a space spec's are."""
    from aicf_induct.problems.splits import MAX_SEED  # here: its module imports scikit-learn

    return check_int("n", n, 1), check_int("seed", seed, 0, MAX_SEED)


def _tries(n: int, per: int = 1) -> range:
    # (n is below the space's size here: `random` and `sobol` take the grid otherwise)
    return range(max(RANDOM_TRIES * n // per, 1) + 1)


def _distinct(cands: Iterable[Candidate], n: int | None = None) -> list[Candidate]:
    out: dict[str, Candidate] = {}
    for c in cands:
        out.setdefault(c.key, c)
        if n is not None and len(out) >= n:
            break
    return list(out.values())


def candidate_of(structure_key: str) -> Candidate:
    """The space candidate a structure key (`mlp:...|optimizer=..,lr=..,...`, or another
    family's spec) names."""
    spec, _, recipe = structure_key.partition("|")
    f = dict(kv.split("=", 1) for kv in recipe.split(",") if "=" in kv)
    d = Recipe()
    return Candidate(parse_spec(spec), Recipe(
        optimizer=f.get("optimizer", d.optimizer), lr=float(f.get("lr", d.lr)),
        weight_decay=float(f.get("weight_decay", d.weight_decay)),
        batch_size=int(float(f.get("batch_size", d.batch_size)))))


def applies_to(structure_key: str, problem_name: str) -> bool:
    """Whether the candidate of this structure key trains on the problem (the sweep's rule:
    a cnn needs an image-shaped problem, `problems.image_side`)."""
    from aicf_induct.problems import image_side

    return not structure_key.startswith("cnn:") or image_side(problem_name) is not None
