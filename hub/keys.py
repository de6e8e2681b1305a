"""The hub signing key (Ed25519): created by ``quire hub init``, mode 0600, pinned by
replicas at join. It signs receipts and heads (and access tokens, with the identity work)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.signing import key_id, load_private, new_private_key, public_b64, save_private


@dataclass(frozen=True)
class HubKey:
    private: Ed25519PrivateKey
    public: str
    kid: str

    @classmethod
    def load(cls, path: Path) -> HubKey:
        priv = load_private(path)
        pub = public_b64(priv)
        return cls(priv, pub, key_id(pub))

    @classmethod
    def create(cls, path: Path) -> HubKey:
        if path.exists():
            raise FileExistsError(f"{path} exists; refusing to replace the hub key")
        priv = new_private_key()
        save_private(priv, path)
        return cls.load(path)

    def jwk(self) -> dict[str, str]:
        return {"kid": self.kid, "kty": "OKP", "crv": "Ed25519", "x": self.public, "use": "sig"}
