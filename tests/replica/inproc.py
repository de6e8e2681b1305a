"""In-process replicas against ``FakeHub`` (no sockets): the fast tier of sync tests."""

from __future__ import annotations

from pathlib import Path

from replica import vault as vlt
from replica.client import HubClient
from replica.store import Store
from replica.sync import Replica, SyncReport
from shared.entry import Entry
from shared.ids import new_id
from shared.signing import new_private_key
from tests.replica.fakehub import FakeHub


class Local:
    def __init__(self, root: Path, hub: FakeHub, name: str, durable: bool = True):
        self.name = name
        self.vault = root / name / "vault"
        self.store = Store(root / name / "store.sqlite", durable=durable)
        self.client = HubClient("http://hub.test", transport=hub.transport(),
                                hub_key=hub.public_key)
        self.engine = Replica(space_id=hub.space_id, replica_id=new_id(), vault=self.vault,
                              store=self.store, client=self.client, key=new_private_key())

    def sync(self) -> SyncReport:
        return self.engine.sync()

    def path(self, eid: str) -> Path:
        return vlt.entry_path(self.vault, eid)

    def write(self, e: Entry) -> None:
        p = self.path(e.id)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(vlt.render(e))

    def read(self, eid: str) -> Entry | None:
        p = self.path(eid)
        if not p.exists():
            return None
        return vlt.read_entry(self.vault, eid, p.read_bytes())[0]

    def files(self) -> dict[str, bytes]:
        return {p.relative_to(self.vault).as_posix(): p.read_bytes()
                for p in sorted(self.vault.rglob("*.md"))}

    def held(self) -> set[str]:
        return {c.entry_id for c in self.store.conflicts()}

    def close(self) -> None:
        self.client.close()
        self.store.close()
