"""This device's tokens on a hub: the credential file (mode 0600) and its lock.

    hubs/<hub_id>/credential   {"access_token", "refresh_token", "expires_at", "htu_base",
                                "device_key": <path of device.pem>}

``htu_base`` is the hub's public URL as the hub states it (``GET /v1/hub`` → ``url``): DPoP
proofs name it, so a hub reached as ``localhost`` but configured as ``127.0.0.1`` still
accepts them. The refresh credential rotates on every use; ``save`` replaces the file
atomically, and ``lock`` serializes refreshes between processes of this machine.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replica.machine.home import private_dir, write_secret


@dataclass(frozen=True)
class Tokens:
    access_token: str
    refresh_token: str | None
    expires_at: int  # Unix seconds
    htu_base: str


class CredentialFile:
    def __init__(self, path: Path, key_path: Path):
        self.path = path
        self.key_path = key_path

    def load(self) -> Tokens | None:
        try:
            doc: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("access_token"), str):
            return None
        return Tokens(doc["access_token"], doc.get("refresh_token"),
                      int(doc.get("expires_at", 0)), doc["htu_base"])

    def save(self, tokens: Tokens) -> None:
        write_secret(self.path, json.dumps({
            "access_token": tokens.access_token, "refresh_token": tokens.refresh_token,
            "expires_at": tokens.expires_at, "htu_base": tokens.htu_base,
            "device_key": str(self.key_path.resolve())}, indent=2) + "\n")

    def save_grant(self, grant: dict[str, Any], htu_base: str) -> Tokens:
        """Store what redemption, device login or refresh returned."""
        tokens = Tokens(grant["access_token"], grant.get("refresh_token"),
                        int(grant["expires_at"]), htu_base)
        self.save(tokens)
        return tokens

    @contextmanager
    def lock(self) -> Iterator[None]:
        private_dir(self.path.parent)
        fd = os.open(self.path.with_name("credential.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
