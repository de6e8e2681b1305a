"""What one sync did (``SyncReport``): counts, the entries merged, held or changed locally,
the files it could not publish, the changes the space rules deny and those content
screening keeps back. Filled by the engine's parts (replica/engine/sync.py and the modules
it is made of), shown by every front end. And ``Progress``, how a long sync says how far it
got."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replica.vault import markdown as md

Progress = Callable[..., None]  # (done, total[, unit]): replica/cli/progressbar.py


@dataclass
class SyncReport:
    pulled: int = 0
    pushed: int = 0
    batches: int = 0
    snapshot: bool = False
    merged: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    local_changes: list[str] = field(default_factory=list)
    # local changes the space rules (as the head states them) deny: kept, not pushed
    policy_denied: list[dict[str, Any]] = field(default_factory=list)
    problems: list[md.Problem] = field(default_factory=list)
    # local changes content screening found a secret in (replica/engine/screened.py): kept, not
    # pushed; each with its findings (entry, version, line, rule, fingerprint)
    content_screened: list[dict[str, Any]] = field(default_factory=list)
    # local edits that write a version an admin reverted and blocked (replica/engine/push.py):
    # held as conflicts, kept in the vault
    version_blocked: list[dict[str, Any]] = field(default_factory=list)
    # entries held from after a restored backup, published again (replica/engine/restored.py)
    republished: list[str] = field(default_factory=list)
    # entries an admin purged from the space's history (replica/engine/purge.py): each with the
    # purge's reason and whether a local edit of it was kept (held)
    purged: list[dict[str, Any]] = field(default_factory=list)
    # entries that left this replica's scope (a read rule, or its chosen scope, narrowed:
    # replica/engine/scoped.py): each with whether a local edit of it was kept (held)
    left_scope: list[dict[str, Any]] = field(default_factory=list)
    # how the vault was looked at: "scan" (walked), "journal" (only where a running
    # watcher saw changes, replica/vault/journal_scan.py)
    scanned_by: str = ""
    # vault writes left journaled because their file was being written (modified within
    # the quiet period, or open for writing: replica/engine/ledger.py), entry id → when to
    # try again (Unix ms); the next flush carries them out
    waiting: dict[str, int] = field(default_factory=dict)
    # local deletes held back as a mass delete (replica/engine/mass_delete.py): {"count",
    # "of", "reason", "entries", "more"}; None: none held
    deletes_held: dict[str, Any] | None = None
    # what this sync pulled and pushed, batch by batch, page by page (replica/engine/
    # changes.py ``change``): the lines a sync and the watcher print
    changes: list[dict[str, Any]] = field(default_factory=list)
    # links that the entries this sync changed leave finding nothing (replica/app/
    # backlinks.py ``after_sync``): [{"page", "links": [target as written]}]
    dangling: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"pulled": self.pulled, "pushed": self.pushed, "batches": self.batches,
                "snapshot": self.snapshot, "merged": sorted(set(self.merged)),
                "held": sorted(set(self.held)), "local_changes": sorted(self.local_changes),
                "problems": [p.to_json() for p in self.problems],
                "policy_denied": list(self.policy_denied),
                "content_screened": list(self.content_screened),
                "version_blocked": list(self.version_blocked),
                "republished": sorted(set(self.republished)),
                "purged": list(self.purged), "left_scope": list(self.left_scope),
                "scanned_by": self.scanned_by,
                "vault_waiting": sorted(self.waiting), "deletes_held": self.deletes_held, "changes": list(self.changes),
                "dangling": list(self.dangling),
                "vault_retry_at": min(self.waiting.values()) if self.waiting else None}
