"""``quire witness serve|key|forget``: serve a witness, show its key, forget a hub's line
(docs/cli.md, "Witness"). The arguments are parsed by the ``quire`` parser
(replica/cli/witness_cmd.py), which hands the namespace to ``run`` by module name."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hub.witness.app import create_app, open_witness


def run(args: argparse.Namespace) -> int:
    w = open_witness(Path(args.data), args.name, frozenset(getattr(args, "hub", []) or []))
    if args.verb == "key":
        print(json.dumps({"name": w.name, "key": w.public}))
        return 0
    if args.verb == "forget":
        done = w.state.forget(args.origin)
        print("forgotten" if done else "nothing held for that origin")
        return 0 if done else 1
    import uvicorn

    print(json.dumps({"name": w.name, "key": w.public,
                      "url": f"http://{args.host}:{args.port}"}), flush=True)
    uvicorn.run(create_app(w), host=args.host, port=args.port, log_config=None,
                access_log=False)
    return 0
