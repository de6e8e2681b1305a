"""``quire hub …``: initialize, migrate and serve a hub. Called by the ``quire`` entry point."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from hub.nextsteps import init_steps
from hub.settings import Settings, load_settings
from shared.humanize import when


def _out(args: argparse.Namespace, doc: dict[str, Any], human: str) -> None:
    if args.json:
        print(json.dumps(doc, ensure_ascii=False))
    else:
        print(human)


def _fail(args: argparse.Namespace, code: str, message: str) -> int:
    if args.json:
        print(json.dumps({"error": {"code": code, "message": message, "details": {}}}))
    else:
        print(f"error: {message}", file=sys.stderr)
    return 2 if code == "usage" else 1


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.data, db_url=getattr(args, "db", None),
                         host=getattr(args, "host", None), port=getattr(args, "port", None),
                         public_url=getattr(args, "public_url", None))


def _owner_invite(settings: Settings) -> dict[str, Any]:
    from hub import spaces
    from hub.store.db import Store

    store = Store(settings.database_url, pool_size=1)
    try:
        now = settings.clock()
        return store.run_write(lambda conn: spaces.create_invite_txn(
            conn, space_id=None, role="owner", ttl=settings.invite_ttl, now=now,
            actor={"system": "cli"}, created_by=None))
    finally:
        store.dispose()


def cmd_init(args: argparse.Namespace) -> int:
    from hub import spaces
    from hub.keys import HubKey
    from hub.store import migrate
    from hub.store.db import Store
    from hub.store.hub_state import hub_state_txn

    s = _settings(args)
    public_url = None
    if s.public_url:  # --public-url, or QUIRE_HUB_PUBLIC_URL / hub.toml: recorded either way
        from hub.record import normalize_url
        from shared.errors import InvalidRequest

        try:
            public_url = s.public_url = normalize_url(s.public_url)
        except InvalidRequest as e:
            return _fail(args, "invalid_request", e.message)
    if s.key_path.exists():
        return _fail(args, "already_initialized",
                     f"{s.data_dir} already holds a hub; 'quire hub serve --data {s.data_dir}' "
                     f"serves it, 'quire hub enroll --data {s.data_dir}' makes a new owner code")
    s.data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(s.data_dir, 0o700)
    if args.db:
        toml = s.data_dir / "hub.toml"
        fd = os.open(toml, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"db_url = {json.dumps(args.db)}\n")
    migrate.upgrade(s.database_url)
    store = Store(s.database_url, pool_size=1)
    try:
        with store.read() as conn:
            existing = hub_state_txn(conn)
        if existing is None:
            store.run_write(lambda conn: spaces.init_hub_txn(conn, s.clock()))
    finally:
        store.dispose()
    key = HubKey.create(s.key_path)
    from hub import database_of_record

    database_of_record.note(s)  # which database this folder's hub keeps its data in
    _store_record(s, public_url=public_url, key_id=key.kid)
    inv = _owner_invite(s)
    url = s.url
    _out(args, {"enrollment_code": inv["code"], "expires_at": inv["expires_at"],
                "data": str(s.data_dir), "url": url},
         init_steps(data=s.data_dir, url=url, url_given=bool(s.public_url), code=inv["code"],
                    expires_at=inv["expires_at"], now=s.clock(), serving=args.serving))
    return 0


def _store_record(s: Settings, *, public_url: str | None = None,
                  key_id: str | None = None) -> None:
    from hub import record
    from hub.store.db import Store

    store = Store(s.database_url, pool_size=1)
    try:
        store.run_write(lambda conn: record.store_txn(conn, public_url=public_url,
                                                      key_id=key_id))
    finally:
        store.dispose()


def cmd_record(args: argparse.Namespace) -> int:
    """Show the hub's configuration of record; ``--public-url`` changes the URL (running
    processes then fail /readyz until restarted with it)."""
    from hub import record
    from hub.store.db import Store
    from shared.errors import InvalidRequest

    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    if args.public_url:
        try:
            _store_record(s, public_url=record.normalize_url(args.public_url))
        except InvalidRequest as e:
            return _fail(args, "invalid_request", e.message)
    store = Store(s.database_url, pool_size=1)
    try:
        rec = record.read(store)
    finally:
        store.dispose()
    doc = {"public_url": rec.public_url if rec else None, "key_id": rec.key_id if rec else None,
           "schema": rec.schema if rec else None}
    _out(args, doc, "\n".join(f"{k}: {v}" for k, v in doc.items()))
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    """``quire hub key rotate``: a new signing key announced by the old one (offline or
    while serving: running processes reload the key file on their next signature)."""
    from hub import keyrotation
    from hub.store.db import Store
    from shared.errors import QuireError

    s = _settings(args)
    if not (s.key_path.exists() or (args.action == "reset" and s.data_dir.is_dir())):
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    store = Store(s.database_url, pool_size=1)
    try:
        if args.action == "reset":
            doc = keyrotation.reset(store, s.key_path, s.clock())
        else:
            doc = keyrotation.rotate(store, s.key_path, s.clock())
    except QuireError as e:
        return _fail(args, e.code, e.message)
    finally:
        store.dispose()
    if args.action == "reset":
        _out(args, doc, f"new hub key {doc['key_id']} (no statement: the old key is lost). "
                        "Every replica refuses it (hub_key_unchained) until its member, "
                        "having checked this key id with you, runs 'quire repin URL "
                        f"--hub-key {doc['key_id']}'.")
        return 0
    _out(args, doc, f"hub key rotated: {doc['previous']} -> {doc['key_id']} (statement "
                    f"{doc['seq']}, signed by the old key); replicas follow it on their next "
                    "sync. Running hub processes sign with the new key from their next "
                    "request; copy hub_key.pem to any process with its own --data.")
    return 0


def cmd_enroll(args: argparse.Namespace) -> int:
    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    inv = _owner_invite(s)
    url = _recorded_url(s)
    _out(args, {"enrollment_code": inv["code"], "expires_at": inv["expires_at"]},
         f"Owner enrollment code (one-time, expires {when(inv['expires_at'], s.clock())}):\n\n"
         f"    {inv['code']}\n\nredeem it on the owner's machine: "
         f"quire join {url or s.url} --invite {inv['code']}"
         + ("" if url else "\n(with the URL clients reach this hub at, if not that one)"))
    return 0


def cmd_email(args: argparse.Namespace) -> int:
    """Set (or ``--clear``) the email a user signs in to the console with through OpenID
    Connect; without USER, list users and their emails. The operator's command: whoever can
    set a user's email can sign in as that user, so no space admin can."""
    from hub import audit
    from hub.store import oidc_logins as sql
    from hub.store.db import Store

    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    store = Store(s.database_url, pool_size=1)
    try:
        with store.read() as conn:
            users = sql.users_txn(conn)
        if not args.user:
            rows = [{"id": u[0], "name": u[1], "email": u[2], "owner": bool(u[3]),
                     "active": bool(u[4])} for u in users]
            _out(args, {"users": rows}, "\n".join(
                f"{r['id']}  {r['name']}  {r['email'] or '-'}" for r in rows) or "no users")
            return 0
        found = [u for u in users if args.user in (u[0], u[1])]
        if len(found) != 1:
            return _fail(args, "not_found", f"{len(found)} users match {args.user!r}; give "
                         "the user id ('quire hub email' lists them)")
        email = None if args.clear else (args.email or "").strip().lower()
        if not args.clear and not (email and "@" in email and len(email) <= 320
                                   and not any(c.isspace() for c in email)):
            return _fail(args, "invalid_request", "give an email address (or --clear)")
        if email and any(u[2] == email and u[0] != found[0][0] for u in users):
            return _fail(args, "conflict", f"another user already signs in as {email}")
        user_id, now = found[0][0], s.clock()

        def txn(conn: Any) -> None:
            sql.set_email_txn(conn, user_id, email)
            audit.record_hub_txn(conn, at=now, action="user.email", actor={"system": "cli"},
                                 details={"user": user_id, "email": email})

        store.run_write(txn)
    finally:
        store.dispose()
    _out(args, {"user": user_id, "email": email},
         f"{found[0][1]} ({user_id}) " + (f"signs in as {email}" if email
                                           else "has no sign-in email"))
    return 0


