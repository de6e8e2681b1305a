"""Typed memory rules end to end (a real ``quire hub serve`` and the real CLI): by default
an editor's replica keeps back a guardrail edit that lowers its severity, changes its text
or deletes it (``policy_denied`` with the reason, the edit kept in the vault), the hub
never sees it; an admin's replica publishes the same kind of change; a space ``allow`` rule
lets editors, and the kept edit then publishes; raising a severity or adding a guardrail is
accepted from editors. ``quire admin rules list`` shows the effective rules, defaults
first."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_local_rules_e2e import hub_batches
from tests.e2e.test_revocation_e2e import hub, q  # noqa: F401 (fixture)
from tests.kit.hubproc import HubProcess

DEFAULT = "default:guardrails-additive"


def write_guard(vault: Path, sev: str, body: str = "never force-push to main") -> Path:
    p = vault / "guardrail" / "no-force-push.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"---\ntitle: no force push\nmeta:\n  severity: {sev}\n---\n{body}\n")
    return p


def test_guardrails_are_additive_locally_and_at_the_hub(hub: HubProcess,  # noqa: F811
                                                        tmp_path: Path) -> None:
    owner, ann, ada = tmp_path / "owner", tmp_path / "ann", tmp_path / "ada"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    space = q(owner, "admin", "space", "create", "team")["space"]
    for home, name, role in ((ann, "ann", "editor"), (ada, "ada", "admin")):
        code = q(owner, "admin", "invite", "create", "team", "--role", role)["code"]
        q(home, "join", hub.url, "--invite", code, "--vault", str(tmp_path / f"{name}-vault"),
          "--device", name)
    eff = q(owner, "admin", "rules", "list", "team")["effective"]
    assert [(r["id"], r["effect"], r.get("when")) for r in eff] == [
        (DEFAULT, "deny", "weakens"), ("default:agents-no-bulk-delete", "deny", None)]

    av = tmp_path / "ann-vault"
    write_guard(av, "warn")
    assert q(ann, "sync")["sync"]["pushed"] == 1  # adding a guardrail: editors may
    write_guard(av, "block")
    assert q(ann, "sync")["sync"]["pushed"] == 1  # raising its severity: editors may
    n = len(hub_batches(owner, space["id"]))

    for text_or_sev, expect in ((("warn", "never force-push to main"), "lowers its severity"),
                                (("block", "force-push when sure"), "changes its body")):
        g = write_guard(av, *text_or_sev)
        res = q(ann, "sync")
        assert res["last_error"] is None and res["sync"]["pushed"] == 0, res
        [d] = res["sync"]["policy_denied"]
        assert (d["id"], d["action"], d["rule"]) == ("guardrail/no-force-push", "update",
                                                     DEFAULT)
        assert expect in d["reason"], d
        assert text_or_sev[1] in g.read_text()  # the edit is kept
    g.unlink()
    res = q(ann, "sync")
    assert [(d["action"], d["rule"]) for d in res["sync"]["policy_denied"]] == [
        ("delete", DEFAULT)]
    assert len(hub_batches(owner, space["id"])) == n  # the hub never saw any of them

    # a space rule allowing editors: ann's kept deletion now publishes
    rule = q(owner, "admin", "rules", "add", "team", "--allow", "update,delete", "--who",
             "editor", "--entries", "guardrail/*")["rule"]
    assert rule["effect"] == "allow"
    eff = q(owner, "admin", "rules", "list", "team")["effective"]
    assert [(r["id"], r["source"]) for r in eff] == [
        (DEFAULT, "default"), ("default:agents-no-bulk-delete", "default"), (rule["id"], "space")]
    res = q(ann, "sync")
    assert res["sync"]["policy_denied"] == [] and res["sync"]["pushed"] == 1, res
    last = hub_batches(owner, space["id"])[-1]
    assert [(op["op"], op["id"]) for op in last["ops"]] == [
        ("delete", "guardrail/no-force-push")]
    q(owner, "admin", "rules", "remove", "team", rule["id"])

    # an admin's replica may weaken one (the rule is gone again: editors may not)
    adv = tmp_path / "ada-vault"
    q(ada, "sync")
    p = adv / "guardrail" / "no-secrets.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("---\ntitle: no secrets\nmeta:\n  severity: block\n---\nno keys\n")
    assert q(ada, "sync")["sync"]["pushed"] == 1
    p.write_text("---\ntitle: no secrets\nmeta:\n  severity: info\n---\nno keys, mostly\n")
    res = q(ada, "sync")
    assert res["sync"]["pushed"] == 1 and res["sync"]["policy_denied"] == [], res
