"""Remote search at 20,000 entries: how long `GET …/search` takes at the hub.

A real ``quire hub serve`` process on SQLite and on the machine's PostgreSQL is loaded with
the bench corpus (batches of 500, through the guard), then each query is asked ``--runs``
times over loopback. The time is the whole request as a client on the same machine sees it
(DPoP verification, access check, index query, JSON), so it bounds the hub's own time from
above. The first search also brings the read index up to the head; it is reported apart.

    python -m bench.remote_search [--entries 20000] [--runs 30] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.corpus import corpus
from bench.quire_side import Hub, Publisher

QUERIES = ["socket", "return value", "deprecated", "unicode string", "thread lock timeout",
           "zzzznotaword"]


def _pg_url() -> str:
    import uuid

    import psycopg

    admin = os.environ.get("QUIRE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = "quire_bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin.rsplit("/", 1)[0] + "/" + name


def run_backend(backend: str, n: int, runs: int, root: Path) -> dict[str, Any]:
    hub = Hub(f"hub-{backend}", root, dict(os.environ),
              db_url=_pg_url() if backend == "postgresql" else None)
    hub.init()
    hub.start()
    try:
        pub = Publisher(hub.url, hub.enrollment_code, "bench-search")
        r = pub.http.post("/v1/spaces", json={"name": f"search-{backend}"})
        space = r.json()["space"]["id"]
        pub.attach(space)
        entries = corpus(n)
        t0 = time.perf_counter()
        for i in range(0, len(entries), 500):
            pub.publish(entries[i:i + 500])
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        first = pub.http.get(f"/v1/spaces/{space}/search", params={"q": QUERIES[0]})
        first_ms = (time.perf_counter() - t0) * 1000
        assert first.status_code == 200, first.text
        out: dict[str, Any] = {"backend": backend, "entries": n, "load_s": round(load_s, 1),
                               "first_search_ms_with_index_build": round(first_ms, 1),
                               "queries": {}}
        for q in QUERIES:
            times = []
            total = 0
            for _ in range(runs):
                t0 = time.perf_counter()
                r = pub.http.get(f"/v1/spaces/{space}/search", params={"q": q})
                times.append((time.perf_counter() - t0) * 1000)
                assert r.status_code == 200, r.text
                total = r.json()["total"]
            times.sort()
            out["queries"][q] = {"matches": total, "p50_ms": round(statistics.median(times), 2),
                                 "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2)}
        pub.close()
        return out
    finally:
        hub.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--backends", default="sqlite,postgresql")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="quire-bench-search-") as tmp:
        for backend in args.backends.split(","):
            results.append(run_backend(backend, args.entries, args.runs, Path(tmp)))
    doc = {"load_average": os.getloadavg(), "results": results}
    print(json.dumps(doc, indent=2))
    out = Path(__file__).resolve().parent / "results" / "remote_search.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