def _recorded_url(s: Settings) -> str | None:
    """The public URL clients use: configured, else the one of record (hub/record.py)."""
    if s.public_url:
        return s.public_url
    from hub import record
    from hub.store.db import Store

    store = Store(s.database_url, pool_size=1)
    try:
        rec = record.read(store)
    finally:
        store.dispose()
    return rec.public_url if rec else None


def cmd_backup(args: argparse.Namespace) -> int:
    """A consistent copy of the hub's SQLite database while it serves (hub/backup.py)."""
    from hub import backup

    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    try:
        doc = backup.take(s.database_url, Path(args.out).absolute(), s.clock())
    except backup.BackupError as e:
        return _fail(args, e.code, e.message)
    _out(args, doc, f"backup of {len(doc['spaces'])} spaces written to {doc['out']} "
         f"({doc['bytes']} bytes, checked); keep {s.key_path} backed up too")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """Restore a backup's content into new epochs, keeping today's authorization and audit
    (hub/restore.py); only while no process serves the folder."""
    from hub import restore, servelock
    from hub.backup import BackupError

    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    # a dry run writes nothing: it may run while the hub serves (checking a backup)
    lock = None if args.dry_run else servelock.take_exclusive(s.data_dir)
    if lock is None and not args.dry_run:
        return _fail(args, "hub_serving", f"a hub process serves {s.data_dir}; stop it "
                     "first (restore changes what it serves)")
    try:
        if args.lost_data:
            if args.backup:
                return _fail(args, "usage", "--lost-data restores the database in place: "
                             "give no BACKUP (put the backup in the database's place first)")
            doc = restore.restore_lost(s, s.clock(), dry_run=args.dry_run)
        elif not args.backup:
            return _fail(args, "usage", "name the BACKUP to restore (or --lost-data)")
        else:
            doc = restore.restore(s, args.backup, s.clock(), dry_run=args.dry_run)
    except BackupError as e:
        return _fail(args, e.code, e.message)
    finally:
        if lock is not None:
            lock.close()
    lines = [f"{'would restore' if args.dry_run else 'restored'} {r['name']}: "
             f"content as at seq {r['restored_from']['seq']} of epoch "
             f"{r['restored_from']['epoch']}" + (f", new epoch {r['epoch']}" if r['epoch']
                                                 else "") for r in doc["restored"]]
    lines += [f"kept {k['name']}: {k['why']}" for k in doc["kept"]]
    _out(args, doc, "\n".join(lines) or "nothing to restore")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from hub.store import migrate

    s = _settings(args)
    before, head = migrate.current(s.database_url), migrate.alembic_head()
    if before is not None and before not in migrate.known_revisions():
        return _fail(args, "schema_newer",
                     f"the database is at schema revision {before}, which this release does "
                     f"not know (its newest is {head}): it was migrated by a newer Quire. "
                     "Run that release (or newer); nothing was changed")
    migrate.upgrade(s.database_url)
    _out(args, {"revision": migrate.current(s.database_url)},
         f"database at revision {migrate.current(s.database_url)}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    from hub import logs

    s = _settings(args)
    logs.setup(s.log_level, s.log_format)
    log = logging.getLogger("quire.hub")
    if not s.key_path.exists():
        return _fail(args, "not_initialized",
                     f"no hub in {s.data_dir}; run 'quire hub init --data {s.data_dir}' first")
    workers = args.workers
    if workers > 1 and s.database_url.startswith("sqlite"):
        # the DPoP replay cache and the rate limits live in memory on SQLite: workers would
        # not share them (hub/workers.py)
        return _fail(args, "workers_need_postgresql",
                     "--workers above 1 needs PostgreSQL (--db postgresql://…); a SQLite hub "
                     "is served by one process")
    from hub import workers as w

    try:  # the port first: a busy one is reported before anything else happens
        sock = w.bind(s.host, s.port)
    except OSError as e:
        return _fail(args, "port_in_use",
                     f"cannot listen on {s.host}:{s.port} ({e.strerror or e}): another hub or "
                     "program uses it; stop it, or serve on another port with --port N")
    try:
        return _serve(args, s, log, sock)
    finally:
        sock.close()


def _serve(args: argparse.Namespace, s: Settings, log: Any, sock: Any) -> int:
    """``serve`` once its port is bound (``sock``, handed to uvicorn or the workers)."""
    import logging

    from hub import logs, record
    from hub.app import create_app
    from hub.store import migrate

    workers = args.workers
    rev = migrate.current(s.database_url)
    head = migrate.alembic_head()
    from hub.keyrotation import finish_interrupted, next_path

    if rev == head and next_path(s.key_path).exists():
        from hub.store.db import Store

        # a key rotation interrupted between its commit and its rename: finish it first
        store = Store(s.database_url, pool_size=1)
        try:
            finish_interrupted(store, s.key_path)
        finally:
            store.dispose()
    if rev != head:
        return _fail(args, "migration_required",
                     f"database is at revision {rev}, this hub needs {head}; "
                     f"run 'quire hub migrate --data {s.data_dir}'")
    from hub import servelock

    serving = servelock.hold_serving(s.data_dir)  # noqa: F841 - held for the process's life
    app = create_app(s)
    hub = app.state.hub
    try:
        s.public_url = record.startup(hub.store, configured_url=s.public_url,
                                      default_url=f"http://{s.host}:{s.port}",
                                      key_id=hub.key.kid)
    except record.RecordMismatch as e:
        logs.event(log, "refused_to_start", logging.ERROR, reason="record_mismatch",
                   mismatch=e.fields)
        hub.store.dispose()
        return _fail(args, "record_mismatch",
                     f"{e}: {e.fields}; start it with the recorded value "
                     "(or change the record: 'quire hub record --public-url URL')")
    for d in _purge(s):  # deleted spaces past their retention (hub/space_delete.py)
        logs.event(log, "space_purged", space=d["space"], rows=d["rows"])
    logs.event(log, "serving", data=str(s.data_dir), host=s.host, port=s.port,
               public_url=s.url, key_id=hub.key.kid, schema=head, workers=workers)
    if workers > 1:
        return _serve_workers(s, app, workers, sock)
    if s.metrics_port >= 0:
        hub.metrics.serve(s.metrics_host, s.metrics_listen_port)
    print(f"quire hub serving {s.data_dir} on http://{s.host}:{s.port}", flush=True)
    serve_until_signal(app, s.host, s.port, sockets=[sock])
    hub.metrics.stop()
    return 0


def _serve_workers(s: Settings, started: Any, workers: int, sock: Any) -> int:
    """``--workers N``: the checks above ran once here; every worker builds its own app
    after the fork (connections and threads never cross a fork; hub/workers.py)."""
    from hub import workers as w
    from hub.app import create_app

    started.state.hub.store.dispose()
    print(f"quire hub serving {s.data_dir} on http://{s.host}:{s.port} "
          f"({workers} workers)", flush=True)

    def worker(i: int) -> int:
        app = create_app(s)
        hub = app.state.hub
        if s.metrics_port >= 0:  # one listener per worker: METRICS_PORT + index
            hub.metrics.serve(s.metrics_host, s.metrics_listen_port + i)
        serve_until_signal(app, s.host, s.port, sockets=[sock])
        hub.metrics.stop()
        return 0

    return w.supervise(workers, worker)


def _purge(s: Settings) -> list[dict[str, Any]]:
    """Purge the spaces deleted ``space_retention_days`` ago or more (hub/space_delete.py)."""
    from hub.space_delete import purge_expired
    from hub.store.db import Store

    store = Store(s.database_url)
    try:
        return purge_expired(store, s.clock(), s.space_retention_days)
    finally:
        store.dispose()


def cmd_gc(args: argparse.Namespace) -> int:
    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    done = _purge(s)
    _out(args, {"purged": done, "retention_days": s.space_retention_days},
         "\n".join([f"purged space {d['name']} ({d['space']}, {d['rows']} rows)" for d in done]
                   or [f"nothing to purge (retention {s.space_retention_days} days)"]))
    return 0


def serve_until_signal(app: Any, host: str, port: int,
                       sockets: list[Any] | None = None) -> None:
    """Uvicorn, with one change: on SIGTERM/SIGINT the hub ends its event streams and
    long-polls first (``Hub.shutting_down``), so the graceful shutdown finds no request
    still open and nothing is cancelled."""
    import uvicorn

    from hub.api.timeouts import BodyTimeout, header_timeout_protocol

    hub = app.state.hub
    s = hub.settings

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            hub.shutting_down()
            super().handle_exit(sig, frame)

    # proxy headers are read by the hub from trusted_proxies only (hub/clientaddr.py); a
    # slow client's headers and body are cut (hub/api/timeouts.py)
    config = uvicorn.Config(BodyTimeout(app, s.body_timeout_s), host=host, port=port,
                            log_config=None, access_log=False,
                            timeout_graceful_shutdown=5, proxy_headers=False,
                            forwarded_allow_ips="",
                            http=header_timeout_protocol(s.header_timeout_s))
    Server(config).run(sockets=sockets)


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


def build_parser(prog: str = "quire hub") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run a Quire hub.")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser, *, serve: bool = False) -> None:
        sp.add_argument("--data", default=None,
                        help="hub data folder (key, settings, SQLite file); "
                             "default $QUIRE_HUB_DATA_DIR or ./.quire/hub")
        sp.add_argument("--db", default=None,
                        help="database URL (default: SQLite in --data); e.g. "
                             "postgresql://user@127.0.0.1/quire")
        sp.add_argument("--json", action="store_true", help="print one JSON document")
        if serve:
            sp.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
            sp.add_argument("--port", type=int, default=None, help="listen port (default 8470)")
            sp.add_argument("--workers", type=_positive, default=1,
                            help="hub processes sharing the port (default 1; above 1 needs "
                                 "PostgreSQL); /metrics of worker i on METRICS_PORT + i")
        sp.add_argument("--public-url", default=None,
                        help="URL clients use to reach this hub (default http://HOST:PORT)")

    init = sub.add_parser("init", help="create the database, hub key and first owner code",
                          description="Create the database, the hub signing key and a "
                                      "one-time owner enrollment code (offline).")
    common(init)
    init.add_argument("--serving", action="store_true",
                      help="the caller serves the hub right after (make run): leave the "
                           "'serve' step out of the printed next steps")
    common(sub.add_parser("serve", help="serve the hub over HTTP",
                          description="Serve the hub over HTTP."), serve=True)
    common(sub.add_parser("migrate", help="upgrade the database schema",
                          description="Apply database migrations (run once per upgrade)."))
    common(sub.add_parser("record", help="show or change the hub's configuration of record",
                          description="Show the public URL, key id and schema revision "
                                      "every hub process must agree with; --public-url "
                                      "changes the recorded URL."))
    key = sub.add_parser("key", help="rotate the hub signing key",
                         description="Rotate the hub signing key: 'quire hub key rotate' "
                                     "makes a new key and a statement, signed by the old "
                                     "key, that replicas follow (docs/operations.md).")
    common(key)
    key.add_argument("action", choices=["rotate", "reset"],
                     help="rotate: a new key, announced by the old one; reset: the key file "
                          "is lost, make a new one that members re-pin by hand")
    common(sub.add_parser("enroll", help="make a new one-time owner enrollment code",
                          description="Make a new owner enrollment code (offline)."))
    backup = sub.add_parser("backup", help="copy the hub's database while it serves",
                            description="Write a consistent, checked copy of the hub's "
                                        "SQLite database to OUT while the hub serves "
                                        "(PostgreSQL: pg_dump, docs/operations.md). The hub "
                                        "key is not in it: keep hub_key.pem backed up too.")
    common(backup)
    backup.add_argument("out", metavar="OUT", help="the backup file to write (must not exist)")
    restore = sub.add_parser("restore", help="restore a backup's content into new epochs",
                             description="With every hub process stopped: restore the "
                                         "content of each space from BACKUP into a new "
                                         "signed epoch, keeping today's users, devices, "
                                         "revocations, roles, rules and audit log. Replicas "
                                         "republish what they hold from after the backup.")
    common(restore)
    restore.add_argument("backup", metavar="BACKUP", nargs="?",
                         help="a file from 'quire hub backup', or the URL of a database "
                              "restored with pg_restore")
    restore.add_argument("--lost-data", action="store_true",
                         help="the data folder or database was lost and a backup put in its "
                              "place: start every space's new epoch from it, announced as a "
                              "restore (members then run 'quire accept-restore')")
    restore.add_argument("--dry-run", action="store_true",
                         help="show what would be restored; change nothing")
    common(sub.add_parser("gc", help="purge deleted spaces past their retention",
                          description="Remove for good the data of every space deleted "
                                      "space_retention_days ago or more (the hub does it "
                                      "at every start too); safe while the hub serves."))
    email = sub.add_parser("email", help="set the email a user signs in to the console with",
                           description="Set the email a user signs in to the console with "
                                       "through OpenID Connect (matched against the "
                                       "provider's verified email); without USER, list "
                                       "users and their emails.")
    common(email)
    email.add_argument("user", nargs="?", help="user id or name")
    email.add_argument("email", nargs="?", help="the email address")
    email.add_argument("--clear", action="store_true", help="remove the user's email")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.data is not None:
        args.data = Path(args.data)
    if args.cmd != "init":  # never open (or create) a database that is not the hub's
        from hub import database_of_record

        refused = database_of_record.refusal(_settings(args))
        if refused is not None:
            return _fail(args, *refused)
    return {"init": cmd_init, "serve": cmd_serve, "migrate": cmd_migrate,
            "enroll": cmd_enroll, "record": cmd_record, "email": cmd_email, "key": cmd_key,
            "backup": cmd_backup, "restore": cmd_restore, "gc": cmd_gc}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
