"""``quire doctor``: what is wrong with this machine's Quire setup, and how to fix each thing.

    home ──► key and credential files private (0600)? every other file of the home 0600
             and every folder 0700 (stores, claims, status files)?
    each hub ──► reachable? same signing key as the one pinned at join? clocks agree?
    each space ──► store and vault where the configuration says, store readable,
                   vault files against the store's record (a quick verify: stat only),
                   the last sync's error, the watcher (running? stopped? its last error)
    disk ──► room left where the home and each vault live

Every check reports ``ok`` or findings; a finding says what is wrong (``message``) and what
to do (``fix``, a command where there is one). Nothing is changed and nothing is published:
the hub is asked only ``GET /v1/hub``, anonymously. The checks are plain functions over the
home, so tests build a broken home and look at the findings.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from replica.cli import exitcodes
from replica.machine.home import Home, HubConfig, SpaceConfig
from replica.vault.presence import PRESENCE_FILE
from shared.humanize import duration, now_ms, when

ERROR, WARN, INFO = "error", "warn", "info"
SKEW_WARN_MS = 30_000  # DPoP proofs are refused beyond the hub's dpop_window (60 s default)
DISK_WARN_BYTES = 200 * 1024 * 1024
PROBE_TIMEOUT = 5.0
LISTED = 5  # entry ids named in one finding


@dataclass(frozen=True)
class Finding:
    check: str
    level: str  # error | warn | info
    subject: str  # the file, hub or space it is about
    message: str
    fix: str


@dataclass
class Report:
    checks: list[dict[str, Any]]
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not any(f.level in (ERROR, WARN) for f in self.findings)

    def exit_code(self) -> int:
        return exitcodes.OK if self.ok else exitcodes.ATTENTION

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": self.checks,
                "findings": [asdict(f) for f in self.findings]}


def _names(ids: list[str] | set[str]) -> str:
    ids = sorted(ids)
    more = f" and {len(ids) - LISTED} more" if len(ids) > LISTED else ""
    return ", ".join(ids[:LISTED]) + more


# ---------------------------------------------------------------- home


def check_permissions(home: Home) -> list[Finding]:
    """Device keys and credentials readable by others on this machine are a stolen device."""
    out = []
    for hub in home.hubs():
        for path in sorted(hub.dir.iterdir()):
            if not (path.suffix == ".pem" or path.name.startswith("credential")):
                continue
            if path.name.endswith(".tmp") or not path.is_file():
                continue
            mode = stat.S_IMODE(path.stat().st_mode)
            if mode & 0o077:
                out.append(Finding(
                    "permissions", ERROR, str(path),
                    f"{path.name} has mode {mode:04o}: other users of this machine can read "
                    "this device's " + ("key" if path.suffix == ".pem" else "credential"),
                    f"chmod 600 {path}"))
    return out + check_home_private(home)


def _is_secret(path: Path) -> bool:
    return path.parent.parent.name == "hubs" and (
        path.suffix == ".pem" or path.name.startswith("credential"))


def check_home_private(home: Home) -> list[Finding]:
    """Every folder and file of the home (hubs and spaces: stores, claims, status files)
    that other users of the machine can reach: one finding with one command that fixes
    them all (a home made by an older release, or copied with ``cp -r``)."""
    if not home.root.is_dir():
        return []
    open_to_others: list[Path] = []
    tops = [home.root / "hubs", home.root / "spaces"]
    if stat.S_IMODE(home.root.stat().st_mode) & 0o077:
        open_to_others.append(home.root)
    for top in tops:
        for folder, _dirs, files in os.walk(top):
            d = Path(folder)
            if stat.S_IMODE(d.lstat().st_mode) & 0o077:
                open_to_others.append(d)
            for name in files:
                f = d / name
                try:
                    st = f.lstat()
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and not _is_secret(f) and (
                        stat.S_IMODE(st.st_mode) & 0o077):
                    open_to_others.append(f)
    if not open_to_others:
        return []
    names = [str(p.relative_to(home.root)) if p != home.root else "the home folder"
             for p in open_to_others]
    return [Finding(
        "permissions", ERROR, str(home.root),
        f"{len(open_to_others)} file(s) and folder(s) of this Quire home can be read by "
        f"other users of this machine ({_names(names)}): the stores hold every entry of "
        "their spaces", f"chmod -R go-rwx {shlex.quote(str(home.root))}")]


# ---------------------------------------------------------------- hubs


def probe_hub(hub: HubConfig, transport: Any = None) -> tuple[dict[str, Any], int | None]:
    from replica.hubclient.client import HubClient

    with HubClient(hub.url, transport=transport, timeout=PROBE_TIMEOUT) as c:
        return c.hub_info_and_clock()


def chains_to(hub: HubConfig, transport: Any = None) -> bool:
    """Does the hub's key rotation chain lead from the pinned key to the key it offers?
    (Checked on a copy of the pin: the doctor changes nothing.)"""
    from replica.hubclient.client import HubClient
    from replica.trust.keypin import KeyPin
    from shared.errors import QuireError

    pin = KeyPin(hub.public_key, hub.hub_id, tuple(hub.key_history))
    try:
        with HubClient(hub.url, transport=transport, timeout=PROBE_TIMEOUT, pin=pin) as c:
            return c.follow_key_chain()
    except QuireError:
        return False


def check_hub(hub: HubConfig, *, now: Callable[[], int] = now_ms,
              probe: Callable[[HubConfig], tuple[dict[str, Any], int | None]] = probe_hub
              ) -> list[Finding]:
    from shared.errors import QuireError

    try:
        sent = now()
        info, hub_ms = probe(hub)
        back = now()
    except QuireError as e:
        return [Finding("hub", ERROR, hub.url, f"the hub does not answer: {e.message}",
                        f"check that the hub runs and {hub.url} reaches it (curl "
                        f"{hub.url}/healthz); syncs wait and retry meanwhile, nothing local "
                        "is lost")]
    out = []
    offered = info.get("public_key")
    rotated = offered != hub.public_key and chains_to(hub, transport=None)
    if rotated:
        out.append(Finding(
            "hub_key", INFO, hub.url,
            f"the hub rotated its key to {info.get('key_id') or offered}; the rotation "
            f"chain leads there from the key pinned here ({hub.key_id or hub.public_key})",
            "nothing to do: the next sync follows it and pins the new key"))
    elif offered != hub.public_key:
        out.append(Finding(
            "hub_key", ERROR, hub.url,
            f"the hub at {hub.url} signs with another key ({info.get('key_id') or offered}) "
            f"than the one pinned when this machine joined ({hub.key_id or hub.public_key}): "
            "every head and receipt it sends will be refused (hub_unverified)",
            "do not sync; ask the hub's operator whether the key was replaced (a restored "
            "hub needs its own hub_key.pem back, docs/operations.md) or whether "
            f"{hub.url} now points at another hub; if the hub's old key was lost, check "
            f"the new key id with the operator and run 'quire repin {hub.url} --hub-key "
            "KEY_ID'"))
    if hub_ms is not None:
        skew = hub_ms - (sent + back) // 2
        if abs(skew) > SKEW_WARN_MS + (back - sent):
            side = "ahead of" if skew > 0 else "behind"
            out.append(Finding(
                "clock", WARN, hub.url,
                f"the hub's clock is {duration(skew)} {side} this machine's: the hub refuses "
                "signed requests more than a minute off, and expiry times read wrong",
                "set this machine's clock from the network (timedatectl set-ntp true, or "
                "your platform's time settings)"))
    return out


# ---------------------------------------------------------------- spaces


def check_space(home: Home, space: SpaceConfig) -> list[Finding]:
    """Store and vault where the configuration says, and agreeing (by file stat only)."""
    name = space.name
    out = []
    store_ok = space.store_path.is_file()
    if not store_ok:
        out.append(Finding(
            "store", ERROR, name,
            f"the store of {name} is not at {space.store_path} (moved or deleted): without "
            "it this replica cannot tell its own edits from the hub's",
            f"move it back to {space.store_path}; if it is lost, move the vault aside and "
            f"join again with a new invite: quire join URL --invite CODE --vault "
            f"{space.vault}, then copy your edits in and run quire sync"))
    if not space.vault.is_dir():
        out.append(Finding(
            "vault", ERROR, name, f"the vault of {name} is not at {space.vault} (moved or "
                                  "deleted): syncs refuse it (vault_missing), nothing is "
                                  "published. If it was moved, move it back; else write it "
                                  "again from the store (edits that were only in the lost "
                                  "folder are gone)",
            _rebuild(space)))
    if not store_ok or not space.vault.is_dir():
        return out
    try:
        recorded, check = _store_record(space.store_path)
    except sqlite3.Error as e:
        return out + [Finding("store", ERROR, name, f"the store of {name} cannot be read: {e}",
                              f"move {space.store_path} aside and join again (see "
                              "docs/replica.md); keep the vault: your edits are there")]
    if check != "ok":
        out.append(Finding("store", ERROR, name, f"the store of {name} is damaged: {check}",
                           f"move {space.store_path} aside and join again; keep the vault"))
    from replica.vault import ignore
    from replica.vault import walk as vaultscan
    from shared.errors import IgnoreFileInvalid

    hashes = {r[0]: r[3] for r in recorded}
    try:
        changes = ignore.apply(space.vault,
                               vaultscan.scan_changes(space.vault, [r[:3] for r in recorded]))
    except IgnoreFileInvalid as e:
        return out + [Finding("vault", ERROR, name, e.message,
                              f"fix or remove {e.details['file']}, then: quire sync {name}")]
    # a stat that differs (or was not recorded) is only a candidate, as in a sync: the
    # file's bytes decide
    edited = [fs.entry_id for fs in changes.changed
              if _hash_of(fs.path) != hashes.get(fs.entry_id)]
    if edited:
        out.append(Finding(
            "vault", INFO, name,
            f"{len(edited)} file(s) of {name} changed in the vault since the store last "
            f"recorded them ({_names(edited)}): not published yet",
            f"quire sync {name} (or keep a watcher running: quire watch {name})"))
    if changes.missing and len(changes.missing) == len(recorded) and not (
            space.vault / PRESENCE_FILE).is_file():
        out.append(Finding(  # replica/vault/presence.py: the next sync refuses it
            "vault", ERROR, name,
            f"the vault of {name} at {space.vault} holds none of the space's "
            f"{len(recorded)} recorded pages and no {PRESENCE_FILE} (an empty folder, a disk "
            "not mounted?): syncs refuse it (vault_missing). If the disk is not mounted, "
            "mount it; else write the pages again from the store",
            _rebuild(space)))
    elif changes.missing:
        from replica.engine.mass_delete import Threshold

        held = Threshold.from_env().exceeded(len(changes.missing), len(recorded))
        then = (f"the next sync holds these deletes ({held} at once) until quire sync "
                f"{shlex.quote(name)} --confirm-deletes" if held else
                "the next sync deletes them for everyone")
        out.append(Finding(
            "vault", WARN, name,
            f"{len(changes.missing)} file(s) of {name} the store recorded are gone from the "
            f"vault ({_names(changes.missing)}): {then}. To put them back (a file that "
            "differs is never overwritten):",
            _rebuild(space)))
    for p in changes.problems:
        out.append(Finding("vault", WARN, name,
                           f"{p.path}{':' + str(p.line) if p.line else ''}: {p.reason}",
                           "fix or remove the file; it is never published as it is"))
    return out


def _rebuild(space: SpaceConfig) -> str:
    """The command that writes the vault's recorded pages back (replica/app/rebuild.py)."""
    return f"quire vault rebuild {shlex.quote(space.name)}"


