"""Asking a witness to co-sign a checkpoint (C2SP tlog-witness; the service is
``quire witness serve``, hub/witness/app.py).

    POST <url>/add-checkpoint
         old <size the witness holds>\\n<proof hashes, base64, one a line>\\n\\n<signed note>
    200  co-signature line(s)              → returned
    409  text/x.tlog.size "<size>\\n"       → the witness holds another size: asked again once
                                            with a proof from that size (``proof(m, n)``)
    422  the proof does not verify (another history), 403 not the hub's signature, 400 …
         → WitnessRefused, with what the witness said
    POST <url>/release   a fork recovery the hub's owner made (replica/app/fork_recovery.py)

The proofs come from the hub (GET …/log/consistency); the witness checks them against the
checkpoint it co-signed last, so a hub cannot pass a witness with a proof it made up.
Tests hand ``TRANSPORTS`` an in-process transport per witness URL (never a second witness
implementation: the real app, tests/kit/inproc.py ``AppTransport``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import httpx2

from shared.errors import TransferFailed

TIMEOUT = 10.0
TRANSPORTS: dict[str, httpx2.BaseTransport] = {}  # witness base URL → transport (tests)


class WitnessRefused(Exception):
    """The witness answered, and did not co-sign: ``status`` and its words."""

    def __init__(self, status: int, said: str):
        super().__init__(f"{status}: {said}")
        self.status = status
        self.said = said


def _body(old: int, proof: list[bytes], note: str) -> bytes:
    lines = [f"old {old}"] + [base64.b64encode(h).decode() for h in proof]
    return ("\n".join(lines) + "\n\n" + note).encode()


def add_checkpoint(url: str, note: str, size: int, guess: int,
                   proof: Callable[[int, int], list[bytes]]) -> str:
    """The witness's co-signature line(s) over the checkpoint of ``size`` in ``note``
    (signed by the hub). ``guess``: the size the witness likely holds (ours, last sync).
    Raises ``WitnessRefused`` or ``TransferFailed``."""
    base = url.rstrip("/")
    transport = TRANSPORTS.get(base)
    try:
        with httpx2.Client(transport=transport, timeout=TIMEOUT,
                           follow_redirects=False) as http:
            old = min(guess, size)
            for _ in range(2):
                resp = http.post(f"{base}/add-checkpoint", content=_body(
                    old, proof(old, size) if old else [], note),
                    headers={"content-type": "text/plain"})
                text = resp.text[:2000]
                if resp.status_code == 200:
                    return text
                if resp.status_code == 409 and text.strip().isdigit():
                    held = int(text.strip())
                    if held > size or held == old:
                        raise WitnessRefused(409, f"the witness holds size {held}")
                    old = held
                    continue
                raise WitnessRefused(resp.status_code, text.strip())
    except (httpx2.TransportError, httpx2.StreamError) as e:
        raise TransferFailed(f"could not reach the witness at {base} ({type(e).__name__})",
                             {"url": base}) from e
    raise WitnessRefused(409, "the witness's size kept moving")


def release(url: str, doc: dict[str, Any]) -> str:
    """Hand the witness a fork recovery (``POST <url>/release``: the checkpoint whose last
    leaf is the recovery's new epoch, its statement, that leaf's proof): its co-signature
    line. Raises ``WitnessRefused`` or ``TransferFailed``."""
    base = url.rstrip("/")
    try:
        with httpx2.Client(transport=TRANSPORTS.get(base), timeout=TIMEOUT,
                           follow_redirects=False) as http:
            resp = http.post(f"{base}/release", json=doc)
    except (httpx2.TransportError, httpx2.StreamError) as e:
        raise TransferFailed(f"could not reach the witness at {base} ({type(e).__name__})",
                             {"url": base}) from e
    if resp.status_code != 200:
        raise WitnessRefused(resp.status_code, resp.text[:2000].strip())
    return resp.text[:2000]


def latest(url: str, origin: str) -> dict[str, Any] | None:
    """What the witness holds for ``origin`` (GET /checkpoint): ``{"note", "equivocation"?}``,
    or None (nothing, or no answer): evidence, never a reason to accept anything."""
    base = url.rstrip("/")
    try:
        with httpx2.Client(transport=TRANSPORTS.get(base), timeout=TIMEOUT,
                           follow_redirects=False) as http:
            resp = http.get(f"{base}/checkpoint", params={"origin": origin})
            doc = resp.json() if resp.status_code == 200 and len(resp.content) < 65536 \
                else None
    except (httpx2.TransportError, httpx2.StreamError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
