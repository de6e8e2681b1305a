"""Remote reads (hub/reads.py) on the real app, SQLite and PostgreSQL: members read without a
replica, non-members learn nothing, every answer names its head, search means the same on
both backends."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.hubproc import init_hub
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import delete, put, redeem

_names = itertools.count()


@contextlib.contextmanager
def _database(backend: str) -> Iterator[str | None]:
    if backend == "sqlite":
        yield None
        return
    require_pg()
    with pg_database() as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[dict[str, Any]]:
    """One real hub app per backend for this file; each scene makes its own spaces."""
    from starlette.testclient import TestClient

    from hub.app import create_app
    from hub.settings import load_settings

    with _database(request.param) as url:
        data = Path(tmp_path_factory.mktemp("hub"))
        code = init_hub(data, url)
        app = create_app(load_settings(data))
        with TestClient(app, base_url="http://testhub") as client:
            owner = redeem(client, code, "owner-laptop")
            yield {"client": client, "owner": owner}


@pytest.fixture(scope="module")
def scene(hub: dict[str, Any]) -> dict[str, Any]:
    """A read-only scene shared by the tests that only read."""
    return _scene(hub)

READS = ["entries", "batch?seq=1", "entry?id=page/deploy", "history?id=page/deploy",
         "diff?id=page/deploy&from=1", "search?q=deploy"]


def _scene(h: dict[str, Any]) -> dict[str, Any]:
    owner = h["owner"]
    space = owner.create_space(f"team-{next(_names)}")
    ed = redeem(h["client"], owner.invite(space, "editor"), "editor-laptop")
    viewer = redeem(h["client"], owner.invite(space, "viewer"), "viewer-laptop")
    v1 = put("page/deploy", "Deploy with the blue button.\n", title="How we deploy",
             tags=["ops"])
    assert ed.publish(space, [v1, put("guardrail/no-force-push", "Never force push.\n",
                                      meta={"severity": "block"})]).status_code == 201
    v2 = put("page/deploy", "Deploy with the green button.\nThen watch the canary.\n",
             base=v1.entry.version, title="How we deploy", tags=["ops"])
    assert ed.publish(space, [v2, put("note/tmp", "scratch zebra\n")]).status_code == 201
    gone = put("note/tmp", "scratch zebra\n")
    assert ed.publish(space, [delete("note/tmp", gone.entry.version)]).status_code == 201
    return {"owner": owner, "ed": ed, "viewer": viewer, "space": space, "v1": v1, "v2": v2}


def test_a_non_member_gets_not_found_from_every_read(
        hub: dict[str, Any], scene: dict[str, Any]) -> None:
    s = scene
    other_space = s["owner"].create_space(f"other-{next(_names)}")
    outsider = redeem(hub["client"], s["owner"].invite(other_space, "admin"), "outsider")
    for path in READS:
        r = outsider.get(f"/v1/spaces/{s['space']}/{path}")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", (path, r.text)
        # and the same for a space that does not exist: nothing tells the two apart
        r2 = outsider.get(f"/v1/spaces/nope/{path}")
        assert r2.status_code == 404 and r2.json()["error"]["code"] == "not_found"


def test_reads_without_credentials_are_refused(
        hub: dict[str, Any], scene: dict[str, Any]) -> None:
    s = scene
    for path in READS:
        r = hub["client"].get(f"/v1/spaces/{s['space']}/{path}")
        assert r.status_code == 401, (path, r.text)


def test_a_viewer_lists_and_reads_at_the_head(
        hub: dict[str, Any], scene: dict[str, Any]) -> None:
    s = scene
    viewer, space = s["viewer"], s["space"]
    r = viewer.get(f"/v1/spaces/{space}/entries")
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["head"]["seq"] == 3
    assert [e["id"] for e in d["entries"]] == ["guardrail/no-force-push", "page/deploy"]
    assert d["next"] is None
    page = viewer.get(f"/v1/spaces/{space}/entries?limit=1").json()
    assert [e["id"] for e in page["entries"]] == ["guardrail/no-force-push"]
    rest = viewer.get(f"/v1/spaces/{space}/entries?after={page['next']}").json()
    assert [e["id"] for e in rest["entries"]] == ["page/deploy"]
    only = viewer.get(f"/v1/spaces/{space}/entries?prefix=guardrail/").json()
    assert [e["id"] for e in only["entries"]] == ["guardrail/no-force-push"]

    got = viewer.get(f"/v1/spaces/{space}/entry?id=page/deploy").json()
    assert got["entry"]["body"].startswith("Deploy with the green")
    assert got["version"] == s["v2"].entry.version and got["at"] == got["head"]
    r = viewer.get(f"/v1/spaces/{space}/entry?id=note/tmp")
    assert r.status_code == 404


def test_an_entry_is_read_as_it_was_at_a_seq(
        hub: dict[str, Any], scene: dict[str, Any]) -> None:
    s = scene
    ed, space = s["ed"], s["space"]
    at1 = ed.get(f"/v1/spaces/{space}/entry?id=page/deploy&seq=1").json()
    assert at1["entry"]["body"] == "Deploy with the blue button.\n"
    assert at1["version"] == s["v1"].entry.version and at1["at"]["seq"] == 1
    assert at1["head"]["seq"] == 3
    tmp = ed.get(f"/v1/spaces/{space}/entry?id=note/tmp&seq=2").json()
    assert tmp["entry"]["body"] == "scratch zebra\n"
    assert ed.get(f"/v1/spaces/{space}/entry?id=note/tmp&seq=3").status_code == 404
    assert ed.get(f"/v1/spaces/{space}/entry?id=note/tmp&seq=0").status_code == 404
    r = ed.get(f"/v1/spaces/{space}/entry?id=page/deploy&seq=99")
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"


def test_history_names_seq_author_and_deletion(
        hub: dict[str, Any], scene: dict[str, Any]) -> None:
    s = scene
    ed, space = s["ed"], s["space"]
    h = ed.get(f"/v1/spaces/{space}/history?id=note/tmp").json()
    assert [(v["seq"], v["deleted"]) for v in h["versions"]] == [(3, True), (2, False)]
    assert all(v["author"]["user"] == ed.user_id and v["author"]["device"] == ed.device_id
               for v in h["versions"])
    assert ed.get(f"/v1/spaces/{space}/history?id=page/never").status_code == 404


def test_diff_between_two_seqs_shows_the_body_change(
        hub: dict[str, Any], scene: dict[str, Any]) -> None:
    s = scene
    d = s["viewer"].get(f"/v1/spaces/{s['space']}/diff?id=page/deploy&from=1&to=2").json()
    assert d["from_version"] == s["v1"].entry.version
    assert d["to_version"] == s["v2"].entry.version
    assert "-Deploy with the blue button." in d["body"]
    assert "+Deploy with the green button." in d["body"] and "+Then watch the canary." in d["body"]
    assert d["fields"] == {}
    created = s["viewer"].get(f"/v1/spaces/{s['space']}/diff?id=note/tmp&from=1&to=2").json()
    assert created["created"] is True and created["from_version"] is None


@pytest.mark.parametrize("q, expected", [
    ("deploy", ["page/deploy"]),
    ("DEPLOY canary", ["page/deploy"]),
    ("green", ["page/deploy"]),
    ("blue", []),           # only the head is searched
    ("zebra", []),          # deleted entries are not found
    ("force push", ["guardrail/no-force-push"]),
    ("ops", ["page/deploy"]),  # tags are searched
    ("deploy force", []),   # every word must match
    ("push-force!!", ["guardrail/no-force-push"]),  # punctuation separates words
])
def test_search_finds_every_word_at_the_head(scene: dict[str, Any], q: str,
                                             expected: list[str]) -> None:
    s = scene
    r = s["viewer"].get(f"/v1/spaces/{s['space']}/search", params={"q": q})
    assert r.status_code == 200, r.text
    d = r.json()
    assert sorted(x["id"] for x in d["results"]) == expected
    assert d["total"] == len(expected) and d["head"]["seq"] == 3


def test_search_follows_new_publications(hub: dict[str, Any]) -> None:
    s = _scene(hub)
    ed, space = s["ed"], s["space"]
    assert ed.get(f"/v1/spaces/{space}/search?q=kraken").json()["total"] == 0
    assert ed.publish(space, [put("page/sea", "Here be a kraken.\n")]).status_code == 201
    d = ed.get(f"/v1/spaces/{space}/search?q=kraken").json()
    assert [x["id"] for x in d["results"]] == ["page/sea"] and d["head"]["seq"] == 4
    assert "kraken" in d["results"][0]["snippet"]


@pytest.mark.parametrize("path", [
    "search", "search?q=%20%20", "search?q=!!!", "search?q=" + "a" * 501,
    "entry", "entry?id=page/../x", "entry?id=page/deploy&seq=-1", "entry?id=page/deploy&seq=x",
    "entries?limit=0", "entries?limit=501", "entries?bogus=1", "diff?id=page/deploy",
    "history?id=page/deploy&limit=100000",
])
def test_bad_read_parameters_are_invalid_request(scene: dict[str, Any], path: str) -> None:
    s = scene
    r = s["ed"].get(f"/v1/spaces/{s['space']}/{path}")
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text


def test_reads_after_an_epoch_bump_keep_the_live_entries(hub: dict[str, Any]) -> None:
    s = _scene(hub)
    owner, ed, space = s["owner"], s["ed"], s["space"]
    r = owner.post(f"/v1/spaces/{space}/epoch", {"reason": "rotate"})
    assert r.status_code in (200, 201), r.text
    v3 = put("page/deploy", "Deploy by merging.\n", base=s["v2"].entry.version,
             title="How we deploy", tags=["ops"])
    assert ed.publish(space, [v3]).status_code == 201
    at0 = ed.get(f"/v1/spaces/{space}/entry?id=page/deploy&seq=0").json()
    assert at0["entry"]["body"].startswith("Deploy with the green")
    assert ed.get(f"/v1/spaces/{space}/entry?id=page/deploy&seq=1").json()["entry"]["body"] \
        == "Deploy by merging.\n"
    assert ed.get(f"/v1/spaces/{space}/search?q=merging").json()["total"] == 1
    assert ed.get(f"/v1/spaces/{space}/search?q=green").json()["total"] == 0
    h = ed.get(f"/v1/spaces/{space}/history?id=page/deploy").json()
    assert [v["seq"] for v in h["versions"]] == [1, 2, 1]


def test_a_batch_read_names_each_op_and_its_author(hub: dict[str, Any],
                                                   scene: dict[str, Any]) -> None:
    s = scene
    d = s["viewer"].get(f"/v1/spaces/{s['space']}/batch?seq=2").json()
    assert [(o["id"], o["op"]) for o in d["ops"]] == [("page/deploy", "put"), ("note/tmp", "put")]
    assert d["ops"][0]["version"] == s["v2"].entry.version
    assert d["ops"][0]["base"] == s["v1"].entry.version
    assert d["author"]["user"] == s["ed"].user_id
    d3 = s["viewer"].get(f"/v1/spaces/{s['space']}/batch?seq=3").json()
    assert d3["ops"][0]["op"] == "delete"
    for bad in ("batch", "batch?seq=0", "batch?seq=x"):
        r = s["viewer"].get(f"/v1/spaces/{s['space']}/{bad}")
        assert r.status_code == 422, bad
    assert s["viewer"].get(f"/v1/spaces/{s['space']}/batch?seq=99").status_code == 404
