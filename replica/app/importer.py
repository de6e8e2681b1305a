"""``quire import DIR --space S [--dry-run]``: an existing folder of notes brought into a
joined space (docs/decisions.md D132 part 7, D145; docs/cli.md "Import and export").

    plan(DIR, space)      walk DIR as a sync walks a vault: the same built-in names and
                          ``DIR/.quireignore`` left out, the same name checks (shared/names.py),
                          each Markdown file read as an entry (UTF-8, front matter, its kind)
        └─► Plan: imported (with kind and how it was mapped; every other file an
            attachment, shared/attachments.py), ignored, refused (a code and a reason
            naming the file), present (already in the space, the same bytes), done
            (recorded by an earlier run)
    run(plan, ...)        in batches of at most BATCH_FILES files and BATCH_BYTES bytes:
                          Markdown first, then attachments; copy into the vault, sync
                          (which publishes them, uploading an attachment's bytes before
                          the batch that names it: replica/engine/blobs.py), record each
                          published (path, sha256) in the store's ``imported`` table

A run that is killed resumes where it stopped: what was recorded is skipped (``done``), a
file copied but not yet published is in the vault with the same bytes (``present``) and the
next sync publishes it once. An entry id is its path, so nothing is ever imported twice under
two names. A page already in the space with other bytes is refused (``exists``), never
overwritten. An attachment over the space's limit on one file is refused (``too_large``).

``QUIRE_TEST_IMPORT_KILL_AFTER=N`` (tests only) kills the process with SIGKILL right after
the N-th batch is recorded: the fault a resumed import must survive, injected on progress;
``QUIRE_TEST_IMPORT_BATCH_FILES=N`` makes batches of N files, so a small folder has several.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replica.vault import markdown as md
from replica.vault.ignore import IgnoreRules, conflict_copy
from shared import kinds
from shared.attachments import ATTACHMENT, too_large_message
from shared.entry import EntryError
from shared.names import collisions, name_problem

if TYPE_CHECKING:
    from replica.engine.report import SyncReport
    from replica.store.store import Store

BATCH_FILES = 500  # files a batch (the hub's batch bound, replica/engine/push.py)
BATCH_BYTES = 8 * 1024 * 1024  # bytes of files a batch (one file larger goes alone)
KILL_AFTER = "QUIRE_TEST_IMPORT_KILL_AFTER"
BATCH_FILES_ENV = "QUIRE_TEST_IMPORT_BATCH_FILES"  # tests only: fewer files a batch


@dataclass(frozen=True)
class Item:
    path: str  # relative to DIR, '/'-separated
    id: str
    kind: str
    mapped: str  # "front matter", "folder" or "default": how its kind was found
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "id": self.id, "kind": self.kind, "mapped": self.mapped,
                "size": self.size}


@dataclass
class Plan:
    source: Path
    imported: list[Item] = field(default_factory=list)  # to copy and publish
    present: list[Item] = field(default_factory=list)  # in the vault with these bytes
    done: list[Item] = field(default_factory=list)  # recorded by an earlier run
    ignored: list[dict[str, str]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"source": str(self.source),
                "imported": [i.to_json() for i in self.imported],
                "present": [i.to_json() for i in self.present],
                "done": len(self.done), "ignored": self.ignored, "refused": self.refused,
                "attachments": sum(i.kind == ATTACHMENT for i in self.imported)}


def _walk(source: Path, rules: IgnoreRules | None, plan: Plan) -> Iterator[tuple[str, Path]]:
    """(relative path, path) of every file of ``source`` a sync would look at; what it
    leaves out goes to ``plan.ignored`` and links to ``plan.refused``."""
    base = os.fspath(source)
    for folder, dirs, files in os.walk(base):
        rel = os.path.relpath(folder, base).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        for name in sorted(dirs):
            why = _left_out(prefix + name + "/", name, rules)
            if why is None and os.path.islink(os.path.join(folder, name)):
                plan.refused.append({"path": prefix + name + "/", "code": "symlink",
                                     "reason": "a symbolic link (not followed)"})
                why = "link"
            if why is not None:
                dirs.remove(name)
                if why != "link":
                    plan.ignored.append({"path": prefix + name + "/", "reason": why})
        dirs.sort()
        for name in sorted(files):
            path = prefix + name
            why = _left_out(path, name, rules)
            if why is not None:
                plan.ignored.append({"path": path, "reason": why})
            elif os.path.islink(os.path.join(folder, name)):
                plan.refused.append({"path": path, "code": "symlink",
                                     "reason": "a symbolic link (not followed)"})
            else:
                yield path, Path(folder, name)


def _left_out(path: str, name: str, rules: IgnoreRules | None) -> str | None:
    if name.startswith("."):
        return "hidden"
    if md.ignored(name):
        return "editor scratch or system file"
    if conflict_copy(path):
        return "the other side of a held conflict"
    if rules is not None and rules.ignores(path):
        return ".quireignore"
    return None


def file_of(vault: Path, item: Item) -> Path:
    """Where ``item`` goes in the vault: an attachment at its id, a page at its id + .md."""
    if item.kind == ATTACHMENT:
        return md.attachment_path(vault, item.id)
    return md.entry_path(vault, item.id)


def plan(source: Path, vault: Path, store: Store, live: set[str]) -> Plan:
    """What importing ``source`` into the space (its ``vault``, ``store`` and ``live``
    ids) would do; raises ``IgnoreFileInvalid`` for a bad ``source/.quireignore``."""
    from replica.engine.blobs import limit_txn
    from replica.store.importer import imported_txn

    out = Plan(source)
    with store.tx() as conn:
        done = imported_txn(conn)
        limit = limit_txn(conn)
    candidates: list[Item] = []
    for rel, path in _walk(source, IgnoreRules.load(source), out):
        item = _item(rel, path, vault, limit, out)
        if item is None:
            continue
        if (rel, item.sha256) in done:
            out.done.append(item)
            continue
        target = file_of(vault, item)
        if item.id in live or target.exists():
            have = target.read_bytes() if target.is_file() else None
            if have is not None and md.file_hash(have) == item.sha256:
                out.present.append(item)
            else:
                out.refused.append({"path": rel, "code": "exists", "reason": (
                    f"{rel}: the space already has {item.id} with other content "
                    "(not overwritten: rename one of them)")})
            continue
        candidates.append(item)
    clash = collisions([i.id for i in candidates], live)
    seen: dict[str, str] = {}
    for item in sorted(candidates, key=lambda i: i.kind == ATTACHMENT):  # Markdown first
        p = clash.get(item.id)
        if item.id in seen:  # x.png beside x.png.md: one id, the Markdown file is it
            out.refused.append({"path": item.path, "code": "name_collision", "of": item.id,
                                "reason": f"{item.path}: one name with {seen[item.id]} "
                                          f"(both are {item.id}); rename one"})
        elif p is None:
            seen[item.id] = item.path
            out.imported.append(item)
        else:
            out.refused.append({"path": item.path, **p.to_json(),
                                "reason": f"{item.path}: {p.reason}"})
    return out


def _item(rel: str, path: Path, vault: Path, limit: int, out: Plan) -> Item | None:
    """The file at ``rel`` as an item to import, or None (its refusal added to ``out``)."""
    markdown = md.is_markdown(rel)
    eid, why = md.path_entry_id(rel) if markdown else md.attachment_entry_id(rel)
    if eid is None:
        out.refused.append({"path": rel, "code": "invalid_entry_id", "reason": why})
        return None
    problem = name_problem(eid)
    if problem is not None:
        out.refused.append({"path": rel, **problem.to_json(), "reason": problem.reason})
        return None
    if not markdown:
        size = path.stat().st_size
        if limit and size > limit:
            out.refused.append({"path": rel, "code": "too_large", "size": size,
                                "reason": too_large_message(rel, size, limit)})
            return None
        data = path.read_bytes()
        return Item(rel, eid, ATTACHMENT, "file type", len(data), md.file_hash(data))
    data = path.read_bytes()
    try:
        entry, _ = md.read_entry(vault, eid, data)
    except EntryError as e:
        code = "not_utf8" if "UTF-8" in str(e) else "invalid_entry"
        out.refused.append({"path": rel, "line": e.line, "code": code,
                            "reason": f"{rel}:{e.line or 1}: {e}"})
        return None
    declared = kinds.declared_kind(entry.meta)
    kind = kinds.effective_kind(eid, entry.meta)
    mapped = "front matter" if declared else ("folder" if kind != kinds.PAGE else "default")
    return Item(rel, eid, kind, mapped, len(data), md.file_hash(data))


def batches(items: list[Item]) -> Iterator[list[Item]]:
    """``items`` cut into batches of at most BATCH_FILES files and BATCH_BYTES bytes."""
    most = min(BATCH_FILES, int(os.environ.get(BATCH_FILES_ENV) or BATCH_FILES))
    batch: list[Item] = []
    size = 0
    for item in items:
        if batch and (len(batch) >= most or size + item.size > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item.size
    if batch:
        yield batch


def run(p: Plan, vault: Path, store: Store, sync: Callable[[], SyncReport],
        progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Import what ``p`` plans: each batch copied into ``vault``, published by ``sync``,
    and recorded; the report (``to_json`` of the plan plus what was published and held)."""
    from replica.store.importer import record_txn
    from replica.vault.files import write_many

    kill_after = int(os.environ.get(KILL_AFTER) or 0)
    published: list[str] = []
    held: list[dict[str, Any]] = []
    todo = p.present + p.imported
    n = 0
    for batch in batches(todo):
        # temp files, one flush, renames, one flush (an fsync a file cost 7 ms each);
        # exclusive: a file someone put there meanwhile is left alone, never overwritten
        write_many(vault, [(t, (p.source / i.path).read_bytes()) for i in batch
                           if not (t := file_of(vault, i)).exists()], exclusive=True)
        left = _left_back(sync())
        with store.tx() as conn:
            ok = set(record_txn(conn, batch))
        published += [i.id for i in batch if i.id in ok]
        held += [dict(left.get(i.id) or {"code": "not_published", "reason": "not published "
                                         "by the sync (see quire status)"},
                      path=i.path, id=i.id) for i in batch if i.id not in ok]
        n += 1
        if progress is not None:
            progress(len(published), len(todo))
        if kill_after and n >= kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
    doc = p.to_json()
    doc.update(published=len(published), held=held, batches=n,
               already_imported=len(p.done))
    return doc


def _left_back(report: SyncReport) -> dict[str, dict[str, Any]]:
    """What a sync kept back, by entry id: refused by the rules, screened, a problem."""
    out: dict[str, dict[str, Any]] = {}
    for d in report.policy_denied:
        if d.get("id"):
            out[d["id"]] = {"code": "policy_denied", "reason": d.get("message", "")}
    for d in report.content_screened:
        out[d["id"]] = {"code": "content_screened", "reason": d.get("message", "")}
    for pr in report.problems:
        if pr.entry_id:
            out[pr.entry_id] = {"code": "problem", "reason": pr.reason}
    for eid in report.held:
        out.setdefault(eid, {"code": "held", "reason": "held in conflict"})
    return out
