"""``quire demo``: an embedded hub in a temporary folder, two replicas of one space, edits on
both, a clean merge and a held conflict, each step printed."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from replica.app import service
from replica.hubclient.client import HubClient
from replica.machine.home import Home
from replica.vault.markdown import entry_path, read_entry, render
from shared.entry import Entry
from shared.errors import QuireError

QUIRE = [sys.executable, "-c", "import sys; from replica.cli.main import main; sys.exit(main())"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Machine:
    """One machine of the demo, with its own Quire home, driven through the service layer
    (what ``quire join``, ``admin``, ``sync`` and ``status`` run)."""

    def __init__(self, root: Path):
        self.root, self.home = root, Home(root)

    def join(self, url: str, code: str, device: str, vault: Path | None = None
             ) -> dict[str, Any]:
        return service.join(self.home, url, code, vault=str(vault) if vault else None,
                            device=device)

    def client(self) -> HubClient:
        return service.open_client(service.hub_for(self.home, None))

    def sync(self) -> dict[str, Any]:
        report, _status = service.run_sync(self.home, self.home.space(None))
        return report.to_json()

    def status(self) -> dict[str, Any]:
        return service.status_doc(self.home.space(None))


def _write(vault: Path, e: Entry) -> None:
    p = entry_path(vault, e.id)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(render(e))


def _read(vault: Path, entry_id: str) -> Entry:
    return read_entry(vault, entry_id, entry_path(vault, entry_id).read_bytes())[0]


def run_demo(out: Any, keep: bool = False) -> int:
    root = Path(tempfile.mkdtemp(prefix="quire-demo-"))
    proc = None
    steps: list[dict[str, Any]] = []

    def step(text: str, **data: Any) -> None:
        steps.append(dict(data, step=text))
        out.say(f"\n== {text}")

    try:
        data = root / "hub"
        step("initialize a hub", data=str(data))
        init = subprocess.run([*QUIRE, "hub", "init", "--data", str(data), "--json"],
                              capture_output=True, text=True, check=True)
        code = json.loads(init.stdout)["enrollment_code"]
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([*QUIRE, "hub", "serve", "--data", str(data), "--host",
                                 "127.0.0.1", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with HubClient(url) as c:
            for _ in range(200):
                try:
                    c.health()
                    break
                except QuireError:
                    time.sleep(0.1)
        out.say(f"   serving on {url}")
        owner, alice, bob = (_Machine(root / n) for n in ("owner", "alice", "bob"))
        step("the owner redeems the enrollment code and creates space 'demo'")
        owner.join(url, code, "owner")
        with owner.client() as c:
            c.create_space("demo")
            for who in (alice, bob):
                inv = c.create_invite("demo", "editor", None)
                who.join(url, inv["code"], who.root.name, who.root / "vault")
                out.say(f"   {who.root.name} joined; vault at {who.root / 'vault'}")
        av, bv = alice.root / "vault", bob.root / "vault"

        step("alice writes page/deploy and syncs; bob syncs and gets it")
        body = "# Deploy\n\n1. build\n2. test\n3. ship\n\nAsk #ops first.\n"
        _write(av, Entry(id="page/deploy", title="Deploy", body=body, tags=("ops",)))
        alice.sync()
        bob.sync()
        out.say(f"   bob's file: {entry_path(bv, 'page/deploy')}")

        step("both edit different lines of page/deploy offline, then sync: a clean merge")
        _write(av, Entry(id="page/deploy", title="Deploy", tags=("ops",),
                         body=body.replace("1. build", "1. build (make release)")))
        _write(bv, Entry(id="page/deploy", title="Deploy", tags=("ops", "runbook"),
                         body=body.replace("Ask #ops first.", "Ask #ops first; never on Fridays.")))
        alice.sync()
        res = bob.sync()
        out.say(f"   bob merged: {res['merged']}")
        alice.sync()
        same = (entry_path(av, "page/deploy").read_bytes()
                == entry_path(bv, "page/deploy").read_bytes())
        out.say(f"   both vaults now hold the same page: {same}")
        out.say("   " + entry_path(av, "page/deploy").read_text().replace("\n", "\n   "))

        step("both rewrite the same line: bob syncs last and holds a conflict")
        merged = _read(av, "page/deploy")
        _write(av, replace(merged, body=merged.body.replace("3. ship", "3. ship with canary")))
        _write(bv, replace(merged, body=merged.body.replace("3. ship",
                                                             "3. ship to staging first")))
        _write(bv, Entry(id="note/retro", title="Retro", body="Went well.\n"))
        alice.sync()
        res = bob.sync()
        status = bob.status()
        out.say(f"   held on bob: {res['held']}; still published: note/retro")
        out.say(f"   bob's status: state={status['state']} conflicts="
                f"{[c['entry'] for c in status['conflicts']]}")
        out.say("   bob's file keeps his version, marked under 'quire:' in its front matter:")
        out.say("   " + entry_path(bv, "page/deploy").read_text().replace("\n", "\n   "))
        step("done", folder=str(root))
        if out.json:
            out.doc({"ok": True, "steps": steps, "folder": str(root) if keep else None})
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
