"""The public URL, the key id and the schema revision are the hub's configuration of record
(hub/record.py): real ``quire hub`` processes that disagree with the database refuse to
start, or drop out of readiness, with the reason in their log."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from hub.record import Record, mismatches, normalize_url
from shared.errors import InvalidRequest
from tests.kit.host import REPO, free_port
from tests.kit.hubproc import hub_cmd, serve_hub
from tests.kit.pg import pg_database, require_pg


def _hub(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(hub_cmd(*args), capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})})


def _init(data: Path, db: str | None, url: str | None) -> dict[str, Any]:
    args = ["init", "--data", str(data), "--json"]
    args += ["--db", db] if db else []
    args += ["--public-url", url] if url else []
    r = _hub(*args)
    assert r.returncode == 0, r.stderr + r.stdout
    return json.loads(r.stdout)


def _log_events(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def _refused_start(data: Path, db: str | None, env: dict[str, str]) -> dict[str, Any]:
    port = free_port()
    with pytest.raises(RuntimeError, match="hub exited"):
        serve_hub(data, port=port, db=db, env=env)
    events = _log_events(data / f"serve-{port}.log")
    refused = [e for e in events if e["event"] == "refused_to_start"]
    assert refused and refused[0]["level"] == "error", events
    return refused[0]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_hub_process_with_another_public_url_refuses_to_start(tmp_path: Path,
                                                                backend: str) -> None:
    """Before: a process started without (or with another) QUIRE_HUB_PUBLIC_URL served
    and answered wrong_audience to requests the other processes accepted; /readyz said 200
    and nothing was logged."""
    if backend == "postgresql":
        require_pg()  # skips on a developer's machine, fails under CI
    with pg_database() if backend == "postgresql" else _nothing() as db:
        data = tmp_path / "hub"
        _init(data, db, "https://Quire.Example.com/")
        a = serve_hub(data, db=db)  # no URL configured: serves as the recorded one
        try:
            assert httpx2.get(a.url + "/v1/hub").json()["url"] == "https://quire.example.com"
            assert httpx2.get(a.url + "/readyz").status_code == 200
            if backend == "postgresql":  # a second process with the same URL is fine
                b = serve_hub(data, db=db,
                                  env={"QUIRE_HUB_PUBLIC_URL": "https://quire.example.com"})
                assert httpx2.get(b.url + "/readyz").status_code == 200
                b.stop()
            refused = _refused_start(data, db, {"QUIRE_HUB_PUBLIC_URL": "http://10.0.0.5:8470"})
            assert refused["reason"] == "record_mismatch"
            assert refused["mismatch"] == [{"field": "public_url",
                                            "recorded": "https://quire.example.com",
                                            "process": "http://10.0.0.5:8470"}]
        finally:
            a.stop()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_hub_process_with_another_key_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    _init(data, None, "http://quire.test")
    other = tmp_path / "other"
    _init(other, None, None)  # another hub's key, this hub's database
    shutil.copy(other / "hub_key.pem", data / "hub_key.pem")
    refused = _refused_start(data, None, {})
    assert [m["field"] for m in refused["mismatch"]] == ["key_id"]


def test_readyz_fails_when_the_record_changes_under_a_running_process(tmp_path: Path
                                                                       ) -> None:
    data = tmp_path / "hub"
    _init(data, None, "http://quire.test")
    a = serve_hub(data)
    try:
        assert httpx2.get(a.url + "/readyz").status_code == 200
        r = _hub("record", "--data", str(data), "--public-url", "http://moved.test", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["public_url"] == "http://moved.test"
        ready = httpx2.get(a.url + "/readyz")
        assert ready.status_code == 503
        err = ready.json()["error"]
        assert err["code"] == "unavailable" and err["details"]["reason"] == "record_mismatch"
        assert err["details"]["mismatch"][0]["field"] == "public_url"
        # a newer release migrated the schema: this process is not ready either
        _hub("record", "--data", str(data), "--public-url", "http://quire.test")
        assert httpx2.get(a.url + "/readyz").status_code == 200
        import sqlite3

        with sqlite3.connect(data / "hub.db") as conn:
            conn.execute("UPDATE alembic_version SET version_num = '9999'")
        ready = httpx2.get(a.url + "/readyz").json()["error"]["details"]
        assert [m["field"] for m in ready["mismatch"]] == ["schema"]
    finally:
        a.stop()
    logged = [e for e in _log_events(a.log) if e["event"] == "not_ready"]
    assert logged and logged[0]["reason"] == "record_mismatch"
    access = [e for e in _log_events(a.log) if e["event"] == "access"
              and e.get("route") == "/readyz" and e["status"] == 503]
    assert access and access[0]["code"] == "unavailable"
    assert access[0]["reason"] == "record_mismatch"


def test_an_existing_hub_records_the_first_configured_url_and_then_holds_to_it(
        tmp_path: Path) -> None:
    """A hub made before the record existed (or without --public-url) adopts the first
    URL a process is configured with; a later, different one is refused."""
    data = tmp_path / "hub"
    _init(data, None, None)
    a = serve_hub(data, env={"QUIRE_HUB_PUBLIC_URL": "http://first.test"})
    a.stop()
    rec = json.loads(_hub("record", "--data", str(data), "--json").stdout)
    assert rec["public_url"] == "http://first.test" and rec["key_id"]
    refused = _refused_start(data, None, {"QUIRE_HUB_PUBLIC_URL": "http://second.test"})
    assert refused["mismatch"][0]["recorded"] == "http://first.test"


def test_init_refuses_a_public_url_the_hub_cannot_serve_as(tmp_path: Path) -> None:
    for bad in ("quire.example.com", "ftp://x", "https://x/quire", "https://x?a=1",
                "https://u:p@x"):
        r = _hub("init", "--data", str(tmp_path / "h"), "--public-url", bad, "--json")
        assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "invalid_request"
        assert not (tmp_path / "h").exists()


@pytest.mark.parametrize("raw,url", [
    ("https://Quire.Example.com/", "https://quire.example.com"),
    ("http://127.0.0.1:8470", "http://127.0.0.1:8470"),
    ("https://[::1]:8443", "https://[::1]:8443"),
])
def test_normalize_url(raw: str, url: str) -> None:
    assert normalize_url(raw) == url


def test_bad_port_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        normalize_url("http://x:99999")


def test_mismatches_name_every_field_that_differs() -> None:
    rec = Record("https://a", "k1", "0003")
    assert mismatches(rec, public_url="https://a", key_id="k1", schema="0003") == []
    assert [m["field"] for m in mismatches(rec, public_url="https://b", key_id="k2",
                                           schema="0004")] == ["public_url", "key_id",
                                                               "schema"]
    # nothing recorded yet: nothing to differ from (but the schema always counts)
    assert mismatches(Record(None, None, "0003"), public_url="x", key_id="y",
                      schema="0003") == []


def test_init_records_the_public_url_of_its_environment(tmp_path: Path) -> None:
    """The systemd units and compose give the URL as QUIRE_HUB_PUBLIC_URL: init records it."""
    data = tmp_path / "hub"
    r = _hub("init", "--data", str(data), "--json",
             env={"QUIRE_HUB_PUBLIC_URL": "https://Quire.Example.com"})
    assert r.returncode == 0, r.stderr
    rec = json.loads(_hub("record", "--data", str(data), "--json").stdout)
    assert rec["public_url"] == "https://quire.example.com"
