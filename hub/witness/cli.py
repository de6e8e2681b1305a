"""``quire witness …``: serve a witness, show its key, forget a hub's line (docs/cli.md,
"Witness"). Called by the ``quire`` entry point (replica/cli/entry.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hub.witness.app import create_app, open_witness


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quire witness",
                                description="Run a witness that co-signs space logs.")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name, help_ in (("serve", "serve the witness"),
                        ("key", "print its name and public key (what owners add)"),
                        ("forget", "forget one log's line (after its hub lost data or "
                                   "showed two histories)")):
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--data", required=True, help="the witness's folder (key, SQLite)")
        sp.add_argument("--name", default=None,
                        help="its name in co-signatures (default quire-witness/<key id>)")
        if name == "serve":
            sp.add_argument("--host", default="127.0.0.1")
            sp.add_argument("--port", type=int, default=8788)
            sp.add_argument("--hub", action="append", default=[],
                            help="serve only this hub key (repeat; default: any)")
        if name == "forget":
            sp.add_argument("origin", help="the log's origin (quire.log/<hub key>/<space>)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    w = open_witness(Path(args.data), args.name, frozenset(getattr(args, "hub", []) or []))
    if args.cmd == "key":
        print(json.dumps({"name": w.name, "key": w.public}))
        return 0
    if args.cmd == "forget":
        done = w.state.forget(args.origin)
        print("forgotten" if done else "nothing held for that origin")
        return 0 if done else 1
    import uvicorn

    print(json.dumps({"name": w.name, "key": w.public,
                      "url": f"http://{args.host}:{args.port}"}), flush=True)
    uvicorn.run(create_app(w), host=args.host, port=args.port, log_config=None,
                access_log=False)
    return 0
