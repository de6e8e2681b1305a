"""Ed25519 keys and signatures, with domain separation so a signature over one kind of
message can never be replayed as another."""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from shared.canonical import canonical_bytes
from shared.digest import sha256_hex

BATCH_DOMAIN = b"quire-batch-v1:"
RECEIPT_DOMAIN = b"quire-receipt-v1:"
HEAD_DOMAIN = b"quire-head-v1:"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64u_decode(s: str) -> bytes:
    if not isinstance(s, str) or len(s) > 4096:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def public_b64(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return b64u(pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def load_public(b64: str) -> Ed25519PublicKey:
    raw = b64u_decode(b64)
    if len(raw) != 32:
        raise ValueError("an Ed25519 public key is 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


@functools.lru_cache(maxsize=4096)  # a pure function of the key: each request's DPoP check
def jwk_thumbprint(public: str) -> str:
    """RFC 7638 thumbprint of an Ed25519 public key (base64url raw ``x``)."""
    import hashlib

    members = canonical_bytes({"crv": "Ed25519", "kty": "OKP", "x": public})
    return b64u(hashlib.sha256(members).digest())


def save_private(key: Ed25519PrivateKey, path: Path) -> None:
    """Write a private key as PEM, created with mode 0600 (never readable by others)."""
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def load_private(path: Path) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return key


def sign(key: Ed25519PrivateKey, domain: bytes, message: bytes) -> str:
    return b64u(key.sign(domain + message))


# signatures that verified, by (public key, SHA-256 of domain + message, signature): the
# same signed bytes checked again in one process (a watcher checks each head event's
# signature in its stream thread and again when it applies the changes the event carried)
# cost a hash, not an Ed25519 verification (~0.15-0.4 ms). Only exact successes are kept;
# anything else is verified (docs/decisions.md D141).
_VERIFIED: dict[tuple[str, bytes, str], None] = {}
VERIFIED_MAX = 4096


def verify(public: Ed25519PublicKey | str, domain: bytes, message: bytes, signature: str) -> bool:
    seen = None
    try:
        signed = domain + message
        if isinstance(public, str) and isinstance(signature, str):
            seen = (public, hashlib.sha256(signed).digest(), signature)
            if seen in _VERIFIED:
                return True
        pub = load_public(public) if isinstance(public, str) else public
        pub.verify(b64u_decode(signature), signed)
    except (InvalidSignature, ValueError, TypeError):
        return False
    if seen is not None:
        if len(_VERIFIED) >= VERIFIED_MAX:
            _VERIFIED.clear()
        _VERIFIED[seen] = None
    return True


def key_id(public: str) -> str:
    return sha256_hex(public.encode())[:16]
