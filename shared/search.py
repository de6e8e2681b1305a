"""What a search means, the same at the hub and in a replica: every word of the query, where
words are runs of letters and digits, matched whole and without regard to case, in an
entry's title, tags or body. The hub runs it as SQLite FTS5 or a PostgreSQL ``tsvector``
query (hub/reads.py); a replica runs ``entry_matches`` over its local entries."""

from __future__ import annotations

import re
from typing import Any

from shared.errors import InvalidRequest

MAX_TERMS = 16
MAX_TERM_LEN = 64
MAX_QUERY_LEN = 500
_WORD_RE = re.compile(r"[^\W_]+")


def search_terms(q: str | None) -> list[str]:
    """The query's words, lower-cased, first occurrence kept; ``invalid_request`` when there
    are none or too many."""
    if q is None or not q.strip():
        raise InvalidRequest("q is required: the words to search for")
    if len(q) > MAX_QUERY_LEN:
        raise InvalidRequest(f"q is longer than {MAX_QUERY_LEN} characters")
    terms = list(dict.fromkeys(t.lower() for t in _WORD_RE.findall(q)))
    if not terms:
        raise InvalidRequest("q holds no word to search for (letters or digits)")
    if len(terms) > MAX_TERMS or any(len(t) > MAX_TERM_LEN for t in terms):
        raise InvalidRequest(f"at most {MAX_TERMS} words of at most {MAX_TERM_LEN} "
                             "characters each")
    return terms


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text)}


def entry_matches(entry: dict[str, Any], terms: list[str]) -> bool:
    """True when the entry's title, tags or body hold every term as a whole word."""
    have = words(entry.get("title", "")) | words(" ".join(entry.get("tags", []))) \
        | words(entry.get("body", ""))
    return all(t in have for t in terms)
