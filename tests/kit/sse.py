"""A small server-sent-events reader for tests: a thread parses the stream into a queue."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import httpx2


class SSE:
    def __init__(self, url: str, member: Any, last_event_id: str | None = None):
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.status: int | None = None
        self.closed = threading.Event()
        path = "/" + url.split("/", 3)[3]
        headers = {**member.auth,
                   "DPoP": member.proof("GET", path, access_token=member.token)}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        self._client = httpx2.Client(timeout=httpx2.Timeout(5, read=60))
        self._headers = headers
        self._url = url
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(60), "stream did not open"

    def _run(self) -> None:
        try:
            with self._client.stream("GET", self._url, headers=self._headers) as r:
                self.status = r.status_code
                self._ready.set()
                ev: dict[str, Any] = {}
                for line in r.iter_lines():
                    if line == "":
                        if ev:
                            self.events.put(ev)
                        ev = {}
                    elif line.startswith(":"):
                        self.events.put({"comment": line[1:].strip()})
                    else:
                        k, _, v = line.partition(":")
                        v = v[1:] if v.startswith(" ") else v
                        ev[k] = json.loads(v) if k == "data" else v
        except Exception as e:  # noqa: BLE001 (the test reads why the stream ended)
            self.events.put({"error": repr(e)})
        finally:
            self._ready.set()
            self.closed.set()

    def next(self, kind: str | None = None, timeout: float = 60) -> dict[str, Any]:
        """The next event (of ``kind`` if given: others are skipped). ``timeout`` is a
        deadline for a loaded machine, not a measurement: events come as soon as sent."""
        while True:
            ev = self.events.get(timeout=timeout)
            if set(ev) == {"retry"}:
                continue
            if kind is None or ev.get("event") == kind:
                return ev

    def close(self) -> None:
        self._client.close()
