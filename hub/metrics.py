"""Hub metrics, served at ``/metrics`` in the Prometheus text format.

One registry per hub app (not the library's global one), so several apps in one test
process never collide. What is counted:

- ``quire_publications_total``            batches accepted (replays not counted)
- ``quire_refusals_total{code}``          error responses by wire code
- ``quire_event_streams_open``            open ``/events`` streams in this process
- ``quire_events_sent_total{type}``       server-sent events written (head, epoch, revoked)
- ``quire_notify_lag_seconds``            commit → LISTEN delivery in this process (PostgreSQL)
- ``quire_longpolls_waiting``             ``head?wait=`` requests currently waiting
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.publications = Counter("quire_publications", "Batches accepted", registry=r)
        self.refusals = Counter("quire_refusals", "Error responses by wire code", ["code"],
                                registry=r)
        self.streams_open = Gauge("quire_event_streams_open", "Open event streams",
                                  registry=r)
        self.events_sent = Counter("quire_events_sent", "Server-sent events written",
                                   ["type"], registry=r)
        self.notify_lag = Histogram("quire_notify_lag_seconds",
                                    "From commit to LISTEN delivery in this process",
                                    buckets=LAG_BUCKETS, registry=r)
        self.longpolls = Gauge("quire_longpolls_waiting", "Long-poll head requests waiting",
                               registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
