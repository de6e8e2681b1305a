"""Vault files of a clone written by two other processes while this one goes on receiving,
checking and storing the snapshot (issue 16: a clone on both cores).

    main process                                   writer processes (forked; half each)
    chunk k+1: receive, verify, render  ─┐          chunk k: temp files, syncfs, renames
    chunk k:   wait ◄── written paths ───┼─────────          (vault.write_many)
    chunk k:   record in the store      ─┘

A writer thread would not do: the many short system calls of file creation convoy on the
GIL with the parsing. Fork is used (Linux): the child inherits the loaded modules, starts in
milliseconds, and only ever runs ``vault.write_many`` on what it is sent; it touches no
store, socket or lock of the parent, and exits through ``os._exit``.

Durability (the fsync policy, docs/decisions.md): each chunk's temp files are flushed
(``syncfs``) before they are renamed, so a name never points at data that is not on disk;
the renames of all chunks are flushed once, by ``durable``, after the last chunk and before
the snapshot's transaction commits, and only that commit records any entry as written. A
kill of the parent kills the writer too (``PR_SET_PDEATHSIG``; elsewhere it stops at the
closed pipe after its chunk): no writer outlives the clone it served, to race the next sync.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replica import vault as vlt

MIN_ENTRIES = 4000  # smaller snapshots are written inline: a fork costs more than it saves
PROCESSES = 2  # writers, each given a contiguous part of a chunk


class WriterDied(OSError):
    """The writer process ended without answering (killed, out of memory)."""


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _serve(conn: Any, theirs: list[Any], vault: str, mtime_ns: int, parent: int,
           crash_hook: Callable[[], None] | None) -> None:
    _die_with_parent(parent)
    for c in theirs:  # the parent's ends, inherited: else its close would never reach us
        c.close()
    while True:
        try:
            items = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone or done
        try:
            done = vlt.write_many(Path(vault), items, crash_hook, exclusive=True,
                                  mtime_ns=mtime_ns, flush_renames=False)
            conn.send(("ok", done))
        except OSError as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


class Inline:
    """The same interface, writing in this process (small snapshots, and where fork is not
    available)."""

    def __init__(self, vault: Path, mtime_ns: int, crash_hook: Callable[[], None] | None):
        self.vault, self.mtime_ns, self.crash_hook = vault, mtime_ns, crash_hook
        self._done: list[str] | None = None
        self.written: list[str] = []

    def submit(self, items: list[tuple[str, bytes]]) -> None:
        self._done = vlt.write_many(self.vault, items, self.crash_hook, exclusive=True,
                                    mtime_ns=self.mtime_ns, flush_renames=False)

    def result(self) -> list[str]:
        done, self._done = self._done or [], None
        self.written += done
        return done

    def durable(self) -> None:
        """Flush the renames of every chunk written (call before recording them durably)."""
        vlt.sync_files(self.vault, [], dirs_of=self.written)

    def close(self) -> None:
        pass


class Forked(Inline):
    """One chunk in flight at a time: ``submit`` hands it over and returns at once;
    ``result`` waits for the paths it wrote (renamed) or raises ``OSError``."""

    def __init__(self, vault: Path, mtime_ns: int, crash_hook: Callable[[], None] | None):
        import multiprocessing

        super().__init__(vault, mtime_ns, crash_hook)
        ctx = multiprocessing.get_context("fork")
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for _ in range(PROCESSES):
            mine, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, daemon=True, name="quire-vault-writer",
                               args=(child, [*self.conns, mine], os.fspath(vault), mtime_ns,
                                     os.getpid(), crash_hook))
            proc.start()
            child.close()
            self.conns.append(mine)
            self.procs.append(proc)
        self.busy = 0

    def submit(self, items: list[tuple[str, bytes]]) -> None:
        assert not self.busy, "one chunk at a time"
        # in contiguous parts: entries sorted by id, so each process mostly has its folders
        step = -(-len(items) // len(self.conns))
        parts = [items[i:i + step] for i in range(0, len(items), step)]
        for conn, part in zip(self.conns, parts, strict=False):
            conn.send(part)
        self.busy = len(parts)

    def result(self) -> list[str]:
        busy, self.busy = self.busy, 0
        done: list[str] = []
        failed = None
        for conn, proc in zip(self.conns[:busy], self.procs, strict=False):
            try:
                status, value = conn.recv()
            except (EOFError, OSError):
                failed = failed or WriterDied("a vault writer process died (exit code "
                                              f"{proc.exitcode})")
                continue
            if status != "ok":
                failed = failed or OSError(value)
                continue
            done += value
        self.written += done
        if failed is not None:
            raise failed
        return done

    def close(self) -> None:
        for conn in self.conns:
            conn.close()  # the writer's recv ends: it exits
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()


def count_hint(first: dict[str, Any]) -> int | None:
    """The entry count a snapshot's first line announces: unsigned, used only to show
    progress and to decide on writer processes (a lie changes nothing applied)."""
    n = first.get("count")
    return n if type(n) is int and n >= 0 else None


def start(vault: Path, mtime_ns: int, expected: int | None,
          crash_hook: Callable[[], None] | None = None) -> Inline | Forked:
    """A writer for a snapshot of ``expected`` entries (``None``: unknown, written inline)."""
    if expected is not None and expected >= MIN_ENTRIES and hasattr(os, "fork"):
        try:
            return Forked(vault, mtime_ns, crash_hook)
        except (OSError, ValueError):
            pass  # no fork here (limits, platform): the same writes, inline
    return Inline(vault, mtime_ns, crash_hook)
