"""The IR of a run's snapshots as a graph, and what each rewrite changed.

Works on the canonical JSON (`aicf.ir/1`) as the warehouse stores it: nodes in topological
order, each with `id`, `op`, `inputs`, `attrs`. Node ids are kept by the rewrites (a widened
layer keeps its id), so a diff by id says which nodes a rewrite added, removed or changed.
The layout is layered: a node's column is its longest path from an input.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

# node colour by its state against the previous snapshot
COLOURS = {"same": "#8da0cb", "added": "#1b9e77", "changed": "#e6ab02"}


@dataclass
class Diff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: dict[str, list[str]] = field(default_factory=dict)  # id -> "attr: a → b" lines
    unreadable: str = ""  # which snapshot's IR holds no well-formed nodes: no diff

    def state(self, node_id: str) -> str:
        return "added" if node_id in self.added else (
            "changed" if node_id in self.changed else "same")

    def lines(self) -> list[str]:
        if self.unreadable:
            return [f"the IR of {self.unreadable} cannot be read (not aicf.ir nodes): no diff"]
        out = [f"+ {n}" for n in self.added] + [f"− {n}" for n in self.removed]
        out += [f"~ {n}: {'; '.join(c)}" for n, c in self.changed.items()]
        return out


def _well_formed(n: Any) -> bool:
    """A node as the drawing reads it: a string id, a list of string inputs, a dict of
    attributes (the service stores what remote clients send)."""
    return isinstance(n, dict) and isinstance(n.get("id"), str) \
        and isinstance(n.get("inputs", []), list) \
        and all(isinstance(i, str) for i in n.get("inputs", [])) \
        and isinstance(n.get("attrs") or {}, dict)


def _nodes(ir: Any) -> list[dict[str, Any]]:
    """The IR's nodes; none when one of them is not well formed (the IR cannot be read)."""
    nodes = ir.get("nodes") if isinstance(ir, dict) else None
    if not isinstance(nodes, list) or not all(_well_formed(n) for n in nodes):
        return []
    return nodes


def diff(before: Any, after: Any) -> Diff:
    """Nodes of `after` not in `before`, of `before` not in `after`, and those whose op,
    inputs or attributes differ (each difference as a line)."""
    b = {n["id"]: n for n in _nodes(before)}
    a = {n["id"]: n for n in _nodes(after)}
    d = Diff(added=[i for i in a if i not in b], removed=[i for i in b if i not in a])
    for i in a.keys() & b.keys():
        changes = [f"{k}: {b[i].get(k)} → {a[i].get(k)}" for k in ("op", "inputs")
                   if b[i].get(k) != a[i].get(k)]
        ba, aa = b[i].get("attrs") or {}, a[i].get("attrs") or {}
        changes += [f"{k}: {ba.get(k)} → {aa.get(k)}" for k in sorted(ba.keys() | aa.keys())
                    if ba.get(k) != aa.get(k)]
        if changes:
            d.changed[i] = changes
    d.changed = {i: d.changed[i] for i in a if i in d.changed}  # graph order
    return d


def layout(ir: Any) -> dict[str, tuple[float, float]]:
    """(x, y) per node id: x the longest path from an input, y the rank within that column."""
    depth: dict[str, int] = {}
    for n in _nodes(ir):
        depth[n["id"]] = 1 + max((depth.get(i, 0) for i in n.get("inputs") or []), default=-1)
    seen: dict[int, int] = {}
    pos = {}
    for node_id, x in depth.items():
        y = seen.get(x, 0)
        seen[x] = y + 1
        pos[node_id] = (float(x), -float(y))
    return pos


def _label(n: dict[str, Any]) -> str:
    attrs = n.get("attrs") or {}
    if n.get("op") == "linear":
        return f"linear {attrs.get('out_features', '')}"
    return str(n.get("op"))


