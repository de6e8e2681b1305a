"""Issue 28, Deliver item 1: every MCP session is an agent principal, end to end. The attacks
of its "Done when", run as an agent host runs them: a real ``quire hub serve`` process, the
real ``quire`` CLI, ``quire watch`` as a process, and ``quire mcp`` driven over stdio by the
official MCP client. The guard's rule matching is also checked on the real hub application
in-process (tests/kit/inproc.py) and as a table over ``shared/policy.py``.

What each test prevents (the hole it showed before the fix, file:function):

- a session without ``--agent`` / ``QUIRE_AGENT`` ran on the member's device credential
  (replica/mcp/server.py Session.__init__ minted no grant; replica/app/service.py
  open_client fell back to the device): it published without ``--write``, past a deny rule
  for agents, and with an admin's rights (a guardrail lowered), and the audit named no
  agent. Now it never starts: exit 2, one line naming ``--agent NAME`` / ``QUIRE_AGENT``;
  an exported delegation names the agent itself, and one for another agent, or a machine
  with several spaces and no ``--space``, is refused the same way;
- an agent's ``write`` went into the shared vault (Session.write) and the human's next
  ``quire sync``, or a running ``quire watch``, published it with the device credential
  (replica/engine/push.py Publisher._build_ops took every dirty entry), even a read-only
  session's write or one a rule denies to agents; the other way round, an agent's ``sync``
  published the human's pending edits under the agent. Now the write stays in the agent's
  overlay (replica/store/overlay.py) and only its own sync publishes it
  (replica/engine/agent_push.py);
- ``bootstrap_world_model`` answered for any joined space (Session.bootstrap_world_model
  passed ``space`` through unchecked), and its ``space_not_found`` listed every joined
  space;
- an allow rule naming a member (or a role) applied to every agent of that member
  (shared/policy.py rule_applies), and no rule could name one agent (``agent:NAME``).

Each test was ``xfail(strict=True)`` on the code it was written against, with the hole as
its reason; the marks went as the fix made each pass."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from replica.hubclient.auth import DPoPAuth
from replica.hubclient.client import HubClient
from replica.machine.credentials import Tokens
from replica.machine.home import Home
from shared import policy
from shared.digest import genesis_digest
from shared.entry import make_entry
from shared.errors import PolicyDenied
from shared.ids import new_id
from shared.wire import Op, build_batch
from tests.kit.cli import QUIRE, CliMember, CliTeam, device_auth, qjson, quire
from tests.kit.host import REPO
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.inproc import BASE_URL
from tests.kit.inproc import Space as InprocSpace
from tests.kit.mcp_answer import answer
from tests.kit.watcher import HUB_ENV, WatchProc, wait_for
from tests.replica.conflicts.conftest import entry

SESSION_TIMEOUT_S = 120.0

# ---------------------------------------------------------------- the hub and the team


@pytest.fixture(scope="module")
def agent_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    """One real hub process for this module (with the watcher tests' fast event keepalives,
    so ``quire watch`` runs here as in tests/watch), and the owner's machine."""
    root = tmp_path_factory.mktemp("agent-principal")
    code = init_hub(root / "hub")
    proc = serve_hub(root / "hub", env=HUB_ENV)
    owner = root / "owner"
    qjson(owner, "join", proc.url, "--invite", code, "--device", "owner")
    yield proc, owner
    proc.stop()


def new_team(agent_hub: tuple[Any, Path], root: Path, name: str | None = None) -> CliTeam:
    hub, owner = agent_hub
    return CliTeam(hub, owner, root, name or "ap-" + uuid.uuid4().hex[:8])


def user_id(m: CliMember) -> str:
    uid = Home(m.home).hubs()[0].user_id
    assert uid
    return uid


def add_rule(team: CliTeam, effect: str, actions: str, who: str, entries: str,
             check: bool = True) -> subprocess.CompletedProcess[str]:
    return quire(team.owner, "admin", "rules", "add", team.name, f"--{effect}", actions,
                 "--who", who, "--entries", entries, "--json", check=check)


