"""The replica's service layer: open a joined space's replica (home, hub client, store) and
run join, sync, status and resolve on it. Every front end calls these and only parses
input and prints output:

    quire CLI (replica/cli/main.py) ──┐
    watcher (replica/watch/) ─────────┼──► service ──► sync engine (replica/engine/sync.py)
    MCP server (replica/mcp/) ────────┤             ├─► conflict desk (replica/conflicts/desk.py)
    demo (replica/cli/demo.py) ───────┘             └─► home, store, hub client

Nothing here prints; progress is a pair of callables the caller passes (a terminal bar or
nothing). Heavy modules (the HTTP client, SQLAlchemy, the sync engine, key handling) are
imported inside the functions that need them: a ``quire`` process pays for what it uses.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replica.machine.home import (
    Home,
    HubConfig,
    SpaceConfig,
    private_dir,
    space_lock,
    write_json,
)
from shared.errors import (
    Forbidden,
    IgnoreFileInvalid,
    InvalidRequest,
    NotJoined,
    QuireError,
    SpaceNotFound,
)

if TYPE_CHECKING:
    from replica.conflicts.desk import Desk
    from replica.engine.report import SyncReport
    from replica.engine.sync import Replica
    from replica.hubclient.client import HubClient
    from replica.store.store import Store
    from replica.trust.keypin import KeyPin

# (update(done, total), stop()): a progress display, or (None, no-op) for none
Progress = tuple[Callable[..., None] | None, Callable[[], None]]
NO_PROGRESS: Progress = (None, lambda: None)

# space_deleted: raised by a sync only once the hub-signed statement verified (replica/engine/deleted.py)
SUSPENDING = ("unauthorized", "forbidden", "not_found", "space_deleted")


def error_doc(e: QuireError) -> dict[str, Any]:
    return {"error": {"code": e.code, "message": e.message, "details": e.details}}


def now_ms() -> int:
    import time

    return int(time.time() * 1000)


# ---------------------------------------------------------------- opening


def open_client(hub: HubConfig, transport: Any = None, *, device_only: bool = False,
                timeout: float | None = None) -> HubClient:
    """A client with this device's DPoP auth flow (replica/hubclient/auth.py); an agent given a
    delegated token (``quire delegate create``, or the one ``quire mcp --agent`` holds)
    runs with QUIRE_DELEGATION_TOKEN set. ``device_only``: the device's own credential
    (minting a delegation needs it); ``timeout``: seconds, for a request that may give up
    early (the client's default otherwise)."""
    from replica.hubclient.auth import auth_for, delegated
    from replica.hubclient.client import HubClient
    from replica.machine.credentials import CredentialFile

    creds = CredentialFile(hub.credential_path, hub.key_path)
    auth = auth_for(hub.key_path, creds)
    if auth is None:
        raise NotJoined(f"no device credential for hub {hub.url}; join it again")
    token = None if device_only else os.environ.get("QUIRE_DELEGATION_TOKEN")
    if token:
        auth = delegated(hub.key_path, token, auth.tokens.htu_base)
    if timeout is not None:
        return HubClient(hub.url, auth=auth, pin=key_pin(hub), transport=transport,
                         timeout=timeout)
    return HubClient(hub.url, auth=auth, pin=key_pin(hub), transport=transport)


def key_pin(hub: HubConfig) -> KeyPin:
    """The hub key pinned in ``hub``; a rotation the client follows is saved to hub.json
    (re-read first: another process of this machine may have followed it already)."""
    from replica.trust.keypin import KeyPin

    def save(pin: KeyPin, links: list[Any]) -> None:
        fresh = Home(hub.dir.parent.parent).hub(hub.hub_id) or hub
        seen = {s.get("seq") for s in fresh.key_chain}
        fresh.key_chain += [link.wire for link in links if link.seq not in seen]
        fresh.key_history = list(pin.history)
        fresh.public_key, fresh.key_id = pin.current, links[-1].key_id
        fresh.save()
        hub.public_key, hub.key_id = fresh.public_key, fresh.key_id
        hub.key_history, hub.key_chain = fresh.key_history, fresh.key_chain

    return KeyPin(hub.public_key, hub.hub_id, tuple(hub.key_history), save)


def follow_pin(known: HubConfig, offered: str) -> None:
    """The hub describes itself with another key than the pinned one (a join or login
    again): follow its rotation chain to that key (saved), or refuse it
    (``hub_key_unchained``)."""
    if known.public_key == offered:
        return
    from replica.hubclient.client import HubClient

    with HubClient(known.url, pin=key_pin(known)) as c:
        c.follow_key_chain()


def hub_url(url: str) -> str:
    """``replica/hubclient/client.py`` ``hub_url``: a URL as typed, made the client's."""
    from replica.hubclient.client import hub_url as normal

    return normal(url)


def describe_hub(url: str) -> tuple[dict[str, Any], str, str]:
    """``GET /v1/hub`` (no credential): the document, the hub id and the key it offers."""
    from replica.hubclient.client import HubClient
    from shared.errors import NotFound, TransferFailed

    with HubClient(url) as anon:
        try:
            info = anon.hub_info()
        except (NotFound, TransferFailed) as e:
            if isinstance(e, TransferFailed) and "not JSON" not in e.message:
                raise  # unreachable: exit 4, the message names the URL
            raise not_a_hub(url, e) from e
    if not isinstance(info, dict):
        raise not_a_hub(url, None)
    hub_id, public_key = info.get("hub_id"), info.get("public_key")
    if not isinstance(hub_id, str) or not isinstance(public_key, str):
        raise not_a_hub(url, None)
    return info, hub_id, public_key


def not_a_hub(url: str, e: QuireError | None) -> InvalidRequest:
    """Something answers at ``url``, but not as a Quire hub (a wrong path or port)."""
    why = f" ({e.message})" if e is not None else ""
    return InvalidRequest(f"{url} does not answer as a Quire hub (GET {url}/v1/hub{why}): "
                          "check the URL, e.g. http://127.0.0.1:8470; nothing was changed",
                          {"reason": "not_a_hub", "url": url})


def repin(home: Home, url: str, fingerprint: str) -> dict[str, Any]:
    """``quire repin URL --hub-key KEY_ID``: trust the key the hub offers now, by hand, when
    no rotation chain leads to it (its old key was lost). ``fingerprint`` (its key id, or
    the whole public key) must be what the hub's admin read out of band from 'quire hub
    record'; the keys pinned before stay trusted for what they signed."""
    from shared.signing import key_id

    url = hub_url(url)
    info, hub_id, offered = describe_hub(url)
    known = home.hub(hub_id)
    if known is None:
        raise NotJoined(f"this machine has not joined the hub at {url}; join it instead")
    if fingerprint not in (key_id(offered), offered):
        raise InvalidRequest(f"the hub at {url} offers key {key_id(offered)}, not "
                             f"{fingerprint}; nothing was changed",
                             {"reason": "fingerprint_mismatch", "offered": key_id(offered)})
    doc = {"hub": {"id": hub_id, "url": url}, "key_id": key_id(offered),
           "previous": known.key_id or key_id(known.public_key)}
    if known.public_key == offered:
        return dict(doc, changed=False)
    known.key_history = [known.public_key, *known.key_history]
    known.public_key, known.key_id = offered, key_id(offered)
    known.save()
    return dict(doc, changed=True)


# provenance fields a batch carries (signed with it), from the environment of the process
# that publishes: QUIRE_AGENT, QUIRE_MODEL, QUIRE_CLIENT, QUIRE_SESSION, QUIRE_TOOL
PROVENANCE_ENV = {"agent": "QUIRE_AGENT", "model": "QUIRE_MODEL", "client": "QUIRE_CLIENT",
                  "session": "QUIRE_SESSION", "tool": "QUIRE_TOOL"}


def provenance_from_env() -> dict[str, str] | None:
    """The provenance of this process's batches. Its ``agent`` is the principal that sends
    them, the agent of an exported delegation (QUIRE_DELEGATION_TOKEN), never QUIRE_AGENT
    alone: the hub refuses a batch naming another agent than its caller (hub/guard.py
    ``check_provenance``), and a device's batch names none."""
    from replica.hubclient.auth import token_agent

    out = {k: os.environ[v][:200] for k, v in PROVENANCE_ENV.items() if os.environ.get(v)}
    out.pop("agent", None)
    agent = token_agent(os.environ.get("QUIRE_DELEGATION_TOKEN"))
    if agent:
        out["agent"] = agent[:200]
    return out or None


def hub_for(home: Home, ref: str | None) -> HubConfig:
    """The joined hub named by URL or id, or the only one."""
    return home.hub_by_url(ref) if ref else home.default_hub()


def open_replica(home: Home, space: SpaceConfig, progress: Any = None
                 ) -> tuple[Replica, HubClient, Store]:
    """The sync engine of ``space`` with its own client and store (the caller closes both)."""
    from replica.engine.sync import Replica
    from replica.store.store import Store
    from shared.signing import load_private

    hub = home.hub(space.hub_id)
    if hub is None:
        raise NotJoined(f"space {space.name} belongs to a hub this machine no longer knows")
    client = open_client(hub)
    client.replica_id = space.replica_id  # named on every pull: a revoked one is refused
    store = Store(space.store_path)
    rep = Replica(space_id=space.space_id, replica_id=space.replica_id, vault=space.vault,
                  store=store, client=client, key=load_private(hub.key_path),
                  progress=progress, provenance=provenance_from_env())
    return rep, client, store


def open_desk(home: Home, space: SpaceConfig) -> Desk:
    """The conflict desk of ``space`` (packets, claims, resolutions) as this device."""
    from replica.conflicts.desk import Desk, Principal

    hub = home.hub(space.hub_id)
    return Desk(space, principal=Principal(hub.user_id if hub else None,
                                           hub.device_id if hub else None))


# ---------------------------------------------------------------- status


# status.json as this process last wrote or read it, by path: (its stat, the document).
# A watcher rewrites it at every publication it applies and read it back each time first.
_SAVED: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def read_saved_status(space: SpaceConfig) -> dict[str, Any]:
    """What the last sync wrote (``status.json``); {} before the first, and when the file
    is unreadable (it is written without an fsync: a power cut may leave it empty). Read
    again only when its stat moved (every write renames a new file over it: a new inode)."""
    return _saved_status(space, mine=False)


def _saved_status(space: SpaceConfig, *, mine: bool) -> dict[str, Any]:
    """``read_saved_status``; ``mine``: the kept document itself, not a copy (the caller
    only reads it: ``write_status``, at every change a watcher applies)."""
    path = space.status_path
    key = _stat_key(path)
    kept = _SAVED.get(os.fspath(path))
    if key is not None and kept is not None and kept[0] == key:
        return kept[1] if mine else copy.deepcopy(kept[1])
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    if key is not None and key == _stat_key(path):  # not replaced while it was read
        _SAVED[os.fspath(path)] = (key, copy.deepcopy(doc))
    return doc


def refusal(err: dict[str, Any] | None) -> dict[str, Any] | None:
    """Why the hub no longer accepts this replica, from the last sync error (or None)."""
    if not err or err.get("code") not in SUSPENDING:
        return None
    reason = (err.get("details") or {}).get("reason") or (
        "not_a_member" if err["code"] == "not_found" else err["code"])
    return {"reason": reason, "message": err.get("message"), "since": err.get("at")}


def _ignore_refusal(vault: Path) -> IgnoreFileInvalid | None:
    """What a sync would refuse with for the vault's ``.quireignore``, or None."""
    from replica.vault.ignore import IgnoreRules

    try:
        IgnoreRules.load(vault)
    except IgnoreFileInvalid as e:
        return e
    return None


def status_doc(space: SpaceConfig, *, scan: bool = True, store: Store | None = None
               ) -> dict[str, Any]:
    """The space's status from its store, its vault and the last sync's status file.

    ``unpublished``: local changes the next sync would publish (replica/engine/pending.py), from
    the store and the same size-and-mtime vault scan a sync starts with; ``scan=False``
    reads the store alone (``scanned: false``), and ``problems`` are then the last sync's.
    ``store``: one already open (a watcher serving the command), else it is opened here."""
    from replica.engine.pending import unpublished_txn
    from replica.engine.screened import vault_findings
    from replica.store import store as st
    from replica.store.store import Store

    saved = read_saved_status(space)
    store = store or Store(space.store_path)
    try:
        journal = None
        from replica.vault import presence as vault_presence

        gone = vault_presence.missing(Path(space.vault), store) if scan else None
        scan = scan and gone is None  # a vault that is gone: the store alone, and say so
        bad_ignore = _ignore_refusal(Path(space.vault)) if scan else None
        scan = scan and bad_ignore is None  # as a sync would refuse it: not scanned
        if scan:  # a running watcher's journal, when valid, stands in for the walk
            from replica.ipc import journal as watcher_journal

            journal = watcher_journal.read(space)
        # every read in one snapshot: a sync (the watcher's) committing meanwhile cannot
        # make the counts disagree with the lists (an outbox of 1 and nothing unpublished)
        with store.snapshot() as conn:
            head = st.head_txn(conn)
            conflicts = st.conflicts_txn(conn)
            local = unpublished_txn(conn, Path(space.vault), scan=scan, journal=journal)
            outbox = local.outbox  # the store's dirty entries, of that same read
            batches = len(st.outbox_txn(conn))
            waiting = sorted(st.pending_ids_txn(conn))
            digest = st.read_digest_txn(conn)
            usage = st.get_meta_txn(conn, "usage")  # as the hub said at the last sync
        doc = {
            "space": {"id": space.space_id, "name": space.name},
            "replica_id": space.replica_id,
            "vault": str(space.vault),
            "head": head.to_json() if head else None,
            "outbox": outbox,
            "outbox_batches": batches,
            "unpublished": local.to_json(),
            # vault writes not carried out yet: their file was being written when the last
            # sync ended (the next sync, or the watcher, writes them: docs/replica.md)
            "vault_waiting": waiting,
            "scanned": local.scanned,
            "conflicts": [{"entry": c.entry_id, "fields": c.fields,
                           "theirs_author": c.theirs_author, "theirs_seq": c.theirs_seq}
                          for c in conflicts],
            # a scan finds the problems the next sync would report (with a journal: those
            # its watcher's last scan found, but where files changed since, checked now);
            # without one, the last sync's
            "problems": ([p.to_json() for p in local.problems] if local.scanned
                         else list(saved.get("problems", []))),
            "policy_denied": saved.get("policy_denied", []),
            # the edits the next sync would keep back for their content (secrets): read
            # from the vault when scanned, else as the last sync found them
            "content_screened": (vault_findings(Path(space.vault), local.entries)
                                 if local.scanned else saved.get("content_screened", [])),
            "last_error": saved.get("last_error"),
            "last_success": saved.get("last_success"),
            "last_sync": saved.get("last_sync"),
            "role": saved.get("role", space.role),
            "store_digest": digest,
            "usage": usage,
            # the last sync held local deletes back as a mass delete, still unpublished
            # (replica/engine/mass_delete.py): quire sync --confirm-deletes publishes them
            "deletes_held": saved.get("deletes_held") if outbox else None,
        }
        if gone is not None:  # what the next sync would refuse with (replica/vault/presence.py)
            doc["vault_missing"] = {"message": gone.message, **gone.details}
        if bad_ignore is not None:  # the same (replica/vault/ignore.py)
            doc["ignore_file_invalid"] = {"message": bad_ignore.message, **bad_ignore.details}
    finally:
        store.close()
    refused = refusal(doc["last_error"])
    if refused is not None:
        # the hub refused this device or replica (revoked, removed): nothing is published,
        # local edits and the outbox stay; the next sync after access returns resumes
        doc["state"] = "suspended"
        doc["suspended"] = refused
    elif doc["last_error"] or gone is not None or bad_ignore is not None:
        doc["state"] = "error"
    elif head is None:
        doc["state"] = "never_synced"
    elif conflicts:
        doc["state"] = "conflicts"
    elif doc["problems"]:
        doc["state"] = "problems"
    elif outbox or local.entries:
        doc["state"] = "pending"
    else:
        doc["state"] = "ok"
    return doc


def write_status(space: SpaceConfig, *, report: SyncReport | None, error: QuireError | None,
                 role: str | None) -> None:
    """Record a sync's outcome in ``status.json`` (kept fields survive a failed sync)."""
    prev = _saved_status(space, mine=True)  # read only; the new document is copied below
    now = now_ms()
    doc = {
        "last_sync": now,
        "last_success": now if error is None else prev.get("last_success"),
        "last_error": None if error is None else dict(error_doc(error)["error"], at=now),
        "problems": [p.to_json() for p in report.problems] if report else prev.get(
            "problems", []),
        "role": role or prev.get("role"),
        # local changes the space rules deny (replica/engine/sync.py): kept here, not published
        "policy_denied": report.policy_denied if report else prev.get("policy_denied", []),
        "content_screened": report.content_screened if report else prev.get(
            "content_screened", []),
        # local deletes held back as a mass delete (replica/engine/mass_delete.py)
        "deletes_held": report.deletes_held if report else prev.get("deletes_held"),
    }
    info = write_json(space.status_path, doc, durable=False)  # advisory: no fsync
    _SAVED[os.fspath(space.status_path)] = ((info.st_ino, info.st_size, info.st_mtime_ns),
                                            copy.deepcopy(doc))


# ---------------------------------------------------------------- sync


def run_sync(home: Home, space: SpaceConfig, progress: Progress = NO_PROGRESS, *,
             sleep: Callable[[float], None] | None = None, confirm_deletes: bool = False
             ) -> tuple[SyncReport, dict[str, Any]]:
    """One locked sync of ``space``; status is written whatever happens. A vault write that
    waits for its file to be quiet (a person still saving it) is waited for once, at most
    the quiet period, then tried again; one still waiting is reported (``vault_waiting``)
    and written by the next sync. ``sleep``: how to wait (tests pass their own).
    ``confirm_deletes``: publish deletes above the mass-delete threshold (else held:
    replica/engine/mass_delete.py)."""
    with space_lock(space), _walk_ahead(space) as walk:
        update, stop = progress
        rep, client, store = open_replica(home, space, update)
        # its ~25 uses of the store share two connections, closed with the store: each
        # new one ran the pragmas, and each close of the last one checkpointed the WAL
        # (an fsync and two unlinks), about a third of a no-op sync's own time
        store.engine.keep_open(2)
        rep.confirm_deletes = confirm_deletes
        report = None
        try:
            from replica.app.rejoin import ensure_current_replica

            # a new device login since the replica was registered: register a new one
            ensure_current_replica(space, home.hub(space.hub_id), rep)  # type: ignore[arg-type]
            report = rep.sync(walk=walk)
            if report.waiting:
                wait_vault_writes(rep, report, sleep)
            from replica.app.backlinks import after_sync as links_after_sync

            links_after_sync(store, report)  # never raises
        except QuireError as e:
            write_status(space, report=None, error=e, role=rep.role)
            raise
        else:
            write_status(space, report=report, error=None, role=rep.role)
            from replica.conflicts.report import report_after_sync

            report_after_sync(space, rep)  # never raises; a failure is retried next sync
            from replica.conflicts.siblings import after_sync

            after_sync(space.vault, rep.store)  # theirs next to ours; never raises
        finally:
            stop()
            client.close()
            store.close()
    doc = status_doc(space, scan=False)  # the sync has just scanned the vault
    doc["scanned"] = doc["unpublished"]["scanned"] = True
    return report, doc


def fetch_attachment(home: Home, space: SpaceConfig, entry_id: str) -> Path | None:
    """The vault file of attachment ``entry_id``, its bytes fetched (and checked) first
    when this replica keeps them on the hub until read (``--attachments lazy``); None when
    the store holds no such attachment. Under the space's lock, written as every vault
    write is (the journal's atomic write, never over a person's edit)."""
    from replica.vault import markdown as md
    from shared.attachments import is_attachment

    with space_lock(space):
        rep, client, store = open_replica(home, space)
        try:
            s = store.states().get(entry_id)
            entry = None if s is None else s.local or s.synced
            if entry is None or not is_attachment(entry):
                return None
            path = md.attachment_path(space.vault, entry_id)
            blobs = rep.ledger.blobs
            if blobs is not None and not blobs.cache.has(entry.meta["sha256"]):
                blobs.lazy = False
                blobs.ensure(entry)
                rep.flush_vault()
            return path
        finally:
            client.close()
            store.close()


def wait_vault_writes(rep: Replica, report: SyncReport,
                      sleep: Callable[[float], None] | None = None) -> None:
    """Wait once for the files whose writes wait (until the first may be retried, at most
    the quiet period), then flush again: what still waits stays in ``report.waiting``."""
    import time

    quiet = rep.ledger.quiet_ms
    due = min(report.waiting.values()) - rep.clock()
    (sleep or time.sleep)(max(0, min(due, max(quiet, 100))) / 1000)
    report.waiting = rep.flush_vault()


@contextlib.contextmanager
def _walk_ahead(space: SpaceConfig) -> Iterator[Any]:
    """With ``QUIRE_WALK_AHEAD=on``, the vault's walk started in a forked child while this
    process gets the sync engine ready (replica/vault/walk.py). Off by default: on the bench
    VM the child's walk costs more than the overlap saves (docs/decisions.md)."""
    if os.environ.get("QUIRE_WALK_AHEAD", "") != "on":
        yield None
        return
    from replica.vault.walk import Prefetch

    walk = Prefetch.start(Path(space.vault))
    try:
        yield walk
    finally:
        if walk is not None:
            walk.close()


def fold_vault_edits(home: Home, space: SpaceConfig) -> None:
    """Fold vault edits into the store without the hub (skipped while a sync holds the
    lock): readers then see the files as they are."""
    from shared.errors import LockHeld

    try:
        with space_lock(space):
            with open_desk(home, space) as desk:
                desk.fold_vault_edits()
    except LockHeld:
        pass


# ---------------------------------------------------------------- join


def join(home: Home, url: str, invite: str, *, vault: str | None, device: str | None,
         name: str | None = None, default_name: str | None = None,
         choose_name: Callable[[str], str | None] | None = None,
         say: Callable[[str], None] = lambda _t: None,
         progress: Callable[[str], Progress] = lambda _label: NO_PROGRESS,
         attachments: str = "eager", only: list[str] | None = None) -> dict[str, Any]:
    """Redeem an invite: pin the hub's key, make (or reuse) this device's key, register a
    replica of the invite's space and take its first snapshot. The document says what was
    done (``space`` None for an owner enrollment, ``rejoined`` when access was restored).
    ``only``: a partial replica's globs (replica/app/scope.py), checked before the invite
    is used.

    The member's display name (docs/decisions.md D138), kept by the hub apart from device
    names: ``name`` when given; else the hub's default (the invite's name, else
    ``default_name``, this machine's guess), which ``choose_name`` (a person at a terminal)
    may then change before the first snapshot; a member who already has a name keeps it."""
    from replica.hubclient.auth import auth_for
    from replica.hubclient.client import HubClient
    from replica.machine.credentials import CredentialFile
    from shared.signing import load_private, new_private_key, public_b64, save_private

    url = hub_url(url)
    globs = _only(only)
    info, hub_id, public_key = describe_hub(url)
    known = home.hub(hub_id)
    device_name = device or (known.device_name if known else socket.gethostname()[:100]
                             or "device")
    hub_dir = home.hub_dir(hub_id)
    if known is not None:
        follow_pin(known, public_key)  # a rotated key is followed; any other is refused
        key = load_private(known.key_path)
    else:
        key = new_private_key()
        private_dir(hub_dir)  # 0700 up to the home folder, whatever the umask
        save_private(key, hub_dir / "device.pem")  # before redeeming: never lose the key
    creds = CredentialFile(hub_dir / "credential", hub_dir / "device.pem")
    auth = auth_for(creds.key_path, creds) if known is not None else None
    # spaces this machine already holds in another vault than --vault: the hub refuses an
    # invite for one of them before using it (already_joined), so the invite stays valid
    want = Path(vault).resolve() if vault else None
    elsewhere = {s.space_id: s for s in home.spaces()
                 if known is not None and s.hub_id == hub_id and want is not None
                 and Path(s.vault).resolve() != want}
    try:
        with HubClient(url, auth=auth, hub_key=public_key) as c:
            res = c.redeem(invite, device_name, public_b64(key), name, list(elsewhere),
                           default_name)
    except Forbidden as e:
        held = elsewhere.get((e.details or {}).get("space", ""))
        if (e.details or {}).get("reason") != "already_joined" or held is None:
            raise
        raise Forbidden(f"space {held.name} is already joined on this machine, in vault "
                        f"{held.vault}, not {want}; the invite was not used",
                        dict(e.details, vault=str(held.vault))) from None
    if res.get("access_token"):  # a new device: tokens bound to its key (docs/security.md)
        creds.save_grant(res, str(info.get("url") or url))
    hub = HubConfig(hub_id, url, public_key, info.get("key_id"), res.get("user_id"),
                    res.get("device_id"), device_name, hub_dir,
                    *((known.key_history, known.key_chain) if known else ()))
    if known is not None:
        hub.user_id, hub.device_id = known.user_id or hub.user_id, known.device_id or hub.device_id
    hub.save()
    user_name = res.get("user_name")
    if res.get("new_user") and name is None and choose_name is not None and user_name:
        user_name = _chosen_name(hub, str(user_name), choose_name, say)
    base = {"hub": {"id": hub_id, "url": url}, "user_id": hub.user_id,
            "device_id": hub.device_id, "device_name": device_name,
            "user_name": user_name, "name_source": res.get("name_source"),
            "new_user": bool(res.get("new_user"))}
    space_info = res.get("space")
    if not space_info:
        return dict(base, space=None)
    if any(s.space_id == space_info["id"] for s in home.spaces()):
        # a new invite for a space this machine keeps (access was removed, now restored):
        # the membership is back; the next sync publishes what waited in the outbox
        return dict(base, space=space_info, rejoined=True)
    return dict(base, **_take_space(home, hub, space_info, vault, say, progress,
                                     attachments, globs))


def _chosen_name(hub: HubConfig, offered: str, choose_name: Callable[[str], str | None],
                 say: Callable[[str], None]) -> str:
    """The name the member types over the one the hub gave (``offered``); kept on the hub
    as theirs (``POST /v1/users/me/name``). A rename that fails leaves the offered name, and
    says how to change it later: the join itself went through."""
    typed = (choose_name(offered) or "").strip()
    if not typed or typed == offered:
        return offered
    try:
        with open_client(hub) as c:
            return str(c.admin_post("/v1/users/me/name", {"name": typed})["name"])
    except QuireError as e:
        say(f"your display name stays {offered!r} ({e.message}); change it with "
            f"'quire admin users name me NAME'")
        return offered


def join_space(home: Home, url: str, space_ref: str, *, vault: str | None,
               say: Callable[[str], None] = lambda _t: None,
               progress: Callable[[str], Progress] = lambda _label: NO_PROGRESS,
               attachments: str = "eager", only: list[str] | None = None
               ) -> dict[str, Any]:
    """``quire join URL --space NAME``: a space the member already belongs to, on a device
    signed in to the hub (``quire login``, or an earlier join): no invite. Registers a
    replica for this device and takes the first snapshot, as a join with an invite does
    (``only``: a partial replica's globs)."""
    url = hub_url(url)
    globs = _only(only)
    hub = next((h for h in home.hubs() if h.url.rstrip("/") == url), None)
    if hub is None:
        raise NotJoined(f"this machine is not signed in to {url}: run 'quire login {url}' "
                        "(or join with an invite) first")
    with open_client(hub) as c:
        mine = c.spaces()
    match = [s for s in mine if space_ref in (s.get("id"), s.get("name"))]
    if not match:
        raise SpaceNotFound(f"no space {space_ref!r} that you are a member of on {url}",
                            {"candidates": sorted(str(s.get("name")) for s in mine)})
    space_info = match[0]
    held = next((s for s in home.spaces() if s.space_id == space_info["id"]), None)
    base = {"hub": {"id": hub.hub_id, "url": hub.url}, "user_id": hub.user_id,
            "device_id": hub.device_id, "device_name": hub.device_name}
    if held is not None:
        want = Path(vault).resolve() if vault else None
        if want is not None and Path(held.vault).resolve() != want:
            raise Forbidden(f"space {held.name} is already joined on this machine, in vault "
                            f"{held.vault}, not {want}",
                            {"reason": "already_joined", "space": held.space_id,
                             "vault": str(held.vault)})
        return dict(base, space=held.to_json(), already_joined=True)
    return dict(base, **_take_space(home, hub, space_info, vault, say, progress,
                                     attachments, globs))


def _only(only: list[str] | None) -> tuple[str, ...]:
    """``--only`` checked (``InvalidRequest``); empty: the whole space."""
    from replica.app.scope import changed

    return changed((), "set", list(only)) if only else ()


def _take_space(home: Home, hub: HubConfig, space_info: dict[str, Any], vault: str | None,
                say: Callable[[str], None], progress: Callable[[str], Progress],
                attachments: str = "eager", only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Register this device's replica of the space and take its first snapshot.
    ``attachments``: ``lazy`` keeps attachments' bytes on the hub until first read
    (``fetch_attachment``; replica/engine/blobs.py); ``only``: the entries a partial
    replica holds (replica/app/scope.py)."""
    space_id = space_info["id"]
    where = (Path(vault) if vault else Path.cwd() / space_info["name"]).resolve()
    with open_client(hub) as c:
        replica_id = c.register_replica(space_id, hub.device_name)
    space = SpaceConfig(space_id, space_info["name"], hub.hub_id, replica_id, where,
                        space_info.get("role"), home.space_dir(space_id), hub.device_id)
    private_dir(space.dir)
    space.save()
    if attachments == "lazy":  # before the first snapshot: it fetches no attachment
        from replica.engine.blobs import LAZY_KEY
        from replica.store.store import Store

        store = Store(space.store_path)
        try:
            store.set_meta(LAZY_KEY, True)
        finally:
            store.close()
    if only:
        from replica.app.scope import set_only

        set_only(space, only)
    say(f"joined space {space.name} as {space.role}; taking the first snapshot …")
    report, status = run_sync(home, space, progress(f"syncing {space.name}"))
    return dict(space=space.to_json(), replica_id=replica_id, sync=report.to_json(),
                status=status)
