"""``quire hub key rotate``: a new hub signing key, announced by the key it replaces.

    hub_key.pem (old) ──┐
    new key ─▶ hub_key.pem.next (0600)                      1. the new key, beside the old
    one transaction:  hub_keys += statement signed by old    2. the chain grows by one link
                      hub_state.key_id = new key id             the record names the new key
                      audit: hub.key_rotate
    rename hub_key.pem.next ─▶ hub_key.pem                   3. the old private key is gone

A crash between 2 and 3 leaves ``hub_key.pem.next`` whose id is the recorded one: the next
``rotate`` (or ``serve``) finishes the rename first. A crash before 2 leaves a ``.next``
nobody recorded: it is deleted and a fresh rotation starts. Running hub processes pick up
the new file on their next signature (``Hub.key`` watches the file, hub/app.py); replicas
follow the chain (shared/hubkeys.py, replica/trust/keypin.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hub import audit
from hub.keys import HubKey
from hub.store.hub_state import (
    hub_key_statements_txn,
    hub_state_txn,
    insert_hub_key_statement_txn,
    set_hub_record_txn,
)
from shared.canonical import canonical_str
from shared.errors import InvalidRequest
from shared.hubkeys import rotation_body, sign_rotation
from shared.signing import new_private_key, save_private


def next_path(key_path: Path) -> Path:
    return key_path.with_name(key_path.name + ".next")


def chain_txn(conn: Any) -> list[dict[str, Any]]:
    return [json.loads(s) for s in hub_key_statements_txn(conn)]


def keys_doc_txn(conn: Any, key: HubKey) -> dict[str, Any]:
    """``GET /v1/hub/keys``: the key the hub signs with now and the chain leading to it."""
    state = hub_state_txn(conn)
    return {"hub_id": state.hub_id if state else None, "public_key": key.public,
            "key_id": key.kid, "chain": chain_txn(conn)}


def finish_interrupted(store: Any, key_path: Path) -> bool:
    """A rotation that committed but did not rename its key file: rename it now (True).
    A ``.next`` the database never recorded is removed (False)."""
    nxt = next_path(key_path)
    if not nxt.exists():
        return False
    pending = HubKey.load(nxt)
    with store.read() as conn:
        state = hub_state_txn(conn)
    if state is not None and state.key_id == pending.kid:
        os.replace(nxt, key_path)
        return True
    nxt.unlink()
    return False


def rotate(store: Any, key_path: Path, now: int) -> dict[str, Any]:
    """Make a new hub key, append the statement the old key signs, record the new id."""
    resumed = finish_interrupted(store, key_path)
    old = HubKey.load(key_path)
    nxt = next_path(key_path)
    save_private(new_private_key(), nxt)
    new = HubKey.load(nxt)

    def txn(conn: Any) -> dict[str, Any]:
        state = hub_state_txn(conn, lock=True)
        if state is None:
            raise InvalidRequest("the hub database is not initialized")
        if state.key_id not in (None, old.kid):
            raise InvalidRequest(f"{key_path} (key {old.kid}) is not the key the hub "
                                 f"database records ({state.key_id}); refusing to rotate "
                                 "from it", {"reason": "record_mismatch"})
        seq = len(hub_key_statements_txn(conn)) + 1
        st = sign_rotation(old.private, rotation_body(
            hub=state.hub_id, seq=seq, previous_key=old.public, key=new.public, at=now))
        insert_hub_key_statement_txn(conn, seq=seq, key_id=new.kid,
                                     statement=canonical_str(st), at=now)
        set_hub_record_txn(conn, key_id=new.kid)
        audit.record_hub_txn(conn, at=now, action="hub.key_rotate", actor={"system": "cli"},
                             details={"seq": seq, "previous": old.kid, "key_id": new.kid})
        return st

    try:
        st = store.run_write(txn)
    except Exception:
        nxt.unlink(missing_ok=True)
        raise
    os.replace(nxt, key_path)
    _sync_dir(key_path.parent)
    return {"seq": st["seq"], "previous": old.kid, "key_id": new.kid, "public_key": new.public,
            "statement": st, "resumed_interrupted": resumed}


def reset(store: Any, key_path: Path, now: int) -> dict[str, Any]:
    """``quire hub key reset``: the key file is lost, so no statement can announce a new
    key. Make one and record it; replicas refuse it (``hub_key_unchained``) until each
    member re-pins by hand (``quire repin``). Refused while the key file exists: a key
    that still exists is rotated."""
    if key_path.exists():
        raise InvalidRequest(f"{key_path} exists: rotate it ('quire hub key rotate'), which "
                             "replicas follow; reset is for a lost key",
                             {"reason": "key_exists"})
    next_path(key_path).unlink(missing_ok=True)
    save_private(new_private_key(), next_path(key_path))
    new = HubKey.load(next_path(key_path))

    def txn(conn: Any) -> str | None:
        state = hub_state_txn(conn, lock=True)
        if state is None:
            raise InvalidRequest("the hub database is not initialized")
        set_hub_record_txn(conn, key_id=new.kid)
        audit.record_hub_txn(conn, at=now, action="hub.key_reset", actor={"system": "cli"},
                             details={"previous": state.key_id, "key_id": new.kid})
        return state.key_id  # type: ignore[no-any-return]

    previous = store.run_write(txn)
    os.replace(next_path(key_path), key_path)
    _sync_dir(key_path.parent)
    return {"previous": previous, "key_id": new.kid, "public_key": new.public}


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
