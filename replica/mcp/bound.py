"""The bound on every ``quire mcp`` answer, counted in bytes as sent (shared/answers.py: the
hub's remote endpoint keeps the same bound), and how a conflict packet is cut to fit it.

An answer is one JSON object, sent once: as the text of the tool result (every host shows
text; a second copy as structured content would double each answer). ``MAX_RESULT_BYTES``
bounds the result as it goes over the wire: UTF-8, with the object's text escaped again by
the JSON-RPC message (``wire_cost`` in replica/conflicts/packets.py). A page of CJK text or
of quotes is therefore cut shorter than one of ASCII letters, and never comes back larger.

    read       title, tags, links, meta ─ up to FIELDS_INLINE inline, else in pages
                                          (``fields_page=N``; joined: one JSON object)
               body ─ from ``offset``, at most ``max_chars`` characters and what fits
                      READ_BUDGET with the rest (``more``, ``next_offset``)
    packet     the first that fits PACKET_BUDGET: bodies over 16 KiB in pages; every body
               in pages; every body and every side's other fields in pages
               (``conflict_show page=N``; ``fields_paged`` says which)

What each level pages depends only on the packet, so page numbers stay the same between the
claim and the pages read after it; a packet that fits at none of them is refused before a
claim is taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replica.conflicts.packets import MAX_INLINE_BYTES
from shared.answers import (
    ANSWER_BUDGET,
    FIELDS_INLINE,
    FIELDS_PAGE,
    MAX_RESULT_BYTES,
    NOTICE,
    PREVIEW_CHARS,
    READ_BUDGET,
    answer_cost,
    check_offset,
    entry_answer,
    entry_fields_text,
    fit_rows,
)
from shared.errors import TooLarge

__all__ = ["ANSWER_BUDGET", "FIELDS_INLINE", "FIELDS_PAGE", "MAX_RESULT_BYTES", "NOTICE",
           "PACKET_BUDGET", "PREVIEW_CHARS", "READ_BUDGET", "answer_cost", "check_offset",
           "entry_answer", "entry_fields_text", "fit_packet", "fit_rows"]

PACKET_BUDGET = 40 * 1024  # a packet (leaves room for the claim and the advice with it)


def fit_packet(show: Callable[[int, bool], dict[str, Any]]) -> tuple[dict[str, Any], int, bool]:
    """The packet at the first paging level that fits ``PACKET_BUDGET``, with that level
    (``inline``, ``page_fields``) for its pages. ``show(inline, page_fields)`` builds it.
    Judged without the claim (which changes while the packet does not), so the level, and
    the page numbers, are the same for every call; none fits: ``too_large``."""
    pkt: dict[str, Any] = {}
    for inline, page_fields in ((MAX_INLINE_BYTES, False), (0, False), (0, True)):
        pkt = show(inline, page_fields)
        if answer_cost({k: v for k, v in pkt.items() if k != "claim"}) <= PACKET_BUDGET:
            return pkt, inline, page_fields
    raise TooLarge("the packet does not fit one answer even with every part in pages "
                   f"(it would cost {answer_cost(pkt)} bytes; at most {PACKET_BUDGET})",
                   {"max_bytes": PACKET_BUDGET, "fields": len(pkt.get("fields") or [])})
