"""schemathesis against a real ``quire hub serve`` process, SQLite and PostgreSQL.

Every operation of /v1/openapi.json gets generated requests (bodies, query and path
parameters from the schemas, valid and invalid; the ``space`` parameter is the real space
half of the time), authenticated as the owner with a fresh DPoP proof signed for each
request's method and URL. Checked for each response: no server error, the response matches the schema the document
declares for its status, and a refused POST (4xx) did not move the space's head.

Bounded for CI: ``QUIRE_FUZZ_EXAMPLES`` examples per operation and mode (default 2). A
longer run: ``QUIRE_FUZZ_EXAMPLES=200 .venv/bin/pytest -q tests/hub/api/test_openapi_fuzz.py``
(docs/operations.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

import hub.api.routes  # noqa: F401 - the route modules add their entries to OPS (hub/api/proofs.py)
from hub.api.openapi import OPS
from shared.dpop import make_proof
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.wire import put, redeem

EXAMPLES = int(os.environ.get("QUIRE_FUZZ_EXAMPLES", "2"))
FUZZ_ENV = {  # generous per-user limits so the fuzzer reaches the handlers; long-polls short
    "QUIRE_HUB_INVITES_PER_MIN": "100000", "QUIRE_HUB_PUBLICATIONS_PER_MIN": "100000",
    "QUIRE_HUB_LONGPOLL_MAX_S": "1",
}


@pytest.fixture
def fuzz_hub(tmp_path: Path, db_url: str | None) -> Iterator[dict[str, Any]]:
    data = tmp_path / "hub"
    code = init_hub(data, db_url)
    hub = serve_hub(data, db=db_url, env=FUZZ_ENV)
    try:
        with httpx2.Client(base_url=hub.url, timeout=30) as c:
            owner = redeem(c, code, "owner")
            space = owner.create_space("fuzz")
            assert owner.publish(space, [put("page/seed")]).status_code == 201
            yield {"hub": hub, "owner": owner, "space": space,
                   "public": c.get("/v1/hub").json()["url"]}
    finally:
        hub.stop()
    log = hub.log.read_text()
    assert "Traceback" not in log, log[-3000:]


def _head(ctx: dict[str, Any]) -> tuple[Any, ...]:
    h = ctx["owner"].head(ctx["space"])
    return h["epoch"], h["seq"], h["digest"]


def _deleted(ctx: dict[str, Any]) -> bool:
    return ctx["owner"].get(f"/v1/spaces/{ctx['space']}/head").status_code == 410


def test_every_operation_fuzzed(fuzz_hub: dict[str, Any]) -> None:
    ctx = fuzz_hub
    url, owner = ctx["hub"].url, ctx["owner"]
    schema = schemathesis.openapi.from_url(url + "/v1/openapi.json")
    operations = [r.ok() for r in schema.get_all_operations()]
    # schemathesis leaves out the document it was loaded from (fetched just above)
    assert {(o.method.upper(), o.path) for o in operations} == set(OPS) - {
        ("GET", "/v1/openapi.json")}
    failures: list[str] = []
    calls = {"n": 0, "refused": 0}

    def one(op: Any, case: Any, real: bool) -> None:
        if "space" in (case.path_parameters or {}) and real:
            case.path_parameters["space"] = ctx["space"]
        path = case.formatted_path
        headers = dict(case.headers or {})
        spec = OPS[(op.method.upper(), op.path)]
        if spec.auth:
            headers["Authorization"] = f"DPoP {owner.token}"
            headers["DPoP"] = make_proof(owner.key, op.method.upper(), ctx["public"] + path,
                                         access_token=owner.token)
        elif op.path == "/v1/token":
            headers["DPoP"] = make_proof(owner.key, "POST", ctx["public"] + path)
        writes = op.method.upper() == "POST"  # a GET has no path that could move the head
        before = _head(ctx) if writes else None
        calls["n"] += 1
        if spec.response == "sse":  # an open stream: the status is what can be checked
            with httpx2.stream(op.method.upper(), url + path, headers=headers,
                               params=case.query, timeout=30) as r:
                if r.status_code >= 500:
                    failures.append(f"{op.method} {path}: {r.status_code}")
            return
        response = case.call(base_url=url, headers=headers, timeout=30)
        try:
            case.validate_response(response, checks=[not_a_server_error,
                                                     response_schema_conformance])
        except (Exception, BaseExceptionGroup) as e:  # collected: all failures are listed
            failures.append(f"{op.method} {path} -> {response.status_code}: "
                            f"{str(e)[:400]}")
        if op.path == "/v1/spaces/{space}/delete" and response.status_code < 300 and \
                _deleted(ctx):  # the operations after it need the space: restore it
            restored = owner.post(f"/v1/spaces/{ctx['space']}/restore", {})
            assert restored.status_code == 200, restored.text
        if response.status_code >= 400:
            calls["refused"] += 1
            if writes and _head(ctx) != before:
                failures.append(f"{op.method} {path} -> {response.status_code} moved the head")

    def fuzz(op: Any, mode: GenerationMode) -> None:
        @given(case=op.as_strategy(mode), real=st.booleans())
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def run(case: Any, real: bool) -> None:
            one(op, case, real)

        try:
            run()
        except Unsatisfiable:  # nothing of the operation can be invalid (no parameters)
            assert mode == GenerationMode.NEGATIVE, op.path

    for op in operations:
        # positive: values the schemas allow; negative: values they refuse (wrong types,
        # missing fields), which must be a 4xx with an Error body, never a 5xx
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(op, mode)
    print(f"{len(operations)} operations, {calls['n']} requests, {calls['refused']} refused; "
          f"{len(failures)} failures")
    assert not failures, "\n".join(failures[:40])
