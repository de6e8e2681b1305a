"""``quire accept-restore [SPACE]``: accept that the hub was restored from a backup older
than this replica, then sync (replica/app/accept_restore.py does the work; this module
parses and prints)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    ar = sub.add_parser("accept-restore", parents=[common],
                        help="accept the hub's restore from a backup, then sync",
                        description="After the hub lost its data and was restored from a "
                                    "backup older than this replica, sync refuses it "
                                    "(hub_unverified, restore_behind). Once the hub's "
                                    "operator confirms the restore, this accepts that one "
                                    "restore and syncs: what this replica holds from after "
                                    "the backup is published again.")
    ar.add_argument("space", nargs="?", metavar="SPACE", help="space id or name")
    ar.set_defaults(func=cmd_accept_restore)


def cmd_accept_restore(args: argparse.Namespace, out: Any) -> int:
    from replica.app import accept_restore, service
    from replica.cli import exitcodes
    from replica.machine.home import Home
    from shared.errors import LockHeld

    home = Home()
    space = home.space(args.space)
    doc = accept_restore.accept(space)
    try:
        report, status = service.run_sync(home, space, out.progress(f"syncing {space.name}"))
    except LockHeld:
        out.doc(dict(doc, synced=False),
                f"accepted the restore of {space.name}; the running watcher syncs it")
        return exitcodes.OK
    r = report.to_json()
    out.doc(dict(doc, synced=True, sync=r),
            f"accepted the restore of {space.name}: synced, published again "
            f"{r['pushed']} change(s) made after the backup")
    return exitcodes.for_status(dict(status, sync=r))
