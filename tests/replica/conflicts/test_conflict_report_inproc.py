"""A replica's conflict report (replica/conflicts/report.py) against the real hub app,
in-process: sent when the open conflicts change, not when they do not; a report the hub
cannot take (the transport fails on it) leaves the sync's outcome alone and is sent at the
next sync; the hub then lists it (hub/conflict_reports.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from hub import conflict_reports
from hub.access import Principal
from replica.conflicts.report import STATE_FILE, report_after_sync
from replica.machine.home import SpaceConfig
from shared.entry import make_entry
from tests.kit.inproc import Local, Space


class FailingReports(httpx2.BaseTransport):
    """The hub's transport, except that report PUTs fail while ``failing`` is set."""

    def __init__(self, inner: httpx2.BaseTransport):
        self.inner, self.failing, self.reports = inner, False, 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "PUT" and request.url.path.endswith("/conflicts"):
            self.reports += 1
            if self.failing:
                raise httpx2.ConnectError("connection refused (injected)")
        return self.inner.handle_request(request)


def config(rep: Local) -> SpaceConfig:
    d = rep.root / rep.name / "space"
    d.mkdir(parents=True, exist_ok=True)
    return SpaceConfig(space_id=rep.space.id, name=rep.space.name, hub_id="h",
                       replica_id=rep.engine.replica_id, vault=rep.vault, role="editor",
                       dir=d)


def listed(space: Space) -> list[dict[str, Any]]:
    hub = space.hub.hub
    owner = space.hub.owner
    p = Principal(user_id=owner.user_id, device_id=owner.device_id, user_name="owner",
                  is_owner=True)
    return conflict_reports.list_reports(hub.store, p, space.id)["conflicts"]


def put(rep: Local, body: str) -> None:
    rep.write(make_entry({"id": "page/deploy", "title": "Deploy", "body": body}))


def test_a_failed_report_leaves_the_sync_alone_and_is_sent_next_time(
        space: Space, tmp_path: Path) -> None:
    a = space.replica(tmp_path, "a", wrap=FailingReports)
    b = space.replica(tmp_path, "b")
    cfg = config(a)
    put(a, "one\n")
    a.sync()
    b.sync()
    put(b, "one (b)\n")
    b.sync()
    put(a, "one (a)\n")
    a.transport.failing = True
    report = a.sync()
    assert report.held == ["page/deploy"]
    assert report_after_sync(cfg, a.engine) is False  # failed: logged, no exception
    state = json.loads((cfg.dir / STATE_FILE).read_text())
    assert "injected" in state["last_error"] and "digest" not in state
    assert listed(space) == []
    # the next sync (nothing else changed) sends it
    a.transport.failing = False
    a.sync()
    assert report_after_sync(cfg, a.engine) is True
    rows = listed(space)
    assert [(r["entry"], r["kind"], r["claimed"], r["replica"]) for r in rows] == [
        ("page/deploy", "edit", False, a.engine.replica_id)]
    # unchanged: not sent again
    sent = a.transport.reports
    a.sync()
    assert report_after_sync(cfg, a.engine) is False and a.transport.reports == sent
