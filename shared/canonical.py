"""Canonical JSON (RFC 8785 rules for the values we emit).

One implementation for every digest and signature in Quire:

- UTF-8, object keys sorted by their UTF-16 code units, no insignificant whitespace;
- strings escaped minimally (``"``, ``\\``, control characters; short forms where JSON has them);
- integers only, within the interoperable range (|n| <= 2**53 - 1); floats are refused because
  their text form is where implementations disagree;
- lone surrogates are refused (they cannot be encoded as UTF-8).
"""

from __future__ import annotations

import json
from typing import Any

from shared.jsonlimits import JsonLimits
from shared.jsonlimits import check as check_limits

MAX_SAFE_INT = 2**53 - 1

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


class CanonicalError(ValueError):
    """A value that has no canonical JSON form (float, huge int, lone surrogate, odd type)."""


def _string(s: str, out: list[str]) -> None:
    out.append('"')
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        elif "\ud800" <= ch <= "\udfff":
            raise CanonicalError("lone surrogate in string")
        else:
            out.append(ch)
    out.append('"')


def _utf16_key(k: str) -> bytes:
    return k.encode("utf-16-be", "surrogatepass")


def _value(v: Any, out: list[str], depth: int) -> None:
    if depth > 64:
        raise CanonicalError("nesting deeper than 64 levels")
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, int):
        if abs(v) > MAX_SAFE_INT:
            raise CanonicalError(f"integer {v} outside the interoperable range")
        out.append(str(int(v)))
    elif isinstance(v, str):
        _string(v, out)
    elif isinstance(v, dict):
        out.append("{")
        first = True
        for k in sorted(v, key=lambda k: _utf16_key(k) if isinstance(k, str) else b""):
            if not isinstance(k, str):
                raise CanonicalError("object keys must be strings")
            if not first:
                out.append(",")
            first = False
            _string(k, out)
            out.append(":")
            _value(v[k], out, depth + 1)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _value(item, out, depth + 1)
        out.append("]")
    elif isinstance(v, float):
        raise CanonicalError("floats are not allowed in signed data; use an integer or a string")
    else:
        raise CanonicalError(f"type {type(v).__name__} has no canonical JSON form")


def _fast_ok(v: Any, depth: int = 0) -> bool:
    """True when ``json.dumps`` gives the canonical form: no floats, ints in range, no
    object key that sorts differently by UTF-16 code units than by code points (only keys
    with characters at or above U+E000 can), no odd types. Lone surrogates are caught when
    the result is encoded."""
    if depth > 64:
        return False
    if isinstance(v, str) or v is None or v is True or v is False:
        return True
    if isinstance(v, int):
        return abs(v) <= MAX_SAFE_INT
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str) or (k and max(k) >= "\ue000"):
                return False
            if not (isinstance(x, str) or _fast_ok(x, depth + 1)):
                return False
        return True
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, str) or _fast_ok(x, depth + 1) for x in v)
    return False


_fast_dumps = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                               check_circular=False, allow_nan=False).encode


def canonical_str(value: Any) -> str:
    if _fast_ok(value):
        # the standard encoder escapes exactly what RFC 8785 escapes (", \, control
        # characters, short forms where JSON has them) when ensure_ascii is off
        text = _fast_dumps(value)
        if not has_lone_surrogate(text):
            return text
    out: list[str] = []
    _value(value, out, 0)
    return "".join(out)


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (not encodable as UTF-8)."""
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def canonical_bytes(value: Any) -> bytes:
    """The canonical UTF-8 encoding of ``value``."""
    if _fast_ok(value):
        text = _fast_dumps(value)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: the slow path names it
    return canonical_str(value).encode("utf-8")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def loads_strict(data: bytes | str, limits: JsonLimits | None = None) -> Any:
    """Parse JSON, refusing NaN/Infinity, duplicate keys and (for canonical data) floats;
    with ``limits``, text past a parse limit first (``JsonLimitError``, a ValueError)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    if limits is not None:
        check_limits(data, limits)
    return json.loads(
        data,
        parse_constant=_reject_constant,
        object_pairs_hook=_no_duplicates,
        parse_float=lambda s: _reject_constant(f"float {s}"),
    )


def dumps(value: Any) -> str:
    """Compact JSON for responses (not canonical; use canonical_str for digests)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
