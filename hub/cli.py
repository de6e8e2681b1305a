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
    return 1


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
    from hub.store import queries as q
    from hub.store.db import Store

    s = _settings(args)
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
            existing = q.hub_state_txn(conn)
        if existing is None:
            store.run_write(lambda conn: spaces.init_hub_txn(conn, s.clock()))
    finally:
        store.dispose()
    HubKey.create(s.key_path)
    inv = _owner_invite(s)
    url = s.url
    _out(args, {"enrollment_code": inv["code"], "expires_at": inv["expires_at"],
                "data": str(s.data_dir), "url": url},
         init_steps(data=s.data_dir, url=url, url_given=bool(s.public_url), code=inv["code"],
                    expires_at=inv["expires_at"], now=s.clock(), serving=args.serving))
    return 0


def cmd_enroll(args: argparse.Namespace) -> int:
    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized", f"no hub in {s.data_dir}; run 'quire hub init'")
    inv = _owner_invite(s)
    _out(args, {"enrollment_code": inv["code"], "expires_at": inv["expires_at"]},
         f"Owner enrollment code (one-time, expires {when(inv['expires_at'], s.clock())}):\n\n"
         f"    {inv['code']}\n\nredeem it on the owner's machine: "
         f"quire join {s.url} --invite {inv['code']}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from hub.store import migrate

    s = _settings(args)
    migrate.upgrade(s.database_url)
    _out(args, {"revision": migrate.current(s.database_url)},
         f"database at revision {migrate.current(s.database_url)}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from hub.app import create_app
    from hub.store import migrate

    s = _settings(args)
    if not s.key_path.exists():
        return _fail(args, "not_initialized",
                     f"no hub in {s.data_dir}; run 'quire hub init --data {s.data_dir}' first")
    rev = migrate.current(s.database_url)
    head = migrate.alembic_head()
    if rev != head:
        return _fail(args, "migration_required",
                     f"database is at revision {rev}, this hub needs {head}; "
                     f"run 'quire hub migrate --data {s.data_dir}'")
    logging.basicConfig(level=s.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = create_app(s)
    print(f"quire hub serving {s.data_dir} on http://{s.host}:{s.port}", flush=True)
    # proxy headers are read by the hub from trusted_proxies only (hub/clientaddr.py)
    uvicorn.run(app, host=s.host, port=s.port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=3, proxy_headers=False, forwarded_allow_ips="")
    return 0


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
    common(sub.add_parser("enroll", help="make a new one-time owner enrollment code",
                          description="Make a new owner enrollment code (offline)."))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.data is not None:
        args.data = Path(args.data)
    return {"init": cmd_init, "serve": cmd_serve, "migrate": cmd_migrate,
            "enroll": cmd_enroll}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
