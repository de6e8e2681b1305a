"""A day in the team, for people (issue 31, items 1-3): ``quire log`` (who changed what and
when, by name and local time), ``quire sync``'s lines for what it pulled and pushed,
``quire diff`` before publishing and between seqs, ``quire deleted`` and ``quire restore``
of one page as a normal edit. Real hub process, the real CLI.

Before (0506cf5): ``log``, ``diff``, ``deleted`` and ``restore`` did not exist (usage, exit
2) and ``quire sync`` said "pulled 1 batch(es)" without a page or a name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.entry import Entry
from tests.kit.cli import CliTeam, FreshHub, qjson, quire

pytestmark = [pytest.mark.e2e]

ULID = re.compile(r"\b[0-9a-hjkmnp-tv-z]{26}\b")
ZONE = {"TZ": "JST-9"}  # a fixed zone without tzdata or summer time: "JST"


def _no_ids(text: str) -> str:
    assert not ULID.search(text), f"an id in human output:\n{text}"
    return text


def test_log_sync_diff_deleted_restore_name_people_and_publish_one_page(
        hub: FreshHub, owner: Path, tmp_path: Path) -> None:
    team = CliTeam(hub, owner, tmp_path, "day-" + tmp_path.name[-6:].lower().replace("_", "-"))
    codes = [team.invite(), team.invite()]
    homes = {}
    for who, code in zip(("Alice", "Bob"), codes, strict=True):
        homes[who] = tmp_path / who / "home"
        # Bob types the URL with the API's /v1 (before: GET /v1/v1/hub, exit 5 "refused")
        url = hub.url + ("/v1/" if who == "Bob" else "")
        qjson(homes[who], "join", url, "--invite", code, "--name", f"{who} Example",
              "--device", who.lower(), "--vault", str(tmp_path / who / "vault"))
    alice, bob = homes["Alice"], homes["Bob"]
    avault, bvault = tmp_path / "Alice" / "vault", tmp_path / "Bob" / "vault"

    def write(vault: Path, e: Entry) -> None:
        from replica.vault import markdown as md

        p = md.entry_path(vault, e.id)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(md.render(e))

    write(avault, Entry(id="page/deploy", title="Deploy", tags=("ops",),
                        body="Deploy from main.\nNever on a Friday.\n"))
    write(avault, Entry(id="page/old-name", title="Old", body="moving\n"))
    pushed = quire(alice, "sync", env=ZONE).stdout
    assert "pushed 2 change(s)" in pushed
    assert re.search(r"pushed: \d{4}-\d\d-\d\d \d\d:\d\d JST  Alice Example  created "
                     r"page/deploy \(2 lines\), created page/old-name \(1 line\)", pushed), pushed

    # Bob edits through an agent's delegation: the log names him and the agent
    token = qjson(bob, "delegate", "create", "--space", team.space["name"], "--agent",
                  "scout", "--write")["token"]
    quire(bob, "sync")
    write(bvault, Entry(id="page/deploy", title="Deploy", tags=("ops", "release"),
                        body="Deploy from main.\nTag the release first.\nNever on a Friday.\n"))
    # quire diff: what the next sync would publish, fields by name, a unified body diff
    diff = _no_ids(quire(bob, "diff").stdout)
    assert "page/deploy: edited" in diff and "tags: [ops] -> [ops, release]" in diff
    assert "+Tag the release first." in diff and "--- page/deploy (synced)" in diff
    quire(bob, "sync", env={"QUIRE_DELEGATION_TOKEN": token, "QUIRE_TOOL": "editor"})
    assert "nothing to publish" in quire(bob, "diff").stdout

    # Alice's sync names the page, the person and the agent; not a batch count
    pulled = _no_ids(quire(alice, "sync", env=ZONE).stdout)
    assert "pulled 1 change(s)" in pulled and "batch(es)" not in pulled
    assert re.search(r"pulled: .* JST  Bob Example for agent scout  edited page/deploy "
                     r"\(\+1 -0 lines; tags\)  \[tool editor\]", pulled), pulled

    # a rename (a delete and a create of the same content) and a delete, by Alice
    (avault / "page" / "old-name.md").rename(avault / "page" / "new-name.md")
    quire(alice, "sync")
    (avault / "page" / "deploy.md").unlink()
    quire(alice, "sync")
    quire(bob, "sync")

    log = _no_ids(quire(bob, "log", env=ZONE).stdout).splitlines()
    assert "Alice Example  deleted page/deploy" in log[0]
    assert "renamed page/old-name to page/new-name" in log[1]
    assert "Bob Example for agent scout  edited page/deploy" in log[2]
    assert all(" JST  " in ln for ln in log)
    doc = qjson(bob, "log", "page/deploy", "--author", "bob example")
    assert [c["ops"][0]["action"] for c in doc["changes"]] == ["edited"]
    c = doc["changes"][0]
    assert c["author"]["name"] == "Bob Example" and c["author"]["agent"] == "scout"
    assert ULID.fullmatch(c["author"]["user"]) and isinstance(c["at"], int)
    assert [x["ops"][0]["action"] for x in qjson(bob, "log", "--agent", "scout")
            ["changes"]] == ["edited"]
    assert len(qjson(bob, "log", "--since", str(c["seq"]))["changes"]) == 3

    # deleted pages: who and when; restore one, published as Bob's own edit
    gone = _no_ids(quire(bob, "deleted", env=ZONE).stdout)
    assert re.search(r"page/deploy  deleted by Alice Example, .* JST", gone), gone
    assert "page/old-name  deleted by Alice Example" in gone and "renamed to page/new-name" in gone
    back = _no_ids(quire(bob, "restore", "page/deploy").stdout)
    assert "restored deleted page page/deploy" in back
    assert "pushed: " in back and "Bob Example  created page/deploy (3 lines)" in back
    quire(alice, "sync")
    assert "Tag the release first." in (avault / "page" / "deploy.md").read_text()
    assert qjson(bob, "deleted")["deleted"][0]["id"] == "page/old-name"

    # restore --at SEQ: the version right after Alice's first push, one page only
    first = min(x["seq"] for x in qjson(alice, "log", "page/deploy")["changes"])
    between = _no_ids(quire(alice, "diff", "page/deploy", f"{first}..").stdout)
    assert "tags: [ops] -> [ops, release]" in between and "+Tag the release first." in between
    write(avault, Entry(id="page/deploy", title="Mine", body="unpublished\n"))
    refused = quire(alice, "restore", "page/deploy", "--at", str(first), "--json", check=False)
    assert refused.returncode == 1 and '"local_changes"' in refused.stdout
    assert "unpublished" in (avault / "page" / "deploy.md").read_text()  # nothing written
    quire(alice, "sync")
    quire(alice, "restore", "page/deploy", "--at", str(first))
    assert (avault / "page" / "deploy.md").read_text().endswith(
        "Deploy from main.\nNever on a Friday.\n")
    # a local read of a page the vault does not have: not_found, exit 1 (before: 5)
    missing = quire(bob, "read", "page/none", "--json", check=False)
    assert missing.returncode == 1 and '"not_found"' in missing.stdout
    never = quire(bob, "restore", "page/never", "--json", check=False)
    assert never.returncode == 1 and '"no_history"' in never.stdout
    last = qjson(bob, "sync")
    assert last["sync"]["changes"][-1]["ops"][0]["action"] == "edited"

    # the hub's per-page history names people with local times too (before: user ids)
    hist = _no_ids(quire(bob, "read", "page/deploy", "--remote", "--history",
                         env=ZONE).stdout)
    assert "Bob Example for agent scout" in hist and " JST  " in hist

    # an admin's purge reaches the log as what went, and why (no content is kept)
    quire(owner, "admin", "purge", team.space["name"], "page/new-name", "--reason", "leaked")
    purged = _no_ids(quire(bob, "sync").stdout)
    assert "an admin  purged page/new-name  ['leaked']" in purged, purged
    assert "an admin  purged page/new-name" in quire(bob, "log", "-n", "1").stdout

    # a restore is the member's own edit: the space's rules apply to it as to any edit
    quire(owner, "admin", "rules", "add", team.space["id"], "--deny", "update", "--who",
          "editor", "--entries", "page/deploy")
    before = qjson(bob, "read", "page/deploy", "--remote")["version"]
    denied = quire(bob, "restore", "page/deploy", check=False)
    assert denied.returncode == 3 and "not published" in denied.stdout, denied.stdout
    assert qjson(bob, "read", "page/deploy", "--remote")["version"] == before

    # offline (the hub unreachable): the log is the store's, names as last known
    import json

    from tests.kit.host import free_port

    conf = next((bob / "hubs").glob("*/hub.json"))
    conf.write_text(json.dumps(dict(json.loads(conf.read_text()),
                                    url=f"http://127.0.0.1:{free_port()}")))
    offline = quire(bob, "log", "page/deploy")
    assert offline.returncode == 0 and "Bob Example for agent scout  edited" in offline.stdout