def owner_client(team: CliTeam) -> HubClient:
    h = Home(team.owner).hubs()[0]
    return HubClient(h.url, auth=device_auth(h), hub_key=h.public_key)


def publications(team: CliTeam, eid: str) -> list[dict[str, Any]]:
    """Every accepted batch of the team's space that writes ``eid``, with the principal the
    hub recorded (``author``: user, device, agent), the batch's signed provenance and the
    ``publish`` audit event's actor (``delegation`` included)."""
    sid = team.space["id"]
    with owner_client(team) as c:
        head = c.head(sid)
        page = c.changes(sid, epoch=head["epoch"], after=0,
                         after_digest=genesis_digest(sid, head["epoch"]), limit=5000)
        audit = {ev["details"].get("batch_id"): ev["actor"] for ev in c.audit(sid, 0)
                 if ev["action"] == "publish"}
    out = []
    for ch in page.changes:
        ops = [op for op in ch.batch.ops if op.entry_id == eid]
        if ops:
            out.append({"seq": ch.seq, "batch_id": ch.batch.batch_id, "author": ch.author,
                        "provenance": ch.batch.provenance,
                        "audit_actor": audit.get(ch.batch.batch_id),
                        "entry": ops[-1].entry})
    return out


def hub_entry(team: CliTeam, eid: str) -> Any:
    """The entry as the hub has it now (None: absent or deleted)."""
    pubs = publications(team, eid)
    if not pubs or pubs[-1]["entry"].deleted:
        return None
    return pubs[-1]["entry"]


def assert_only_as_agent(team: CliTeam, eid: str, *, may_publish: str | None) -> None:
    """Nothing of ``eid`` reached the hub under a person's own credential: every batch that
    writes it names an agent in its author and in the audit (with the delegation); and
    when ``may_publish`` is None, no batch writes it at all."""
    pubs = publications(team, eid)
    as_person = [p for p in pubs if not (p["author"] or {}).get("agent")
                 or not (p["audit_actor"] or {}).get("agent")
                 or not (p["audit_actor"] or {}).get("delegation")]
    assert not as_person, f"{eid} was published with a person's credential: {as_person}"
    if may_publish is None:
        assert not pubs, f"{eid} was published although no principal may: {pubs}"
    else:
        assert all(p["author"]["agent"] == may_publish for p in pubs), pubs


# ---------------------------------------------------------------- MCP sessions


def mcp_params(home: Path, args: list[str], env: dict[str, str] | None = None
               ) -> StdioServerParameters:
    e = {"QUIRE_HOME": str(home), "PATH": os.environ.get("PATH", ""), **(env or {})}
    return StdioServerParameters(command=QUIRE[0], args=[*QUIRE[1:], "mcp", *args], env=e,
                                 cwd=str(REPO))