def _hash_of(path: Path) -> str | None:
    from replica.vault.markdown import file_hash

    try:
        return file_hash(path.read_bytes())
    except OSError:
        return None


def _store_record(path: Path) -> tuple[list[tuple[str, int | None, int | None, str]], str]:
    """The store's record of vault files (id, size, mtime, hash) and SQLite's quick_check,
    read only."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        rows = conn.execute("SELECT id, file_size, file_mtime_ns, file_hash FROM entries"
                            " WHERE file_hash IS NOT NULL").fetchall()
        return [tuple(r) for r in rows], str(check)
    finally:
        conn.close()


def check_last_sync(space: SpaceConfig) -> list[Finding]:
    try:
        saved = json.loads(space.status_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    err = saved.get("last_error")
    if not err:
        return []
    code = exitcodes.for_error_code(err.get("code"))
    fix = {exitcodes.UNREACHABLE: "it retries by itself under a watcher; check the hub "
                                  "check above, then: quire sync " + space.name,
           exitcodes.REFUSED: "the hub refuses this device or replica: ask an admin (quire "
                              "admin devices list); after a new invite: quire join URL "
                              "--invite CODE (local edits are kept)",
           exitcodes.UNVERIFIED: "do not sync until the hub's key is explained (see the "
                                 "hub_key check)"}.get(code, f"quire sync {space.name} and "
                                                               "read the error it prints")
    return [Finding("last_sync", WARN, space.name,
                    f"the last sync of {space.name} failed {when(err.get('at'))}: "
                    f"{err.get('code')}: {err.get('message')}", fix)]


def check_watcher(space: SpaceConfig) -> list[Finding]:
    from replica.ipc.status_file import watcher_status

    w = watcher_status(space)
    if w is None:
        return [Finding("watcher", INFO, space.name,
                        f"no watcher keeps {space.name} current: edits publish on quire sync",
                        f"quire watch {space.name} (or, as a service: quire watch --install)")]
    out = []
    if not w.get("running"):
        out.append(Finding(
            "watcher", WARN, space.name,
            f"the watcher of {space.name} is not running (it stopped "
            f"{when(w.get('updated_at') or w.get('last_success'))})",
            f"quire watch {space.name} (as a service: systemctl --user restart "
            f"quire-watch@{space.name})"))
    e = w.get("last_error")
    if e and (w.get("state") in ("backoff", "suspended") or not w.get("running")):
        out.append(Finding("watcher", WARN, space.name,
                           f"the watcher's last error: {e.get('code')}: {e.get('message')}",
                           "see the hub and last_sync checks; the watcher retries with "
                           "backoff"))
    return out


# ---------------------------------------------------------------- disk


def check_disk(paths: list[Path]) -> list[Finding]:
    out, seen = [], set()
    for p in paths:
        while not p.exists() and p != p.parent:
            p = p.parent
        dev = os.stat(p).st_dev
        if dev in seen:
            continue
        seen.add(dev)
        free = shutil.disk_usage(p).free
        if free < DISK_WARN_BYTES:
            out.append(Finding("disk", WARN, str(p),
                               f"{free // (1024 * 1024)} MiB free where {p} lives: a sync "
                               "that cannot write stops with the vault as it was",
                               f"free space on that file system (df -h {p})"))
    return out


# ---------------------------------------------------------------- all


def diagnose(home: Home, *, probe: Callable[[HubConfig], tuple[dict[str, Any], int | None]]
             = probe_hub, now: Callable[[], int] = now_ms) -> Report:
    checks: list[dict[str, Any]] = []
    findings: list[Finding] = []

    def record(check: str, subject: str, found: list[Finding]) -> None:
        checks.append({"check": check, "subject": subject, "ok": not any(
            f.level in (ERROR, WARN) for f in found), "findings": len(found)})
        findings.extend(found)

    record("permissions", str(home.root), check_permissions(home))
    for hub in home.hubs():
        record("hub", hub.url, check_hub(hub, now=now, probe=probe))
    spaces = home.spaces()
    for space in spaces:
        record("space", space.name, check_space(home, space))
        record("last_sync", space.name, check_last_sync(space))
        record("watcher", space.name, check_watcher(space))
    record("disk", str(home.root), check_disk([home.root, *(s.vault for s in spaces)]))
    return Report(checks, findings)


def human(report: Report) -> str:
    mark = {ERROR: "error", WARN: "warn", INFO: "note"}
    lines = []
    for c in report.checks:
        if c["findings"] == 0:
            lines.append(f"ok     {c['check']:<12} {c['subject']}")
    for f in report.findings:
        lines.append(f"{mark[f.level]:<6} {f.check:<12} {f.subject}: {f.message}")
        lines.append(f"{'':<6} {'':<12} fix: {f.fix}")
    lines.append("nothing to fix" if report.ok else
                 f"{sum(f.level in (ERROR, WARN) for f in report.findings)} thing(s) to fix")
    return "\n".join(lines)