def _hover(n: dict[str, Any], d: Diff) -> str:
    lines = [f"<b>{html.escape(str(n['id']))}</b> ({html.escape(str(n.get('op')))})"]
    lines += [f"{html.escape(str(k))}: {html.escape(str(v))}"
              for k, v in (n.get("attrs") or {}).items()]
    state = d.state(n["id"])
    if state != "same":
        lines.append(f"<i>{state}</i>")
        lines += [html.escape(c) for c in d.changed.get(n["id"], [])]
    return "<br>".join(lines)


def _traces(ir: Any, d: Diff, visible: bool) -> list[dict[str, Any]]:
    pos = layout(ir)
    ex: list[float | None] = []
    ey: list[float | None] = []
    nodes = _nodes(ir)
    for n in nodes:
        for i in n.get("inputs") or []:
            if i in pos:
                ex += [pos[i][0], pos[n["id"]][0], None]
                ey += [pos[i][1], pos[n["id"]][1], None]
    edges = {"type": "scatter", "x": ex, "y": ey, "mode": "lines", "hoverinfo": "skip",
             "line": {"color": "#aaa", "width": 1.5}, "showlegend": False, "visible": visible}
    pts = {"type": "scatter", "x": [pos[n["id"]][0] for n in nodes],
           "y": [pos[n["id"]][1] for n in nodes], "mode": "markers+text",
           "text": [_label(n) for n in nodes], "textposition": "top center",
           "hovertext": [_hover(n, d) for n in nodes], "hoverinfo": "text",
           "showlegend": False, "visible": visible,
           "marker": {"size": 18, "color": [COLOURS[d.state(n["id"])] for n in nodes],
                      "line": {"width": 1, "color": "#333"}}}
    return [edges, pts]


def snapshot_title(s: dict[str, Any], d: Diff) -> str:
    head = f"step {s['step']}: {s['reason']}, {s['param_count']} parameters"
    if not _nodes(s["ir"]):
        return head + " — its IR cannot be read (not aicf.ir nodes)"
    parts = [f"{len(d.added)} added"] if d.added else []
    parts += [f"{len(d.removed)} removed ({', '.join(d.removed)})"] if d.removed else []
    parts += [f"{len(d.changed)} changed"] if d.changed else []
    return head + (" — " + ", ".join(parts) if parts else "")


def diffs(snapshots: list[dict[str, Any]]) -> list[Diff]:
    """Each snapshot's diff against the one before it (the first against nothing changed)."""
    out = []
    for k, s in enumerate(snapshots):
        if not k:
            out.append(Diff())
        elif not _nodes(s["ir"]) or not _nodes(snapshots[k - 1]["ir"]):
            which = s if not _nodes(s["ir"]) else snapshots[k - 1]
            out.append(Diff(unreadable=f"the snapshot at step {which['step']}"))
        else:
            out.append(diff(snapshots[k - 1]["ir"], s["ir"]))
    return out


def ir_figure(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """One graph per snapshot (a dropdown picks it; the last shown first), its nodes coloured
    by what changed since the snapshot before. A plain figure dict (see run_charts)."""
    ds = diffs(snapshots)
    last = len(snapshots) - 1
    data = [t for k, (s, d) in enumerate(zip(snapshots, ds, strict=True))
            for t in _traces(s["ir"], d, visible=k == last)]
    buttons = []
    for k, (s, d) in enumerate(zip(snapshots, ds, strict=True)):
        mask = [j // 2 == k for j in range(2 * len(snapshots))]
        buttons.append({"label": f"step {s['step']} {s['reason']}", "method": "update",
                        "args": [{"visible": mask}, {"title.text": snapshot_title(s, d)}]})
    layout = {
        "title": {"text": snapshot_title(snapshots[last], ds[last]) if snapshots else "no IR"},
        "updatemenus": [{"buttons": buttons, "active": last, "x": 1.0, "xanchor": "right",
                         "y": 1.15, "yanchor": "top"}] if snapshots else [],
        "height": 360, "margin": {"t": 70, "b": 20, "l": 20, "r": 20},
        "xaxis": {"visible": False}, "yaxis": {"visible": False}}
    return {"data": data, "layout": layout}
