"""User-facing errors: each carries a one-line message the CLI and the service print as is."""

from __future__ import annotations


class AicfError(Exception):
    """Base of every error a user can cause; the CLI prints `str(err)` and exits 2."""


class IRError(AicfError):
    """Malformed or inconsistent IR. Names the node (when there is one) and the problem."""

    def __init__(self, problem: str, node: str | None = None) -> None:
        self.node = node
        self.problem = problem
        where = f"node '{node}': " if node is not None else ""
        super().__init__(f"invalid IR: {where}{problem}")


class ShapeError(IRError):
    """A shape or dtype rule failed for a node."""


class DataError(AicfError):
    """A dataset that cannot be used as given (missing target, text column, empty file, ...)."""


class ConfigError(AicfError):
    """A bad model spec, space spec, option value or request."""


class ExecutionError(AicfError):
    """A kernel failed while running a plan; the message names the IR node it ran for."""
