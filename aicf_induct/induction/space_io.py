"""Space specs as the CLI takes them: a preset name, a YAML/JSON file, or a text form.

Text form: `;`-separated `axis=v1,v2,...` items, plus optional `sample=grid|random|sobol`,
`n=N` and `seed=S`:

    depth=1,2,3;width=32,64;act=relu,gelu;norm=none,layernorm;lr=1e-3,3e-3

File form (YAML or JSON): `{"axes": {"depth": [1, 2], ...}, "sample": "sobol", "n": 24,
"seed": 0}`. Axes are the `MLPSpec` fields (depth, width, profile, act, norm, norm_place,
residual, dropout), the recipe (optimizer, lr, weight_decay, batch_size), `family` (mlp, ftt,
resmlp, cnn) and the other families' keys as `<family>.<key>` (`ftt.d_token=16,32`); see
`aicf_induct.induction.space`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.induction.space import Candidate, Space, check_int
from aicf_induct.json_values import repeated_key
from aicf_induct.problems.splits import MAX_SEED

SAMPLES = ("grid", "random", "sobol")
SPEC_KEYS = ("axes", "sample", "n", "seed")


@dataclass(frozen=True)
class SpaceSpec:
    """A space and how to draw candidates from it."""

    space: Space
    sample: str = "grid"  # grid | random | sobol
    n: int | None = None  # candidates to draw; None: the whole grid
    seed: int = 0  # for random and sobol
    name: str = ""  # preset name or file path, for messages

    def __post_init__(self) -> None:
        if self.sample not in SAMPLES:
            raise ConfigError(f"unknown sample method '{self.sample}' "
                              f"(valid: {', '.join(SAMPLES)})")
        if self.n is not None and self.n < 1:
            raise ConfigError(f"space n must be >= 1, got {self.n}")
        if self.sample != "grid" and self.n is None:
            raise ConfigError(f"sample '{self.sample}' needs n, the number of candidates")

    def candidates(self) -> list[Candidate]:
        return self.space.sample(self.sample, self.n, self.seed)

    def describe(self) -> str:
        how = self.sample if self.n is None else f"{self.sample}, n={self.n}"
        if self.sample != "grid":
            how += f", seed={self.seed}"
        return f"{self.name or 'space'}: {len(self.space.axes)} axes, {self.space.size} " \
               f"points ({how})"


PRESETS: dict[str, dict[str, Any]] = {
    # 24 tabular-MLP candidates, Sobol-balanced over structure and recipe: shallow to
    # moderately deep, narrow to wide, every width profile, the common activations and
    # norms, residual and dropout on/off, two learning rates and batch sizes.
    "default24": {
        "axes": {
            "depth": [1, 2, 3, 4],
            "width": [32, 64, 128],
            "profile": ["constant", "funnel", "bottleneck"],
            "act": ["relu", "gelu", "tanh", "silu"],
            "norm": ["none", "layernorm", "batchnorm"],
            "residual": [False, True],
            "dropout": [0.0, 0.1],
            "lr": [1e-3, 3e-3],
            "batch_size": [32, 64],
        },
        "sample": "sobol", "n": 24, "seed": 0,
    },
    # The induction corpus's 32 candidates (`aicf-induct corpus build`): Sobol-balanced over
    # depth 1-4, width 16-512, every width profile, activation and norm, residual, dropout,
    # and the recipe's learning rate and weight decay (adam, batch 32). Seed 1505 is the
    # first whose 32 draws hold the default MLP with the default recipe, which the default
    # baseline needs (tests/induction/test_corpus.py checks it).
    "corpus32": {
        "axes": {
            "depth": [1, 2, 3, 4],
            "width": [16, 32, 64, 128, 256, 512],
            "profile": ["constant", "funnel", "bottleneck"],
            "act": ["relu", "gelu", "tanh", "silu"],
            "norm": ["none", "layernorm", "batchnorm"],
            "residual": [False, True],
            "dropout": [0.0, 0.1, 0.3],
            "lr": [3e-4, 1e-3, 3e-3],
            "weight_decay": [0.0, 1e-4],
        },
        "sample": "sobol", "n": 32, "seed": 1505,
    },
    # 32 candidates over the structure families: MLPs, FT-Transformers, ResNet-style MLPs and
    # image CNNs (a sweep trains cnn candidates on image-shaped problems only, digits), each
    # with its own axes, under two activations and learning rates (adam, batch 32). Seed 28
    # is the first whose 32 draws hold 7-9 of each family and every value of every axis of
    # the family it belongs to (tests/induction/test_space_families.py checks it).
    "families": {
        "axes": {
            "family": ["mlp", "ftt", "resmlp", "cnn"],
            "depth": [1, 2, 3],
            "width": [64, 128, 256],
            "norm": ["none", "layernorm"],
            "ftt.depth": [1, 2, 3],
            "ftt.d_token": [16, 32, 64],
            "ftt.heads": [2, 4],
            "ftt.attention_dropout": [0.0, 0.1],
            "resmlp.blocks": [1, 2, 3],
            "resmlp.d": [64, 128],
            "resmlp.d_hidden": [128, 256],
            "resmlp.dropout1": [0.0, 0.2],
            "cnn.stages": [1, 2],
            "cnn.channels": [8, 16, 32],
            "cnn.pool": ["max", "avg"],
            "act": ["relu", "gelu"],
            "lr": [1e-3, 3e-3],
        },
        "sample": "sobol", "n": 32, "seed": 28,
    },
    # 3 small candidates: smoke tests and demos.
    "tiny3": {"axes": {"depth": [1, 2], "width": [8, 16], "act": ["relu", "tanh"]},
              "sample": "random", "n": 3, "seed": 0},
}


def from_mapping(data: Mapping[str, Any], name: str = "") -> SpaceSpec:
    """A SpaceSpec from the file form's mapping."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{name or 'space'}: expected a mapping with 'axes'")
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise ConfigError(f"{name or 'space'}: unknown key(s) {', '.join(unknown)} "
                          f"(valid: {', '.join(SPEC_KEYS)})")
    axes = data.get("axes", {})
    if not isinstance(axes, Mapping):
        raise ConfigError(f"{name or 'space'}: 'axes' must map axis names to value lists")
    n, seed = data.get("n"), data.get("seed", 0)
    for key, v, low, high in (("n", n, 1, None), ("seed", seed, 0, MAX_SEED)):
        if v is None:
            continue
        try:
            check_int(key, v, low, high)
        except ConfigError as err:
            raise ConfigError(f"{name or 'space'}: {err}") from None
    return SpaceSpec(Space(axes), str(data.get("sample", "grid")), n, seed, name)


