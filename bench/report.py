"""Benchmark results: rows, goals, the printed table and the JSON file."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

QUIRE = ("quire", "quire-watched", "quire-sqlite", "quire-pg")


@dataclass
class Row:
    scenario: str
    size: int
    system: str
    status: str  # "ok", "unavailable: <reason>" or "failed: <reason>"
    value: float | None = None
    unit: str = ""
    higher_is_better: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.value is not None


@dataclass
class Goal:
    text: str
    measured: float | None
    target: str
    met: bool | None  # None: could not be measured
    note: str = ""


class Results:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def get(self, scenario: str, size: int, system: str) -> Row | None:
        for r in self.rows:
            if (r.scenario, r.size, r.system) == (scenario, size, system):
                return r
        return None

    def ratio(self, scenario: str, size: int, a: str, b: str) -> float | None:
        ra, rb = self.get(scenario, size, a), self.get(scenario, size, b)
        if ra is None or rb is None or not ra.ok or not rb.ok or not rb.value:
            return None
        return (ra.value or 0.0) / rb.value


def _why(results: Results, scenario: str, size: int, *systems: str) -> str:
    reasons = []
    for s in systems:
        r = results.get(scenario, size, s)
        if r is None:
            reasons.append(f"{s}: not run")
        elif not r.ok:
            reasons.append(f"{s}: {r.status}")
    return "; ".join(reasons)


def goals(results: Results, cfg: dict[str, Any]) -> list[Goal]:
    """The goals of issues 7 and 16, evaluated on this run's rows (never on remembered numbers)."""
    out: list[Goal] = []

    def ratio_goal(text: str, scenario: str, size: int, a: str, b: str, *, limit: float,
                   at_least: bool) -> None:
        v = results.ratio(scenario, size, a, b)
        met = None if v is None else (v >= limit if at_least else v <= limit)
        target = f"{'≥' if at_least else '≤'} {limit:g}"
        out.append(Goal(text, v, target, met, "" if v is not None else
                        _why(results, scenario, size, a, b)))

    def abs_goal(text: str, scenario: str, size: int, system: str, limit: float,
                 unit: str = "MB") -> None:
        r = results.get(scenario, size, system)
        v = r.value if r is not None and r.ok else None
        out.append(Goal(text, v, f"< {limit:g} {unit}", None if v is None else v < limit,
                        "" if v is not None else _why(results, scenario, size, system)))

    # goal: ≥ 0.35 on SQLite, ≥ 0.25 on PostgreSQL (same number of server processes)
    for system, goal in (("quire-sqlite", 0.35), ("quire-pg", 0.25)):
        ratio_goal(f"publish rate {system} ÷ bare endpoint", "publish_rate", 1, system,
                   "bare-starlette", limit=goal, at_least=True)
    for size in cfg["clone_sizes"]:  # goal: ≤ 1.0 up to 20,000 entries, ≤ 1.5 above
        ratio_goal(f"clone {size:,}: Quire ÷ git clone", "clone", size, "quire", "git",
                   limit=1.0 if size <= 20000 else 1.5, at_least=False)
        ratio_goal(f"clone {size:,}: Quire ÷ PouchDB", "clone", size, "quire", "pouchdb",
                   limit=0.5, at_least=False)
    big = cfg["large"]
    ratio_goal(f"incremental (10 changed in {big:,}): Quire ÷ git pull", "incremental", big,
               "quire", "git", limit=1.0, at_least=False)
    # goal: the same with `quire watch` running; its no-op sync and status under 100 ms
    ratio_goal(f"incremental (10 changed in {big:,}) with a watcher: Quire ÷ git pull",
               "incremental", big, "quire-watched", "git", limit=1.0, at_least=False)
    abs_goal(f"no-op sync of {big:,} with a watcher (whole command)", "noop_sync", big,
             "quire-watched", 0.1, "s")
    abs_goal(f"status --json of {big:,} with a watcher (whole command)", "status", big,
             "quire-watched", 0.1, "s")
    abs_goal(f"hub peak RSS serving a snapshot of {big:,}", "hub_rss_snapshot", big, "quire",
             150)
    abs_goal(f"replica peak RSS cloning {big:,}", "replica_rss_clone", big, "quire", 250)
    # issue 33: without a watcher, the no-op's fixed cost against git pull with nothing to
    # pull, and its walk against git status on the same tree (both cold processes)
    small, large = cfg["noop_sizes"][0], cfg["noop_sizes"][-1]
    ratio_goal(f"no-op sync {small:,}, no watcher: Quire ÷ git pull", "noop_sync", small,
               "quire", "git", limit=3.0, at_least=False)
    ratio_goal(f"no-op sync {large:,}, no watcher: Quire ÷ git status", "noop_sync", large,
               "quire", "git-status", limit=2.0, at_least=False)
    return out


