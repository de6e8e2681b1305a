"""``quire import DIR --space S [--dry-run]`` and ``quire export --space S DIR``: a folder of
notes brought into a space, and a space written out as plain files (replica/app/importer.py,
replica/app/exporter.py). This module only parses and prints."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

SHOWN = 20  # lines of each list a person sees (every one is in --json)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    im = sub.add_parser("import", parents=[common],
                        help="bring a folder of notes (an Obsidian vault, a wiki) into a space")
    im.add_argument("dir", metavar="DIR")
    im.add_argument("--space", metavar="SPACE")
    im.add_argument("--dry-run", action="store_true",
                    help="list what would be imported, mapped, ignored and refused")
    im.set_defaults(func=cmd_import)
    ex = sub.add_parser("export", parents=[common],
                        help="write a space's pages into a new folder, as the vault has them")
    ex.add_argument("dir", metavar="DIR")
    ex.add_argument("--space", metavar="SPACE")
    ex.set_defaults(func=cmd_export)


def _checked_source(source: Path, vault: Path) -> None:
    from shared.errors import InvalidRequest

    if not source.is_dir():
        raise InvalidRequest(f"{source} is not a folder", {"reason": "not_a_folder",
                                                          "path": str(source)})
    a, b = source.resolve(), vault.resolve()
    if a == b or a in b.parents or b in a.parents:
        raise InvalidRequest(f"{source} and the space's vault {vault} hold one another: "
                             "import from a folder outside the vault",
                             {"reason": "overlaps_vault", "path": str(source)})


def cmd_import(args: argparse.Namespace, out: Any) -> int:
    from replica.app import importer, service
    from replica.cli import exitcodes
    from replica.machine.home import Home
    from replica.store.links import live_ids_txn
    from replica.store.store import Store

    home = Home()
    space = home.space(args.space)
    source = Path(args.dir)
    _checked_source(source, space.vault)
    store = Store(space.store_path)
    try:
        with store.tx() as conn:
            live = live_ids_txn(conn)
        p = importer.plan(source, space.vault, store, live)
        if args.dry_run:
            doc = dict(p.to_json(), dry_run=True)
        else:
            update, stop = out.progress(f"importing into {space.name}")
            try:
                doc = importer.run(p, space.vault, store,
                                   lambda: service.run_sync(home, space)[0], update)
            finally:
                stop()
            doc["dry_run"] = False
    finally:
        store.close()
    doc["space"] = space.name
    out.doc(doc, "\n".join(human(doc)))
    return exitcodes.ATTENTION if doc["refused"] or doc.get("held") else exitcodes.OK


def human(doc: dict[str, Any]) -> list[str]:
    dry = doc["dry_run"]
    kinds = Counter((i["kind"], i["mapped"]) for i in doc["imported"])
    lines = [f"{'would import' if dry else 'imported'} into {doc['space']} from "
             f"{doc['source']}: {len(doc['imported']) + len(doc['present'])} file(s)"
             + ("" if dry else f", {doc['published']} published in {doc['batches']} "
                               "batch(es)")
             + (f"; {doc['done']} imported before" if doc["done"] else "")]
    for (kind, mapped), n in sorted(kinds.items()):
        if kind != "page":
            lines.append(f"  {n} {kind} (kind from the {mapped})")
    if doc["present"]:
        lines.append(f"  {len(doc['present'])} already in the vault with the same bytes")
    if doc["ignored"]:
        lines.append(f"  ignored {len(doc['ignored'])}:")
        lines += [f"    {i['path']} ({i['reason']})" for i in doc["ignored"][:SHOWN]]
    if doc["refused"]:
        lines.append(f"  refused {len(doc['refused'])} (nothing of them is imported):")
        lines += [f"    {r['code']}: {r['reason']}" for r in doc["refused"][:SHOWN]]
    for h in doc.get("held") or []:
        lines.append(f"  copied, not published: {h['path']}: {h['code']}: {h['reason']}")
    if doc["attachments"]:
        lines.append(f"  {doc['attachments']} of them attachment(s) (images, PDFs, other files)")
    for what in ("ignored", "refused"):
        if len(doc[what]) > SHOWN:
            lines.append(f"  ({len(doc[what]) - SHOWN} more {what}: --json lists them all)")
    return lines


def cmd_export(args: argparse.Namespace, out: Any) -> int:
    from replica.app.exporter import export
    from replica.machine.home import Home
    from replica.store.store import Store

    space = Home().space(args.space)
    store = Store(space.store_path)
    try:
        doc = export(store, space.vault, Path(args.dir))
    finally:
        store.close()
    doc["space"] = space.name
    out.doc(doc, f"exported {doc['entries']} file(s) of {space.name} to {doc['folder']}"
                 + (f" ({doc['attachments']} attachment(s))" if doc["attachments"] else "")
                 + "".join(f"\n  not exported: {m} (its bytes are not on this machine)"
                           for m in doc["missing"]))
    return 0
