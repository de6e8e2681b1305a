"""An agent's read scope before the hub has ever told this replica its read rules
(replica/app/agent_pages.py ``scope_txn``): the attack is an agent session started while
the hub is unreachable, on a machine whose syncs never asked for this agent's rules. It
used to read with the member's whole view, a read rule skipped by a missing answer; now it
reads nothing until a call reaches the hub, and then exactly what the rules allow."""

from __future__ import annotations

from replica.app import agent_pages
from replica.engine.agent_push import access_key
from replica.store import store as st


def test_an_agent_whose_rules_never_arrived_reads_nothing_until_they_do(tmp_path) -> None:
    store = st.Store(tmp_path / "store.sqlite")
    try:
        with store.engine.connect() as conn:
            unknown = agent_pages.scope_txn(conn, "scout")
        assert not agent_pages.readable(unknown, "page/hr/pay")
        assert not agent_pages.readable(unknown, "projects/alpha/plan")

        rules = [{"id": "r1", "effect": "deny", "who": "agent:scout", "entries": "page/hr/*",
                  "actions": ["read"]}]
        store.set_meta(access_key("scout"), {"role": "editor", "rules": rules})
        with store.engine.connect() as conn:
            known = agent_pages.scope_txn(conn, "scout")
        assert not agent_pages.readable(known, "page/hr/pay")
        assert agent_pages.readable(known, "projects/alpha/plan")

        store.set_meta(access_key("scout"), {"role": "editor", "rules": []})
        with store.engine.connect() as conn:  # the hub said: no read rule for it
            assert agent_pages.scope_txn(conn, "scout").unrestricted
    finally:
        store.close()
