"""Attachments, pure: a vault file that is not Markdown is an entry of kind ``attachment``
whose content names its bytes by hash; the bytes travel as a blob of their own
(docs/architecture.md, "Attachments"; docs/decisions.md D132 part 5, D147).

    img/diagram.png (a file) ──► entry id "img/diagram.png" (the path, extension kept)
                                 title "diagram.png", body "", no tags or links,
                                 meta {kind: attachment, sha256, size, media_type}
                                  │  version = SHA-256 of that canonical JSON: the state
                                  │  root covers the hash, hence the bytes
    its bytes ──► PUT /v1/spaces/S/blobs/<sha256> before the batch that names them
                  GET … and checked against ``sha256`` on every download

The id is the file's path with its extension (``shared.ids.entry_id_problem`` holds for it:
an attachment's name never ends in ``.md`` or ``.tmp``), so the vault file of an
attachment is its id, where a Markdown entry's is its id + ``.md``. ``x.png`` and
``x.png.md`` in one folder would be one id: the replica reports the attachment as a
problem and publishes the Markdown file.

The media type comes from the extension by Python's built-in table (never the system's
``/etc/mime.types``: the hub and every replica must agree), else
``application/octet-stream``. It is a label for readers, never a reason to run anything:
the hub serves blobs as downloads, with ``nosniff`` (docs/security.md, "Attachments").
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from typing import Any

ATTACHMENT = "attachment"
DEFAULT_MAX_BYTES = 25 * 1024 * 1024  # a file; a space may set its own (docs/settings.md)
OCTET_STREAM = "application/octet-stream"
META_KEYS = frozenset({"kind", "sha256", "size", "media_type"})
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_MEDIA_RE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")
# shown inline by the console (an <img> from our own origin): raster formats only; SVG can
# carry script and is offered as a download like everything else
INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def is_sha256(s: object) -> bool:
    return isinstance(s, str) and bool(_SHA_RE.match(s))


def blob_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def _types() -> Any:
    import mimetypes

    return mimetypes.MimeTypes()  # the built-in table only: no system files are read


def media_type_of(name: str) -> str:
    """The media type of a file name, the same on every machine (module docstring)."""
    guessed, encoding = _types().guess_type(name, strict=True)
    if guessed is None or encoding is not None or not _MEDIA_RE.match(guessed):
        return OCTET_STREAM
    return str(guessed)


def attachment_meta(name: str, data: bytes) -> dict[str, Any]:
    """The content of an attachment entry for a file named ``name`` holding ``data``."""
    return {"kind": ATTACHMENT, "sha256": blob_hash(data), "size": len(data),
            "media_type": media_type_of(name)}


def attachment_dict(entry_id: str, data: bytes) -> dict[str, Any]:
    """The wire/dict form of the attachment entry of ``data`` at ``entry_id``
    (``shared.entry.make_entry`` takes it)."""
    return {"id": entry_id, "title": entry_id.rsplit("/", 1)[-1], "body": "", "tags": [],
            "links": [], "meta": attachment_meta(entry_id, data)}


def declares_attachment(meta: Mapping[str, Any] | None) -> bool:
    """Does this content say it is an attachment (``kind: attachment``, any case)?"""
    v = meta.get("kind") if meta else None
    return isinstance(v, str) and v.strip().lower() == ATTACHMENT


def is_attachment(entry: Any) -> bool:
    """Is this entry (``shared.entry.Entry``; None: no) a live attachment? Only well-formed
    ones exist past ``attachment_problem``, so the declared kind is enough."""
    return entry is not None and not entry.deleted and declares_attachment(entry.meta)


def attachment_problem(entry: Any) -> str | None:
    """Why a live entry that declares itself an attachment is not a well-formed one, or
    None: exactly ``{kind: attachment, sha256, size, media_type}`` in ``meta``, title its
    file name, no body, tags or links (nothing a person could edit apart from the file)."""
    meta = entry.meta
    if set(meta) != META_KEYS or meta["kind"] != ATTACHMENT:
        return ("an attachment's content is exactly kind: attachment, sha256, size and "
                "media_type")
    if not is_sha256(meta["sha256"]):
        return "an attachment's sha256 is 64 lowercase hex digits"
    size = meta["size"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return "an attachment's size is a non-negative integer"
    if not isinstance(meta["media_type"], str) or not _MEDIA_RE.match(meta["media_type"]):
        return "an attachment's media_type is a media type (type/subtype, lowercase)"
    if entry.body or entry.tags or entry.links:
        return "an attachment has no body, tags or links"
    if entry.title != entry.id.rsplit("/", 1)[-1]:
        return "an attachment's title is its file name"
    return None


def too_large_message(name: str, size: int, limit: int) -> str:
    """What a person reads when a file is over the space's attachment limit."""
    return (f"{name} is {size:,} bytes; this space takes attachments of at most "
            f"{limit:,} bytes (too_large): nothing was published")


def content_disposition(name: str, inline: bool = False) -> str:
    """A ``Content-Disposition`` header value for a file name (RFC 6266, RFC 5987): an
    ASCII fallback without quotes or controls, and the UTF-8 name percent-encoded."""
    from urllib.parse import quote

    fallback = "".join(c if 0x20 <= ord(c) < 0x7f and c not in '"\\;' else "_"
                       for c in name) or "file"
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