def parse_text(text: str) -> SpaceSpec:
    """The `;`-separated text form (see the module docstring)."""
    axes: dict[str, list[str]] = {}
    extra: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        key, eq, raw = (s.strip() for s in item.partition("="))
        if not eq or not raw:
            raise ConfigError(f"space item '{item}' needs values, as in '{key}=v1,v2'")
        if key in ("sample", "n", "seed"):
            if key in extra:
                raise ConfigError(f"space key '{key}' given twice")
            extra[key] = raw if key == "sample" else _int(key, raw)
        else:
            if key in axes:
                raise ConfigError(f"axis '{key}' given twice")
            axes[key] = [v.strip() for v in raw.split(",") if v.strip()]
    return from_mapping({"axes": axes, **extra}, name=text)


def _int(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"space key '{key}' must be an integer, got '{raw}'") from None


class _Keyed(dict[Any, Any]):
    """A mapping as a file wrote it, with the first key it names twice (and where): JSON
    and YAML loaders keep the last value silently, where the text form refuses a repeat."""

    twice: tuple[Any, str] | None = None  # (key, " (lines 2 and 4)" or "")


def _json_object(pairs: list[tuple[str, Any]]) -> _Keyed:
    out = _Keyed(pairs)
    if (key := repeated_key(pairs)) is not None:
        out.twice = (key, "")
    return out


