"""Hub metrics in the Prometheus text format, served on their own listener
(``metrics_host``:``metrics_port``, loopback by default; never the public port, so never
through the public proxy). One registry per hub app (not the library's global one), so
several apps in one test process never collide. What is measured:

- ``quire_publications_total``                   batches accepted (replays not counted)
- ``quire_refusals_total{code,reason}``          error responses by wire code and reason
                                                 (``details.reason`` when the hub gives one)
- ``quire_guard_outcomes_total{outcome,code}``   publications: accepted, replayed, refused
- ``quire_publication_seconds{outcome}``         histogram: a publication request, end to end
- ``quire_request_seconds{method,route,status}`` histogram: every request but event streams
- ``quire_event_streams_open``                   open ``/events`` streams in this process
- ``quire_event_stream_disconnects_total{reason}`` streams ended: client, revoked, shutdown
- ``quire_events_sent_total{type}``              server-sent events written
- ``quire_event_fanout_visits``                  event subscriptions (streams, long-polls)
                                                 looked at by delivery since start: an event
                                                 of one space looks at that space's only
- ``quire_notify_lag_seconds``                   commit → LISTEN delivery (PostgreSQL)
- ``quire_longpolls_waiting``                    ``head?wait=`` requests waiting
- ``quire_db_pool_connections{state}``           in_use, idle; ``waiting``: callers
                                                 waiting for a connection
- ``quire_console_csp_reports_total{directive}``  Content-Security-Policy violations the
                                                 console's pages reported (none expected)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from hub import logs
from hub.logs import reason_of as refusal_reason  # noqa: F401 - the reason label

log = logging.getLogger("quire.hub.metrics")
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
REQUEST_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.publications = Counter("quire_publications", "Batches accepted", registry=r)
        self.refusals = Counter("quire_refusals", "Error responses by wire code and reason",
                                ["code", "reason"], registry=r)
        self.guard = Counter("quire_guard_outcomes", "Publication outcomes",
                             ["outcome", "code"], registry=r)
        self.publication_seconds = Histogram(
            "quire_publication_seconds", "Publication requests, end to end", ["outcome"],
            buckets=REQUEST_BUCKETS, registry=r)
        self.request_seconds = Histogram(
            "quire_request_seconds", "Requests (event streams excluded)",
            ["method", "route", "status"], buckets=REQUEST_BUCKETS, registry=r)
        self.streams_open = Gauge("quire_event_streams_open", "Open event streams",
                                  registry=r)
        self.stream_disconnects = Counter("quire_event_stream_disconnects",
                                          "Event streams ended", ["reason"], registry=r)
        self.events_sent = Counter("quire_events_sent", "Server-sent events written",
                                   ["type"], registry=r)
        self.fanout_visits = Gauge("quire_event_fanout_visits",
                                   "Event subscriptions looked at by delivery since start",
                                   registry=r)
        self.notify_lag = Histogram("quire_notify_lag_seconds",
                                    "From commit to LISTEN delivery in this process",
                                    buckets=LAG_BUCKETS, registry=r)
        self.longpolls = Gauge("quire_longpolls_waiting", "Long-poll head requests waiting",
                               registry=r)
        self.db_pool = Gauge("quire_db_pool_connections",
                             "Database pool: connections in use, idle, callers waiting",
                             ["state"], registry=r)
        self.csp_reports = Counter("quire_console_csp_reports",
                                   "CSP violation reports from console pages", ["directive"],
                                   registry=r)
        self._server: Any = None

    def watch_fanout(self, visits: Callable[[], int]) -> None:
        self.fanout_visits.set_function(lambda: float(visits()))

    def watch_pool(self, stats: Callable[[], dict[str, int]]) -> None:
        def reader(state: str) -> Callable[[], float]:
            return lambda: float(stats().get(state, 0))

        for state in ("in_use", "idle", "waiting"):
            self.db_pool.labels(state=state).set_function(reader(state))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def serve(self, host: str, port: int) -> bool:
        """Serve ``/metrics`` on ``host:port`` in a thread of its own. False (logged) when
        the port cannot be bound: the hub serves on without metrics."""
        from prometheus_client import start_http_server

        try:
            self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            logs.event(log, "metrics_listener_failed", logging.WARNING, host=host, port=port,
                       error=str(e))
            return False
        logs.event(log, "metrics_listener", host=host, port=port)
        return True

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