def format_value(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    if unit == "s":
        return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"
    if abs(v) >= 1000:
        return f"{v:,.0f} {unit}".strip()
    return f"{v:.3g} {unit}".strip() if abs(v) < 100 else f"{v:.1f} {unit}".strip()


REFERENCE = {"publish_rate": "bare-starlette"}
LABELS = {
    "publish_rate": "publish rate (1-entry batches, {clients} clients)",
    "bulk_publish": "bulk publish (batches of 500)",
    "clone": "clone (vault / working tree written)",
    "incremental": "incremental sync (10 changed)",
    "noop_sync": "sync with nothing to do",
    "status": "quire status --json",
    "hub_rss_snapshot": "hub peak RSS, serving a snapshot",
    "replica_rss_clone": "client peak RSS, cloning",
    "verify": "quire verify (store and vault against the signed head)",
    "clone_files": "clone, notes + attachments (files)",
    "incremental_files": "sync, 10 notes edited + 3 attachments (files)",
}


def print_table(results: Results, cfg: dict[str, Any], goal_list: list[Goal],
                title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, shutil.get_terminal_size((120, 40)).columns))
    t = Table(title=title, show_lines=False)
    for col in ("scenario", "entries", "system", "result", "Quire ÷ this", "status"):
        t.add_column(col, overflow="fold")
    last = None
    for r in results.rows:
        label = LABELS.get(r.scenario, r.scenario).format(**cfg)
        quire_sys = "quire"
        if r.scenario == "publish_rate":
            quire_sys = "quire-sqlite"
        ratio = ""
        if r.system not in QUIRE:
            v = results.ratio(r.scenario, r.size, quire_sys, r.system)
            ratio = "—" if v is None else (f"{v:.1%}" if r.scenario == "publish_rate"
                                           else f"{v:.2f}×")
        size = "" if r.scenario == "publish_rate" else f"{r.size:,}"
        t.add_row(label if label != last else "", size, r.system, format_value(r.value, r.unit),
                  ratio, r.status if len(r.status) < 60 else r.status[:57] + "…")
        last = label
    console.print(t)
    g = Table(title="goals")
    for col in ("goal", "measured", "target", "met", "note"):
        g.add_column(col, overflow="fold")
    for goal in goal_list:
        met = {True: "yes", False: "NO", None: "not measured"}[goal.met]
        g.add_row(goal.text, "—" if goal.measured is None else f"{goal.measured:.3g}",
                  goal.target, met, goal.note[:120])
    console.print(g)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    except OSError:
        pass

    def version(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    return {"cpu": cpu, "cores": os.cpu_count(), "memory_mb": mem,
            "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "os": platform.platform(), "python": platform.python_version(),
            "git": version(["git", "--version"]), "node": version(["node", "--version"])}


def write_json(path: Path, doc: dict[str, Any], results: Results, goal_list: list[Goal]) -> None:
    doc = dict(doc, results=[asdict(r) for r in results.rows],
               goals=[asdict(g) for g in goal_list])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")