@functools.cache
def _yaml_loader() -> type:
    """A safe YAML loader whose mappings are `_Keyed` (made once: it imports yaml)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_keyed(self, node: yaml.MappingNode) -> Iterator[_Keyed]:
            data = _Keyed()
            yield data
            lines: dict[Any, int] = {}
            for key_node, _ in node.value:  # before merge keys (<<) are flattened in
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # keys a merge brings in, the mapping may override: YAML's rule
                key, line = self.construct_object(key_node), key_node.start_mark.line + 1
                try:
                    if key in lines and data.twice is None:
                        where = f"line {line}" if lines[key] == line else \
                            f"lines {lines[key]} and {line}"
                        data.twice = (key, f" ({where})")
                    lines.setdefault(key, line)
                except TypeError:  # an unhashable key: construct_mapping refuses it
                    break
            data.update(self.construct_mapping(node))

    Loader.add_constructor("tag:yaml.org,2002:map", Loader.construct_keyed)
    return Loader


def _check_twice(data: Any, p: Path) -> None:
    """A key the file names twice, as the text form says it: "axis 'depth' given twice"."""
    if not isinstance(data, _Keyed):
        return
    if data.twice is not None:
        key, where = data.twice
        raise ConfigError(f"{p}: key '{key}' given twice{where}")
    axes = data.get("axes")
    if isinstance(axes, _Keyed) and axes.twice is not None:
        key, where = axes.twice
        raise ConfigError(f"{p}: axis '{key}' given twice{where}")
    for value in data.values():
        _check_twice(value, p)


def load_file(path: str | Path) -> SpaceSpec:
    import yaml

    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: a directory, not a space file")
    if not p.exists():  # one line naming it, as the other space errors (not a traceback)
        raise ConfigError(f"{p}: no such file")
    kind = "JSON" if p.suffix.lower() == ".json" else "YAML"
    try:
        text = p.read_text(encoding="utf-8")
        data = json.loads(text, object_pairs_hook=_json_object) if kind == "JSON" else \
            yaml.load(text, Loader=_yaml_loader())  # a SafeLoader, keys given twice kept
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
                          f"offset {err.start})") from None
    except (ValueError, yaml.YAMLError) as err:  # JSONDecodeError is a ValueError
        raise ConfigError(f"{p}: not valid {kind}: {' '.join(str(err).split())}") from None
    _check_twice(data, p)
    try:
        return from_mapping(data, name=str(p))
    except ConfigError as err:  # a value's error names its axis: and the file it is in
        if str(err).startswith(f"{p}:"):
            raise
        raise ConfigError(f"{p}: {err}") from None


def parse_space(spec: str | Path) -> SpaceSpec:
    """A preset name, a .yaml/.yml/.json file (a str or a Path), or the text form."""
    if isinstance(spec, Path):  # a file (a preset or text form is a str)
        if spec.suffix.lower() not in (".yaml", ".yml", ".json"):
            raise ConfigError(f"{spec}: a space file is named .yaml, .yml or .json")
        return load_file(spec)
    if not isinstance(spec, str):
        raise ConfigError(f"a space spec is a preset name, a space file or 'axis=v1,v2;...' "
                          f"text, got {type(spec).__name__}")
    s = spec.strip()
    if s in PRESETS:
        return from_mapping(PRESETS[s], name=s)
    if s.lower().endswith((".yaml", ".yml", ".json")):
        return load_file(s)
    if "=" not in s:
        raise ConfigError(f"unknown space '{s}': not a preset ({', '.join(PRESETS)}), "
                          "a .yaml/.json file, or 'axis=v1,v2;...'")
    return parse_text(s)