def run_session(home: Path, args: list[str], script: list[tuple[str, dict[str, Any]]],
                env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start ``quire mcp ARGS`` as a host would and call ``script``'s tools in order.

    ``started`` False: the server never completed the MCP handshake (the fix may refuse to
    start); ``results``: ``(is_error, structured content)`` per call."""
    state: dict[str, Any] = {"started": False, "results": []}

    async def go() -> None:
        async with Client(mcp_params(home, args, env)) as client:
            state["started"] = True
            for name, a in script:
                r = await client.call_tool(name, a)
                state["results"].append((r.is_error, answer(r)))

    try:
        asyncio.run(asyncio.wait_for(go(), SESSION_TIMEOUT_S))
    except Exception as e:  # noqa: BLE001 - a refusal to start is an allowed outcome
        if state["started"]:
            raise
        state["error"] = repr(e)
    return state


def refusal_to_start(home: Path, args: list[str], env: dict[str, str] | None = None
                     ) -> subprocess.CompletedProcess[str]:
    """``quire mcp ARGS`` as a plain process with no client (stdin closed): a refusal to
    start exits at once with its message on stderr; a server that starts ends on EOF with
    0."""
    e = {**os.environ, "QUIRE_HOME": str(home), **(env or {})}
    for k in ("QUIRE_AGENT", "QUIRE_DELEGATION_TOKEN"):
        if k not in (env or {}):
            e.pop(k, None)
    return subprocess.run([*QUIRE, "mcp", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=e, cwd=REPO, timeout=60)


def assert_refuses_to_start(home: Path, args: list[str], env: dict[str, str] | None,
                            *names: str) -> str:
    """The session never starts: ``quire mcp`` exits 2 (usage) with one line on stderr
    naming each of ``names``; and an MCP host gets no server either."""
    p = refusal_to_start(home, args, env)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    for name in names:
        assert name in lines[0], lines
    s = run_session(home, args, [("status", {})], env)
    assert not s["started"], s
    return lines[0]


def write_call(eid: str, body: str, **meta: Any) -> tuple[str, dict[str, Any]]:
    args: dict[str, Any] = {"entry_id": eid, "title": eid, "body": body}
    if meta:
        args["meta"] = meta
    return "write", args


def refused_at_write(s: dict[str, Any], i: int = 0) -> list[dict[str, Any]]:
    """Call ``i`` of the session, a write, was refused at the call with nothing recorded
    (docs/decisions.md D114): its denials."""
    err, doc = s["results"][i]
    assert err and doc["error"]["code"] == "policy_denied", doc
    return list(doc["error"]["details"]["denied"])


def human_sync(m: CliMember, space: str | None = None) -> dict[str, Any]:
    """The human's ``quire sync --json`` (exit 0 or 3)."""
    return qjson(m.home, "sync", *([space] if space else []))


# ---------------------------------------------------------------- host configurations


# (quire mcp arguments after --space, environment, the agent it acts as or None for "no
# agent named", whether it may publish)
CONFIGS = [
    pytest.param([], {}, None, False, id="no-agent"),
    pytest.param(["--write"], {}, None, True, id="no-agent-write"),
    pytest.param(["--agent", "cfg-bot"], {}, "cfg-bot", False, id="agent-read"),
    pytest.param(["--agent", "cfg-bot", "--write"], {}, "cfg-bot", True, id="agent-write"),
    pytest.param([], {"QUIRE_AGENT": "env-bot"}, "env-bot", False, id="env-agent-read"),
    pytest.param(["--write"], {"QUIRE_AGENT": "env-bot"}, "env-bot", True,
                 id="env-agent-write"),
]


def check_session_publishes_as(team: CliTeam, me: CliMember, args: list[str],
                               env: dict[str, str], agent: str, write: bool, eid: str,
                               delegation: str | None = None) -> dict[str, Any]:
    """A write and a sync in a session started with ``args``/``env``, then the hub's
    record: without write scope nothing is published; with it, one batch whose author,
    audit actor (with the delegation) and provenance name ``agent``. Never the member's own
    credential, and the session's status names the principal."""
    s = run_session(me.home, args, [("status", {}), write_call(eid, "the model wrote this\n"),
                                    ("sync", {})], env)
    assert s["started"], s
    status = s["results"][0][1]
    assert status["agent"] == agent, status
    assert status["delegation"]["agent"] == agent
    assert status["delegation"]["scope"] == ("write" if write else "read")
    assert status["role"] == ("editor" if write else "viewer"), status
    if delegation is not None:
        assert status["delegation"]["delegation"] == delegation, status
    assert_only_as_agent(team, eid, may_publish=agent if write else None)
    err, res = s["results"][2]
    assert not err, res
    if write:
        pubs = publications(team, eid)
        assert len(pubs) == 1, pubs
        assert pubs[0]["author"]["user"] == user_id(me)
        assert pubs[0]["audit_actor"]["agent"] == agent
        assert pubs[0]["audit_actor"]["delegation"] == status["delegation"]["delegation"]
        assert pubs[0]["provenance"]["agent"] == agent
        assert pubs[0]["provenance"]["tool"] == "mcp:sync"
    else:
        # this write is refused at the call (and so was any earlier one): none is published
        assert [d["rule"] for d in refused_at_write(s, 1)] == ["role:viewer"]
        assert res["policy_denied"] == [], res
    return status


@pytest.mark.e2e
@pytest.mark.parametrize(("extra", "env", "agent", "write"), CONFIGS)
def test_every_host_configuration_publishes_only_as_an_agent(
        agent_hub: tuple[Any, Path], tmp_path: Path, extra: list[str], env: dict[str, str],
        agent: str | None, write: bool) -> None:
    """Each way a host can start ``quire mcp`` (with and without --agent, --write,
    QUIRE_AGENT): without an agent name the session never starts (exit 2, one line naming
    --agent NAME and QUIRE_AGENT); without --write nothing is published; with both, the
    audit names the agent and its delegation. Never the member's own credential."""
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    args = ["--space", team.name, *extra]
    eid = "page/from-the-model"
    if agent is None:
        assert_refuses_to_start(me.home, args, env, "--agent NAME", "QUIRE_AGENT")
        human_sync(me)  # nothing of the model's anywhere for the person's sync to find
        assert publications(team, eid) == []
        return
    check_session_publishes_as(team, me, args, env, agent, write, eid)


@pytest.mark.e2e
@pytest.mark.parametrize("write", [False, True], ids=["read", "write"])
def test_an_exported_delegation_token_is_the_sessions_principal(
        agent_hub: tuple[Any, Path], tmp_path: Path, write: bool) -> None:
    """A host that exports a delegation a member minted (``quire delegate create``) and
    names no agent: the session acts as the token's agent under exactly that delegation
    (no second one minted), with the token's scope; naming the same agent is accepted."""
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    minted = qjson(me.home, "delegate", "create", "--space", team.name, "--agent",
                   "exported-bot", *(["--write"] if write else []))
    env = {"QUIRE_DELEGATION_TOKEN": minted["token"]}
    check_session_publishes_as(team, me, ["--space", team.name], env, "exported-bot", write,
                               "page/exported-0", minted["delegation"]["id"])
    check_session_publishes_as(team, me, ["--agent", "exported-bot"], env, "exported-bot",
                               write, "page/exported-1", minted["delegation"]["id"])
    live = qjson(me.home, "delegate", "list")["delegations"]
    assert [d["id"] for d in live if d["agent"] == "exported-bot"] == [
        minted["delegation"]["id"]], live


@pytest.mark.e2e
def test_a_token_for_another_agent_or_no_space_refuses_to_start(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    """A token exported for agent Y with ``--agent X`` (or QUIRE_AGENT X) is refused, and so
    is a machine with two spaces and no ``--space``: exit 2 before the MCP handshake,
    nothing minted, nothing published."""
    a = new_team(agent_hub, tmp_path / "a")
    b = new_team(agent_hub, tmp_path / "b")
    me = a.member("me")
    token = qjson(me.home, "delegate", "create", "--space", a.name, "--agent", "agent-y",
                  "--write")["token"]
    env = {"QUIRE_DELEGATION_TOKEN": token}
    line = assert_refuses_to_start(me.home, ["--space", a.name, "--agent", "agent-x"], env,
                                   "agent-y", "agent-x")
    assert "QUIRE_DELEGATION_TOKEN" in line
    assert_refuses_to_start(me.home, ["--space", a.name], {**env, "QUIRE_AGENT": "agent-x"},
                            "agent-y")
    qjson(me.home, "join", agent_hub[0].url, "--invite", b.invite(), "--vault",
          str(tmp_path / "vault-b"))
    line = assert_refuses_to_start(me.home, ["--agent", "two-spaces", "--write"], {},
                                   "--space")
    assert a.name in line and b.name in line
    live = qjson(me.home, "delegate", "list")["delegations"]
    assert [d["agent"] for d in live] == ["agent-y"], live  # nothing else was minted
    for team in (a, b):
        with owner_client(team) as c:
            assert [e for e in c.audit(team.space["id"], 0)
                    if e["action"] == "publish"] == []


@pytest.mark.e2e
def test_documented_host_setups_publish_as_their_agent(agent_hub: tuple[Any, Path],
                                                       tmp_path: Path) -> None:
    """docs/agents.md's host configurations (the ``claude mcp add`` line and each JSON
    config), started as written against a space named ``team``: each publishes under its
    own agent's delegation, and the audit says so."""
    from tests.replica.mcp.test_agent_setup_docs import documented_setups

    team = new_team(agent_hub, tmp_path, "team")
    me = team.member("me")
    setups = documented_setups()
    assert len(setups) == 4, setups
    for i, (where, argv) in enumerate(setups):
        assert argv[0] == "mcp", argv
        args = list(argv[1:])
        eid = f"note/setup-{i}"
        s = run_session(me.home, args, [write_call(eid, f"{where}\n"), ("sync", {})])
        assert s["started"] and not s["results"][1][0], (where, s)
        agent = args[args.index("--agent") + 1]
        pubs = publications(team, eid)
        assert [p["author"]["agent"] for p in pubs] == [agent], (where, pubs)
        assert pubs[0]["audit_actor"]["agent"] == agent and pubs[0]["audit_actor"]["delegation"]


# ---------------------------------------------------------------- no --agent: the attacks


@pytest.mark.e2e
def test_a_deny_rule_for_agents_holds_for_a_session_started_without_agent(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    """A host that forgot --agent: the session never starts, so the model gets no tool to
    write secret/* with the member's rights; the same write as a named agent is refused by
    the rule and stays out of the person's sync too."""
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    add_rule(team, "deny", "create,update,delete", "agents", "secret/*")
    eid = "secret/deploy-key-notes"
    assert_refuses_to_start(me.home, ["--space", team.name, "--write"], {}, "--agent NAME")
    s = run_session(me.home, ["--space", team.name, "--write"],
                    [write_call(eid, "where the deploy key lives\n"), ("sync", {})],
                    {"QUIRE_AGENT": "named-bot"})
    assert s["started"], s
    assert [d["id"] for d in refused_at_write(s)] == [eid]
    human_sync(me)
    assert_only_as_agent(team, eid, may_publish=None)


@pytest.mark.parametrize("extra", [
    pytest.param(["--write"], id="no-agent"),
    pytest.param(["--agent", "eager-bot", "--write"], id="agent"),
])
@pytest.mark.e2e
def test_on_an_admins_machine_a_model_cannot_lower_a_guardrail(
        agent_hub: tuple[Any, Path], tmp_path: Path, extra: list[str]) -> None:
    """The member is an admin of the space (admins may weaken guardrails); the model, given
    ``quire mcp`` on that machine, lowers a ``block`` guardrail to ``info`` and syncs."""
    team = new_team(agent_hub, tmp_path)
    ada = team.member("ada", role="admin")
    gid = "guardrail/no-prod-writes"
    ada.write(entry(gid, "never write to prod\n", title="no prod", meta={"severity": "block"}))
    assert human_sync(ada)["sync"]["pushed"] == 1
    args = ["--space", team.name, *extra]
    if "--agent" not in extra:
        assert_refuses_to_start(ada.home, args, {}, "--agent NAME")
    else:
        s = run_session(ada.home, args, [
            write_call(gid, "never write to prod\n", severity="info"), ("sync", {})])
        assert s["started"], s
        denied = refused_at_write(s)
        assert [(d["id"], d["rule"]) for d in denied] == [
            (gid, "default:guardrails-additive")]
    human_sync(ada)  # the admin's own sync: nothing of the model's to publish
    assert hub_entry(team, gid).meta["severity"] == "block"
    assert len(publications(team, gid)) == 1  # the admin's own create only


# ---------------------------------------------------------------- the human's sync


@pytest.mark.e2e
def test_a_read_only_agents_write_is_not_published_by_the_humans_sync(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    eid = "page/agent-draft"
    s = run_session(me.home, ["--space", team.name, "--agent", "reader"],
                    [write_call(eid, "an agent's draft\n"), ("sync", {})])
    assert s["started"], s
    assert [d["rule"] for d in refused_at_write(s)] == ["role:viewer"]
    assert publications(team, eid) == []  # the session itself published nothing (today too)
    human_sync(me)
    assert_only_as_agent(team, eid, may_publish=None)


@pytest.mark.e2e
def test_a_rule_denied_agent_write_is_not_published_by_the_humans_sync(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    add_rule(team, "deny", "create,update,delete", "agents", "secret/*")
    eid = "secret/agent-found-a-token"
    s = run_session(me.home, ["--space", team.name, "--agent", "writer", "--write"],
                    [write_call(eid, "an agent's finding\n"), ("sync", {})])
    assert s["started"], s
    assert [d["id"] for d in refused_at_write(s)] == [eid]
    human_sync(me)
    # "not published, or published under the agent and refused by its rules": either way
    # nothing reaches the hub
    assert_only_as_agent(team, eid, may_publish=None)


@pytest.mark.e2e
def test_an_agents_guardrail_lowering_is_not_published_by_the_admins_sync(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    team = new_team(agent_hub, tmp_path)
    ada = team.member("ada", role="admin")
    gid = "guardrail/no-force-push"
    ada.write(entry(gid, "never force-push main\n", title="no force", meta={"severity": "block"}))
    human_sync(ada)
    s = run_session(ada.home, ["--space", team.name, "--agent", "eager-bot", "--write"], [
        write_call(gid, "never force-push main\n", severity="info"), ("sync", {})])
    assert s["started"], s
    assert [d["id"] for d in refused_at_write(s)] == [gid]  # refused to the agent
    human_sync(ada)  # the admin's own sync, with nothing of their own to publish
    assert hub_entry(team, gid).meta["severity"] == "block"
    assert len(publications(team, gid)) == 1, publications(team, gid)  # the admin's create


@pytest.mark.e2e
def test_a_running_watcher_does_not_publish_an_agents_refused_writes(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    add_rule(team, "deny", "create,update,delete", "agents", "secret/*")
    watcher = WatchProc(me)
    try:
        watcher.wait_ready()
        ro = run_session(me.home, ["--space", team.name, "--agent", "reader"],
                         [write_call("page/agent-draft", "read-only draft\n")])
        rw = run_session(me.home, ["--space", team.name, "--agent", "writer", "--write"],
                         [write_call("secret/agent-finding", "denied to agents\n")])
        assert ro["started"] and rw["started"], (ro, rw)
        # a barrier: the person's own edit, made after the agents', published by the
        # watcher; its sync had both agent files (or the agents' overlay) to look at
        me.write(entry("page/human-sentinel", "mine\n", title="sentinel"))
        wait_for(lambda: publications(team, "page/human-sentinel"),
                 why=lambda: f"the watcher did not publish the person's edit: "
                             f"{watcher.log.read_text()[-2000:]}", step=0.3)
    finally:
        watcher.stop()
    for eid in ("page/agent-draft", "secret/agent-finding"):
        assert_only_as_agent(team, eid, may_publish=None)
    sentinel = publications(team, "page/human-sentinel")
    assert sentinel[0]["author"]["agent"] is None  # the person's edit stays the person's


@pytest.mark.e2e
def test_an_agents_sync_does_not_publish_the_humans_edits_as_the_agent(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    """The other direction of "never fold them into the human's batch": a person's pending
    edit is not the agent's to publish (it would carry the agent's name and be judged by
    the agent's rules, not the person's)."""
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    me.write(entry("page/human-notes", "the person's own words\n", title="notes"))
    s = run_session(me.home, ["--space", team.name, "--agent", "helper", "--write"],
                    [write_call("page/agent-notes", "the agent's words\n"), ("sync", {})])
    assert s["started"] and not s["results"][1][0], s
    agent_pubs = publications(team, "page/agent-notes")
    assert [p["author"]["agent"] for p in agent_pubs] == ["helper"], agent_pubs
    human = publications(team, "page/human-notes")
    assert all((p["author"] or {}).get("agent") is None for p in human), human
    human_sync(me)  # the person's own sync publishes it, as the person
    human = publications(team, "page/human-notes")
    assert [(p["author"] or {}).get("agent") for p in human] == [None], human


# ---------------------------------------------------------------- one space per session


@pytest.mark.e2e
def test_bootstrap_world_model_for_another_space_is_refused(agent_hub: tuple[Any, Path],
                                                            tmp_path: Path) -> None:
    a = new_team(agent_hub, tmp_path / "a")
    b = new_team(agent_hub, tmp_path / "b")
    me = a.member("me")
    vault_b = tmp_path / "vault-b"
    qjson(me.home, "join", agent_hub[0].url, "--invite", b.invite(), "--vault", str(vault_b))
    g = vault_b / "guardrail" / "b-only-secret.md"
    g.parent.mkdir(parents=True)
    g.write_text("---\ntitle: B's private rule\nmeta:\n  severity: block\n---\nB only\n")
    assert human_sync(me, b.name)["sync"]["pushed"] == 1
    s = run_session(me.home, ["--space", a.name, "--agent", "bot"], [
        ("bootstrap_world_model", {"space": a.name}),
        ("bootstrap_world_model", {"space": b.name}),
        ("bootstrap_world_model", {"space": b.space["id"]}),
        ("bootstrap_world_model", {"space": "no-such-space"})])
    assert s["started"], s
    own_err, own = s["results"][0]
    assert not own_err and own["space"]["id"] == a.space["id"], own
    for err, res in s["results"][1:]:
        text = json.dumps(res)
        assert err, res
        assert res["error"]["code"] in ("forbidden", "space_not_found", "invalid_request")
        # neither B's content nor its name or id (a candidates list of every joined space
        # would tell the model what else this machine holds)
        assert "b-only-secret" not in text and "B only" not in text, text
        cands = (res["error"].get("details") or {}).get("candidates") or []
        assert all(c.get("id") == a.space["id"] for c in cands), cands


# ---------------------------------------------------------------- allow rules and agents


@pytest.mark.e2e
def test_a_members_allow_rule_does_not_reach_their_agents_over_mcp(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:
    team = new_team(agent_hub, tmp_path)
    me = team.member("me")
    gid = "guardrail/no-friday-deploys"
    me.write(entry(gid, "no deploys on friday\n", title="friday", meta={"severity": "block"}))
    human_sync(me)
    add_rule(team, "allow", "update,delete", user_id(me), "guardrail/*")
    s = run_session(me.home, ["--space", team.name, "--agent", "eager-bot", "--write"], [
        write_call(gid, "no deploys on friday\n", severity="info"), ("sync", {})])
    assert s["started"], s
    assert [d["id"] for d in refused_at_write(s)] == [gid]
    assert hub_entry(team, gid).meta["severity"] == "block"


# in-process: the guard itself, on the real hub application


def _delegated_client(sp: InprocSpace, dev: Any, agent: str, scope: str = "write"
                      ) -> HubClient:
    with dev.client() as c:
        res = c.admin_post("/v1/delegations", {"space": sp.id, "agent": agent,
                                               "scope": scope, "ttl_seconds": 3600})
    auth = DPoPAuth(dev.key, Tokens(res["token"], None, 2**62, sp.hub.url))
    return HubClient(BASE_URL, auth=auth, transport=sp.hub.transport,
                     hub_key=sp.hub.public_key)


def _guardrail_scene(sp: InprocSpace, tmp_path: Path) -> tuple[Any, Any, Any]:
    """alice (editor) published ``guardrail/g`` at block; the space allows alice (by user
    id) to update and delete guardrails."""
    alice = sp.replica(tmp_path, "alice")
    g = make_entry({"id": "guardrail/g", "title": "g", "body": "careful\n",
                    "meta": {"severity": "block"}})
    alice.write(g)
    alice.sync()
    sp.admin.admin_post(f"/v1/spaces/{sp.id}/rules", {
        "effect": "allow", "who": alice.device.user_id, "actions": ["update", "delete"],
        "entries": "guardrail/*"})
    lowered = make_entry({"id": "guardrail/g", "title": "g", "body": "careful\n",
                          "meta": {"severity": "info"}})
    return alice, g, lowered


def _push(client: HubClient, sp: InprocSpace, alice: Any, op: Op) -> dict[str, Any]:
    h = client.head(sp.id)
    batch = build_batch(alice.device.key, batch_id=new_id(), replica_id=alice.engine.replica_id,
                        space=sp.id, epoch=h["epoch"], parent_seq=h["seq"],
                        parent_digest=h["digest"], ops=[op])
    return client.push(sp.id, batch)


def test_a_members_allow_rule_lets_the_member_lower_a_guardrail(
        space: InprocSpace, tmp_path: Path) -> None:  # noqa: F811
    """The control for the two tests below: the rule works for the member it names."""
    alice, g, lowered = _guardrail_scene(space, tmp_path)
    try:
        assert _push(alice.client, space, alice, Op(lowered, g.version))["seq"] >= 2
    finally:
        alice.close()


def test_the_guard_refuses_an_agent_its_members_allow_rule(
        space: InprocSpace, tmp_path: Path) -> None:  # noqa: F811
    alice, g, lowered = _guardrail_scene(space, tmp_path)
    agent = _delegated_client(space, alice.device, "eager-bot")
    try:
        with pytest.raises(PolicyDenied) as e:
            _push(agent, space, alice, Op(lowered, g.version))
        assert e.value.details["denied"][0]["rule"] == "default:guardrails-additive"
        # and the head tells the agent's replica only the rules that apply to it
        rules = agent.head(space.id)["rules"]
        assert all(r["who"] != alice.device.user_id for r in rules), rules
    finally:
        agent.close()
        alice.close()


def test_a_rule_naming_one_agent_reaches_that_agent_only(
        space: InprocSpace, tmp_path: Path) -> None:  # noqa: F811
    alice, g, lowered = _guardrail_scene(space, tmp_path)
    space.admin.admin_post(f"/v1/spaces/{space.id}/rules", {
        "effect": "allow", "who": "agent:eager-bot", "actions": ["update"],
        "entries": "guardrail/g"})
    other = _delegated_client(space, alice.device, "other-bot")
    named = _delegated_client(space, alice.device, "eager-bot")
    try:
        with pytest.raises(PolicyDenied):
            _push(other, space, alice, Op(lowered, g.version))
        assert _push(named, space, alice, Op(lowered, g.version))["seq"] >= 2
    finally:
        other.close()
        named.close()
        alice.close()


# the pure evaluation both sides run (shared/policy.py)

U = "01HZZZZZZZZZZZZZZZZZZZZZZZ"  # a user id
AS_MEMBER = policy.Actor(U, "editor")
AS_AGENT = policy.Actor(U, "editor", "eager-bot")
AS_OTHER_AGENT = policy.Actor(U, "editor", "other-bot")


def _rule(effect: str, who: str) -> policy.Rule:
    return policy.Rule("r", effect, who, ("update",), "guardrail/*")


@pytest.mark.parametrize(("effect", "who", "actor", "applies"), [
    ("allow", U, AS_MEMBER, True),
    pytest.param("allow", U, AS_AGENT, False, id="member-allow-not-to-agent"),
    ("deny", U, AS_AGENT, True),  # a member's deny binds their agents (never more rights)
    pytest.param("allow", "editor", AS_AGENT, False, id="role-allow-not-to-agent"),
    ("deny", "editor", AS_AGENT, True),
    ("allow", "agents", AS_AGENT, True),
    ("allow", "agents", AS_MEMBER, False),
    pytest.param("allow", "agent:eager-bot", AS_AGENT, True, id="named-agent"),
    ("allow", "agent:eager-bot", AS_OTHER_AGENT, False),
    ("deny", "agent:eager-bot", AS_MEMBER, False),
])
def test_which_rules_apply_to_an_agent(effect: str, who: str, actor: policy.Actor,
                                       applies: bool) -> None:
    assert policy.rule_applies(_rule(effect, who), actor) is applies
