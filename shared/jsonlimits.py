"""Parse limits for JSON from the network, checked on the raw text before it is parsed.

``json.loads`` recurses once per nesting level (a body 5,000 deep raised ``RecursionError``,
a 500 with tracebacks in the log) and builds every object it reads, so a hostile body is
measured first, in one iterative pass that never recurses and never builds a value:

    raw bytes --decode--> text --counts (C speed)--> within every limit? --> json.loads
                                       |
                                       +-- maybe not --> scan the tokens (strings and
                                           brackets, one regex pass, stops at the first
                                           limit crossed) --> JsonLimitError (a ValueError)

The scan reads strings as JSON does (a quote outside a string opens one; backslash escapes
the next character), so for any text ``json.loads`` would accept, the depth, member count and
string lengths measured are exactly what it would build; for other text it measures at least
as much as the parser could reach before failing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# a string token (unrolled loop; an unterminated one runs to the end of the text, so a
# failed match never backtracks and rescans) or one structural character
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}:]', re.S)


@dataclass(frozen=True)
class JsonLimits:
    depth: int = 64  # nesting of arrays and objects (canonical JSON refuses deeper)
    keys: int = 200_000  # object members in the whole document
    string: int = 4 * 1024 * 1024  # characters of one string as sent (escapes included)
    items: int = 1_000_000  # strings, arrays and objects in the whole document


class JsonLimitError(ValueError):
    """The text crosses a parse limit; ``what`` names it, ``limit`` is its value."""

    def __init__(self, message: str, what: str, limit: int):
        super().__init__(message)
        self.what = what
        self.limit = limit


def check(text: str, limits: JsonLimits) -> None:
    """Raise JsonLimitError when ``text`` is deeper, has more members, longer strings or
    more items than ``limits`` allow. Iterative; cost linear in ``len(text)``."""
    opens = text.count("[") + text.count("{")
    colons = text.count(":")
    quotes = text.count('"')
    if (opens <= limits.depth and colons <= limits.keys and len(text) <= limits.string
            and opens + quotes // 2 <= limits.items):
        return  # nothing in it can cross a limit (brackets inside strings count too)
    depth = keys = items = 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        c = tok[0]
        if c == '"':
            items += 1
            if len(tok) - 2 > limits.string:
                raise JsonLimitError(f"a JSON string is longer than {limits.string} "
                                     "characters", "string", limits.string)
        elif c in "[{":
            depth += 1
            items += 1
            if depth > limits.depth:
                raise JsonLimitError(f"JSON nested deeper than {limits.depth} levels",
                                     "depth", limits.depth)
        elif c == ":":
            keys += 1
            if keys > limits.keys:
                raise JsonLimitError(f"JSON has more than {limits.keys} object members",
                                     "keys", limits.keys)
        else:
            depth -= 1
        if items > limits.items:
            raise JsonLimitError(f"JSON has more than {limits.items} strings, arrays and "
                                 "objects", "items", limits.items)


SMALL = JsonLimits(depth=16, keys=1000, string=16 * 1024, items=4000)  # headers, tokens


def loads(raw: bytes | str, limits: JsonLimits = SMALL) -> object:
    """``json.loads`` after ``check``: for small untrusted JSON (token and proof headers)."""
    import json

    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    check(text, limits)
    return json.loads(text)
