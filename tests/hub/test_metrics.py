"""Metrics an operator can alert on, from a real hub process: on their own loopback
listener (the public port has no /metrics), with latency histograms, refusal reasons,
guard outcomes, stream disconnects and the database pool; the example alert rules parse
and name only metrics the hub exports."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid

import httpx2
import pytest
import yaml

from tests.kit.host import REPO, unavailable
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.sse import SSE
from tests.kit.wire import put, redeem

RULES = REPO / "deploy" / "prometheus" / "quire-alerts.yml"


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    data = tmp_path_factory.mktemp("metrics") / "hub"
    code = init_hub(data)
    hub = serve_hub(data)
    try:
        public = httpx2.get(hub.url + "/metrics")
        owner = redeem(httpx2.Client(base_url=hub.url, timeout=30), code, "owner")
        space = owner.create_space("m-" + uuid.uuid4().hex[:6])
        viewer = redeem(httpx2.Client(base_url=hub.url, timeout=30),
                            owner.invite(space, "viewer"), "viewer")
        assert owner.publish(space, [put("page/a")]).status_code == 201
        assert viewer.publish(space, [put("page/b")]).status_code == 403
        sse = SSE(f"{hub.url}/v1/spaces/{space}/events", viewer)
        sse.next("head")
        assert owner.post(f"/v1/spaces/{space}/members/{viewer.user_id}/remove",
                          {}).status_code == 200
        assert sse.next("revoked")
        sse.close()
        text = httpx2.get(hub.metrics_url).text
        for m in (owner, viewer):
            m.client.close()
    finally:
        hub.stop()
    return {"public": public, "text": text, "samples": _samples(text)}


def test_metrics_are_not_served_on_the_public_port(scraped: dict[str, object]) -> None:
    """Before: GET /metrics answered on the public port, so through the proxy too."""
    public = scraped["public"]
    assert isinstance(public, httpx2.Response) and public.status_code == 404


def test_refusals_carry_code_and_reason_and_guard_outcomes_are_counted(
        scraped: dict[str, object]) -> None:
    s = scraped["samples"]
    assert isinstance(s, dict)
    assert s['quire_refusals_total{code="forbidden",reason="role"}'] == 1
    assert s['quire_guard_outcomes_total{code="",outcome="accepted"}'] == 1
    assert s['quire_guard_outcomes_total{code="forbidden",outcome="refused"}'] == 1
    assert s['quire_event_stream_disconnects_total{reason="revoked"}'] == 1


def test_latency_histograms_and_pool_gauges_are_exported(scraped: dict[str, object]) -> None:
    s = scraped["samples"]
    assert isinstance(s, dict)
    assert s['quire_publication_seconds_count{outcome="accepted"}'] == 1
    assert any(k.startswith('quire_publication_seconds_bucket{le="0.25",outcome="accepted"')
               for k in s)
    assert s['quire_request_seconds_count{method="POST",route="/v1/spaces",status="201"}'] == 1
    assert not any("/events" in k for k in s if k.startswith("quire_request_seconds"))
    for state in ("in_use", "idle", "waiting"):
        assert f'quire_db_pool_connections{{state="{state}"}}' in s
    assert s['quire_db_pool_connections{state="waiting"}'] == 0


def test_alert_rules_parse_and_name_only_exported_metrics(scraped: dict[str, object]
                                                          ) -> None:
    doc = yaml.safe_load(RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    assert rules and all({"alert", "expr", "labels", "annotations"} <= set(r) for r in rules)
    assert all(r["labels"]["severity"] in ("page", "warn") for r in rules)
    text = scraped["text"]
    assert isinstance(text, str)
    exported = set(re.findall(r"^# TYPE (\w+) ", text, re.M))
    for r in rules:
        for name in re.findall(r"\bquire_\w+", r["expr"]):
            base = re.sub(r"_(bucket|count|sum|total)$", "", name)
            assert base in exported or name in exported, (r["alert"], name)
    if shutil.which("promtool") is None:
        unavailable("promtool not installed (Debian: apt-get install prometheus); "
                    "structure checked above")
    out = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_metrics_listener_defaults_to_loopback_port_plus_1000() -> None:
    from hub.settings import Settings

    s = Settings(port=8471)
    assert (s.metrics_host, s.metrics_listen_port) == ("127.0.0.1", 9471)
    assert Settings(port=8471, metrics_port=9100).metrics_listen_port == 9100
