"""The page tools' lists are cut by what they cost as sent (replica/mcp/page_tools.py
``fit``), as every other answer is (replica/mcp/bound.py): text full of quotes or
backslashes costs twice its UTF-8 size over the JSON-RPC message. Before (b07ea24) ``fit``
counted plain UTF-8, and a list of such rows could pass the 48 KiB bound, then be refused
whole as ``too_large``."""

from __future__ import annotations

from replica.mcp.bound import MAX_RESULT_BYTES, answer_cost
from replica.mcp.page_tools import ANSWER_BYTES, fit


def test_a_list_of_quotes_is_cut_to_what_it_costs_as_sent() -> None:
    rows = [{"id": f"page/p{i}", "line": '"' * 400 + "\\" * 400} for i in range(200)]
    kept = fit(rows)
    assert 1 <= len(kept) < len(rows)
    assert answer_cost({"items": kept}) <= ANSWER_BYTES < MAX_RESULT_BYTES


def test_plain_rows_fill_the_budget() -> None:
    rows = [{"id": f"page/p{i}", "line": "x" * 400} for i in range(200)]
    kept = fit(rows)
    assert answer_cost({"items": kept}) <= ANSWER_BYTES
    assert answer_cost({"items": rows[: len(kept) + 1]}) > ANSWER_BYTES - 512
