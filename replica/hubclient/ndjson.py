"""The hub's NDJSON streams, line by line: split at ``\\n`` only, each line bounded and
parsed (``parse_line``), and the check of one snapshot entry line (``check_entry_line``).
A plain (not streamed) answer is parsed within the same limits (``parse_answer``): every
JSON the client reads from a hub, error bodies and token answers included, is bounded.

No HTTP here (replica/hubclient/client.py streams the bytes): the vault writers of a clone
(replica/engine/clone_writers.py) check the entry lines they are handed with the same function the
client's own ``snapshot`` uses, so there is one definition of a valid snapshot line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from shared.digest import sha256_hex
from shared.entry import Entry, make_entry, validated_canonical_bytes
from shared.errors import HubUnverified, TransferFailed
from shared.jsonlimits import JsonLimitError, JsonLimits
from shared.jsonlimits import loads as bounded_loads

MAX_LINE = 16 * 1024 * 1024  # one NDJSON line (a batch is at most 8 MiB on the hub)
LINE_LIMITS = JsonLimits()  # depth 64 (canonical JSON refuses deeper), members, strings


def ndjson_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """A response body's lines, split at ``\\n`` only. A text line reader (httpx's
    ``iter_lines``) also splits at U+0085, U+2028 and U+2029, which canonical JSON leaves
    unescaped inside strings: an entry holding one would look like a cut stream."""
    rest = b""
    for chunk in chunks:
        if rest:
            chunk = rest + chunk
        *lines, rest = chunk.split(b"\n")
        for line in lines:
            if len(line) > MAX_LINE:
                raise HubUnverified(f"a streamed line is longer than {MAX_LINE} bytes",
                                    {"reason": "line_too_long", "limit": MAX_LINE})
            yield line
        if len(rest) > MAX_LINE:
            raise HubUnverified(f"a streamed line is longer than {MAX_LINE} bytes",
                                {"reason": "line_too_long", "limit": MAX_LINE})
    if rest:
        yield rest


def parse_line(line: bytes, where: str) -> dict[str, Any]:
    """One NDJSON line, within ``LINE_LIMITS`` (never a RecursionError or a huge build)."""
    try:
        obj = bounded_loads(line, LINE_LIMITS)
    except JsonLimitError as e:
        raise HubUnverified(f"{where}: a line crosses a parse limit: {e}",
                            {"reason": "parse_limit"}) from None
    except (ValueError, UnicodeDecodeError):
        raise TransferFailed(f"{where}: a line is not JSON (cut stream?)") from None
    if not isinstance(obj, dict):
        raise TransferFailed(f"{where}: a line is not a JSON object")
    return obj


def parse_answer(raw: bytes, where: str) -> Any:
    """A plain answer's JSON (any value), within ``LINE_LIMITS``: a hub that nests an answer
    100,000 deep gets ``HubUnverified`` (reason ``parse_limit``), never a RecursionError.
    Raises ``ValueError`` for text that is not JSON (the caller says what that means)."""
    try:
        return bounded_loads(raw, LINE_LIMITS)
    except JsonLimitError as e:
        raise HubUnverified(f"{where}: the answer crosses a parse limit: {e}",
                            {"reason": "parse_limit", "limit": e.what}) from None


WHERE = "GET snapshot"


def check_entry_line(line: bytes) -> tuple[Entry, str, int]:
    """One entry line of a snapshot, ``{"entry": …, "version": …, "seq": …}``: the entry
    validated (``make_entry``) and its version recomputed from its canonical JSON, which
    must equal the line's; returns the entry (carrying its version and canonical JSON, so
    nothing makes them again), that JSON, and the seq. Raises ``HubUnverified`` (or
    ``TransferFailed`` for a line that is not JSON: a cut stream)."""
    obj = parse_line(line, WHERE)
    if "end" in obj or "entry" not in obj:
        raise HubUnverified("snapshot has a line that is not an entry")
    try:
        entry = make_entry(obj["entry"], text_len=len(line))
        # the canonical JSON is made once: hashed for the version check, and kept on the
        # entry for the store (replica/store/store.py), which would otherwise make it again
        data = validated_canonical_bytes(entry)
        version = sha256_hex(data)
        text = data.decode("utf-8")
        if version != obj.get("version"):
            raise HubUnverified(f"snapshot entry {entry.id} does not match its version")
        object.__setattr__(entry, "_version", version)  # Entry.version's cache
        object.__setattr__(entry, "_canonical", text)
        seq = int(obj.get("seq", 0))
    except HubUnverified:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a hostile line does, it is refused
        raise HubUnverified(f"snapshot entry does not verify: {type(e).__name__}: {e}",
                            {"reason": "bad_entry"}) from e
    return entry, text, seq
