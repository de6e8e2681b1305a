"""Write a full run's tables into README.md (the "Performance" section).

    python -m bench.readme [RESULTS.json]     # default: the newest full run in bench/results

``make bench`` calls it after a full run with every system, so the README always shows the
last full run on this machine; quick and partial runs never touch it. Only the text between
the two markers below is replaced: the prose around it (what the numbers mean) is written by
hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.report import LABELS, format_value

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS_DIR = ROOT / "bench" / "results"
START = "<!-- bench:start (written by python -m bench.readme; edit the prose around it) -->"
END = "<!-- bench:end -->"


def newest_full() -> Path | None:
    runs = sorted(p for p in RESULTS_DIR.glob("*-full.json"))
    return runs[-1] if runs else None


def commit_of_tree() -> str:
    """The checked-out commit (with ``+dirty`` when the tree has changes): what a run ran."""
    try:
        def git(*a: str) -> str:
            return subprocess.run(["git", *a], cwd=ROOT, text=True, capture_output=True,
                                  timeout=10).stdout.strip()
        sha = git("rev-parse", "--short", "HEAD")
        return sha + ("+dirty" if sha and git("status", "--porcelain", "-uno") else "")
    except (OSError, subprocess.TimeoutExpired):
        return ""


def render(doc: dict[str, Any], name: str) -> str:
    m, cfg = doc["machine"], doc["config"]
    at = f" at commit {doc['commit']}" if doc.get("commit") else ""
    lines = [
        f"`make bench`{at} ({name}, {doc['mode']}, {doc['elapsed_s']:.0f} s) on {m['cpu']}, "
        f"{m['cores']} cores, {m['memory_mb'] // 1024} GiB, Python {m['python']}, {m['git']}, "
        f"Node {m['node']}; load average at start {m.get('load_avg_at_start')}"
        f"{_fs_words(cfg.get('filesystem'))}.",
        "",
        "| scenario | entries | system | result | status |",
        "|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        label = LABELS.get(r["scenario"], r["scenario"]).format(**cfg)
        size = "" if r["scenario"] == "publish_rate" else str(r["size"])
        lines.append(f"| {label} | {size} | {r['system']} | {format_value(r['value'], r['unit'])} "
                     f"| {r['status']} |")
    lines += ["", "| goal | measured | target | met |", "|---|---|---|---|"]
    for g in doc["goals"]:
        met = {True: "yes", False: "NO", None: "not measured"}[g["met"]]
        v = "—" if g["measured"] is None else f"{g['measured']:.3g}"
        lines.append(f"| {g['text']} | {v} | {g['target']} | {met} |")
    return "\n".join(lines)


def _fs_words(fs: dict[str, Any] | None) -> str:
    """Where the run wrote (bench/workfs.py): the file system decides clone figures."""
    if not fs:
        return ""
    journal = {True: "with a journal", False: "without a journal"}.get(fs.get("journal"), "")
    what = {"journal": "a fresh loop-mounted", "tmp": "the temp folder's",
            "path": "a given folder's"}.get(fs.get("kind", ""), "")
    return f"; files on {what} {fs.get('type', '?')} {journal}".rstrip()


def update(results: Path, readme: Path = README) -> bool:
    """Replace the marked block; False (and nothing written) when the markers are missing."""
    text = readme.read_text("utf-8")
    if START not in text or END not in text:
        return False
    doc = json.loads(results.read_text("utf-8"))
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    block = render(doc, results.stem)
    readme.write_text(f"{head}{START}\n{block}\n{END}{tail}", "utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else newest_full()
    if path is None:
        print("no full run in bench/results; run `make bench` first", file=sys.stderr)
        return 2
    if not update(path):
        print(f"README.md has no bench markers ({START!r} … {END!r})", file=sys.stderr)
        return 1
    print(f"README.md: performance tables from {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
