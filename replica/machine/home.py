"""This machine's Quire home: hubs joined (device key, credential, pinned hub key) and spaces
joined (store, vault path, status, lock).

    $QUIRE_HOME (default: the platform's user data folder for "quire")
    ├── hubs/<hub_id>/hub.json        url, hub id, pinned public key, user and device ids,
    │                                 the keys pinned before it and the hub key rotation
    │                                 statements followed (replica/trust/keypin.py)
    ├── hubs/<hub_id>/device.pem      Ed25519 device key, mode 0600
    ├── hubs/<hub_id>/credential      device credential, mode 0600
    └── spaces/<space_id>/
        ├── space.json                space id and name, hub id, replica id, vault path
        ├── store.sqlite              the local store (replica/store/store.py)
        ├── status.json               written at the end of every sync
        └── lock                      flock'd by the running sync

Everything in it is private whatever the umask: folders are made 0700 (``private_dir``),
files 0600 (``write_json``, ``write_secret``; the SQLite stores by ``replica/store/db.py``),
and ``quire doctor`` finds anything readable by others (``replica/cli/doctor.py``).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.errors import LockHeld, NotJoined
from shared.ids import is_id


def home_dir() -> Path:
    env = os.environ.get("QUIRE_HOME")
    if env:
        return Path(env)
    from platformdirs import user_data_dir  # at first use: it imports tempfile and random

    return Path(user_data_dir("quire", appauthor=False))


PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> None:
    """Make ``path`` and every missing folder above it, each 0700: a folder made with the
    umask's mode (0755 under the common 022) lets every user of the machine list and read
    a replica's stores and claims. An existing folder is left as it is (``quire doctor``
    finds one that is not private)."""
    missing = []
    p = path
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, PRIVATE_DIR)  # the umask can only clear bits of 0700
        except FileExistsError:
            pass


def write_json(path: Path, data: Any, mode: int = PRIVATE_FILE, *, durable: bool = True
               ) -> os.stat_result:
    """Atomic JSON write (temp file + fsync + rename). ``durable=False`` (status files
    only: advisory, rewritten at the next sync or state change) skips the fsync: readers
    never see a half-written file, but after a power cut the file may be the previous
    one, or empty on some file systems, and every reader takes that as no status. Status
    files are also written on one line: ``indent`` makes ``json`` encode in Python rather
    than in C (3x the CPU, at every publication a watcher applies); people read them
    through ``quire status``. Returns the stat of the file written (a reader that kept
    what it wrote knows it by it: replica/app/service.py ``read_saved_status``)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    except FileNotFoundError:
        private_dir(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        # one string, one write: json.dump streams many small pieces (3x the CPU; a
        # watcher writes its status at every publication it applies)
        f.write(json.dumps(data, indent=2 if durable else None, sort_keys=True) + "\n")
        f.flush()
        if durable:
            os.fsync(f.fileno())
        written = os.fstat(f.fileno())  # the rename keeps its inode, size and mtime
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return written


def write_secret(path: Path, text: str) -> None:
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


@dataclass
class HubConfig:
    hub_id: str
    url: str
    public_key: str
    key_id: str | None
    user_id: str | None
    device_id: str | None
    device_name: str
    dir: Path
    # keys pinned before ``public_key``, newest first (old signatures stay verifiable), and
    # the rotation statements followed from the first pin (shared/hubkeys.py)
    key_history: list[str] = field(default_factory=list)
    key_chain: list[dict[str, Any]] = field(default_factory=list)

    @property
    def known_keys(self) -> tuple[str, ...]:
        """The pinned key, then every key pinned before it."""
        return (self.public_key, *self.key_history)

    @property
    def key_path(self) -> Path:
        return self.dir / "device.pem"

    @property
    def credential_path(self) -> Path:
        return self.dir / "credential"

    def credential(self) -> str | None:
        try:
            return self.credential_path.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def save(self) -> None:
        write_json(self.dir / "hub.json", {
            "hub_id": self.hub_id, "url": self.url, "public_key": self.public_key,
            "key_id": self.key_id, "user_id": self.user_id, "device_id": self.device_id,
            "device_name": self.device_name, "key_history": self.key_history,
            "key_chain": self.key_chain})


@dataclass
class SpaceConfig:
    space_id: str
    name: str
    hub_id: str
    replica_id: str
    vault: Path
    role: str | None
    dir: Path
    # the device the replica was registered from: after a new device login it differs from
    # the hub's, and the next sync registers a new replica (replica/app/rejoin.py)
    device_id: str | None = None

    @property
    def store_path(self) -> Path:
        return self.dir / "store.sqlite"

    @property
    def status_path(self) -> Path:
        return self.dir / "status.json"

    @property
    def lock_path(self) -> Path:
        return self.dir / "lock"

    def save(self) -> None:
        write_json(self.dir / "space.json", {
            "space_id": self.space_id, "name": self.name, "hub_id": self.hub_id,
            "replica_id": self.replica_id, "vault": str(self.vault), "role": self.role,
            "device_id": self.device_id})

    def to_json(self) -> dict[str, Any]:
        return {"id": self.space_id, "name": self.name, "hub": self.hub_id,
                "replica_id": self.replica_id, "vault": str(self.vault), "role": self.role}


class Home:
    def __init__(self, root: Path | None = None):
        self.root = root or home_dir()

    # ------------------------------------------------------------ hubs

    def hub_dir(self, hub_id: str) -> Path:
        if not is_id(hub_id):
            raise NotJoined(f"invalid hub id {hub_id!r}")
        return self.root / "hubs" / hub_id

    def hub(self, hub_id: str) -> HubConfig | None:
        d = self.hub_dir(hub_id)
        try:
            data = json.loads((d / "hub.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return HubConfig(data["hub_id"], data["url"], data["public_key"], data.get("key_id"),
                         data.get("user_id"), data.get("device_id"),
                         data.get("device_name") or "device", d,
                         list(data.get("key_history") or []), list(data.get("key_chain") or []))

    def hubs(self) -> list[HubConfig]:
        base = self.root / "hubs"
        if not base.is_dir():
            return []
        out = [self.hub(p.name) for p in sorted(base.iterdir()) if is_id(p.name)]
        return [h for h in out if h is not None]

    def default_hub(self) -> HubConfig:
        hubs = self.hubs()
        if not hubs:
            raise NotJoined("this machine has not joined a hub: run 'quire join URL --invite CODE'")
        if len(hubs) > 1:
            raise NotJoined("this machine joined several hubs; name one with --hub URL",
                            {"hubs": [h.url for h in hubs]})
        return hubs[0]

    def hub_by_url(self, url: str) -> HubConfig:
        """A joined hub by its URL (as typed: a trailing ``/`` or ``/v1`` is dropped) or
        its id."""
        url = url.strip().rstrip("/")
        if url.lower().endswith("/v1"):
            url = url[:-3].rstrip("/")
        for h in self.hubs():
            if h.url == url or h.hub_id == url:
                return h
        raise NotJoined(f"this machine has not joined the hub at {url}")

    # ------------------------------------------------------------ spaces

    def space_dir(self, space_id: str) -> Path:
        if not is_id(space_id):
            raise NotJoined(f"invalid space id {space_id!r}")
        return self.root / "spaces" / space_id

    def spaces(self) -> list[SpaceConfig]:
        base = self.root / "spaces"
        if not base.is_dir():
            return []
        out = []
        for p in sorted(base.iterdir()):
            f = p / "space.json"
            if is_id(p.name) and f.is_file():
                data = json.loads(f.read_text(encoding="utf-8"))
                out.append(SpaceConfig(data["space_id"], data["name"], data["hub_id"],
                                       data["replica_id"], Path(data["vault"]),
                                       data.get("role"), p, data.get("device_id")))
        return out

    def space(self, ref: str | None) -> SpaceConfig:
        """A joined space by id or name; optional when exactly one is joined."""
        spaces = self.spaces()
        if ref is None:
            if len(spaces) == 1:
                return spaces[0]
            if not spaces:
                raise NotJoined("no space joined on this machine: " + self._join_advice())
            raise NotJoined("several spaces joined; name one",
                            {"spaces": [s.name for s in spaces]})
        by_id = [s for s in spaces if s.space_id == ref]
        if by_id:
            return by_id[0]
        by_name = [s for s in spaces if s.name == ref]
        if len(by_name) == 1:
            return by_name[0]
        if len(by_name) > 1:
            raise NotJoined(f"space name {ref!r} is ambiguous; use its id",
                            {"ids": [s.space_id for s in by_name]})
        raise NotJoined(f"no joined space named {ref!r} on this machine: "
                        + self._join_advice(ref))

    def _join_advice(self, name: str | None = None) -> str:
        """The next step that works: a machine signed in to a hub (the team lead who
        created the space, a member's second machine) joins by name, no invite needed."""
        hubs = self.hubs()
        if not hubs:
            return "run 'quire join URL --invite CODE'"
        url = hubs[0].url if len(hubs) == 1 else "URL"
        return (f"a space you are a member of: 'quire join {url} --space "
                f"{name or 'NAME'}' ('quire admin space list' lists them); with an invite "
                f"code: 'quire join {url} --invite CODE'")


@contextmanager
def space_lock(space: SpaceConfig, wait: bool = False) -> Iterator[None]:
    """The per-space lock (flock): one sync at a time; released when the process dies."""
    private_dir(space.dir)
    fd = os.open(space.lock_path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LockHeld(f"another sync of space {space.name} is running",
                           {"lock": str(space.lock_path)}) from None
        yield
    finally:
        os.close(fd)
