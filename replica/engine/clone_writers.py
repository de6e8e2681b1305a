"""The entry lines of a snapshot, checked, rendered and written to the vault by two other
processes while this one receives the next chunk and stores the last (docs/decisions.md,
"Clone on both cores").

    main process                                  writer processes (forked; half each)
    chunk k+1: receive lines ───────────────┐      chunk k: each line checked (version
    chunk k:   wait ◄── results ────────────┼───────       recomputed), rendered, created
    chunk k+1: hand over ───────────────────┘              in its empty spot (clonefiles)
    chunk k:   record in the store

What a writer does with one line (``apply_lines``): ``ndjson.check_entry_line`` (the same
check as the client's), then by the store's index (read before the fork): an entry known
with this version and its file is ``HAVE`` (nothing to do); another known one, or a
tombstone (which a snapshot should not list), is ``MERGE`` (the main process merges it); a
new one is rendered and created exclusively: ``NEW``, or ``FOUND`` when something is at
its path already (never overwritten: merged against it).
It returns per line (status, id, seq, version, canonical JSON, file hash, size), and
stops at the first line that does not verify, with the error.

A writer thread would not do: parsing and file creation convoy on the GIL with the
receiving. Fork is used (Linux): the child inherits the loaded modules and the index,
starts in milliseconds, touches no store, socket or lock of the parent, and exits through
``os._exit``. A kill of the parent kills the writers too (``PR_SET_PDEATHSIG``): none
outlives the clone it served, to race the next sync. Durability: docs/decisions.md.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replica.hubclient.ndjson import check_entry_line
from replica.vault import created as clonefiles
from replica.vault import files as vlt
from replica.vault import markdown as md
from shared import state
from shared.attachments import is_attachment
from shared.errors import HubUnverified, QuireError, TransferFailed

MIN_ENTRIES = 4000  # smaller snapshots are written inline: a fork costs more than it saves
PROCESSES = 2  # writers, each given a contiguous part of a chunk
NEW, HAVE, MERGE, FOUND = "new", "have", "merge", "found"

Index = dict[str, tuple[str | None, str | None, bool, bool]]  # store.snapshot_index_txn
Result = tuple[str, str, int, str, str | None, str | None, int]
Refusal = tuple[str, str, dict[str, Any]]  # (error class, message, details)


class WriterDied(OSError):
    """The writer process ended without answering (killed, out of memory)."""


def apply_lines(vault: str, lines: list[bytes], index: Index, mtime_ns: int, mode: int,
                crash_hook: Callable[[], None] | None = None
                ) -> tuple[list[Result], Refusal | None]:
    """What this writer made of ``lines`` (see the module docstring), and the refusal that
    stopped it, if one did."""
    out: list[Result] = []
    made: set[str] = set()  # folders known to be real folders inside the vault
    root = Path(vault)
    try:
        for line in lines:
            entry, text, seq = check_entry_line(line)
            eid, version = entry.id, entry.version
            known = index.get(eid)
            # (a tombstone has no file; an attachment's bytes are fetched and checked
            # by the main process, replica/engine/blobs.py: both merged)
            if known is not None or entry.deleted or is_attachment(entry):
                if known == (version, version, False, True):
                    out.append((HAVE, eid, seq, version, None, None, 0))
                else:
                    out.append((MERGE, eid, seq, version, text, None, 0))
                continue
            path = md.entry_os_path(vault, eid)  # the id is valid (make_entry)
            folder = os.path.dirname(path)
            if folder not in made:
                vlt.ensure_folder(root, vault, folder, made)  # no symlink out of the vault
            data = md.render(entry)
            if clonefiles.create(path, data, mtime_ns, mode):
                out.append((NEW, eid, seq, version, text, md.file_hash(data), len(data)))
            else:
                out.append((FOUND, eid, seq, version, text, None, 0))
        if crash_hook is not None and out:
            crash_hook()
    except (HubUnverified, TransferFailed) as e:
        return out, (type(e).__name__, e.message, e.details)
    except OSError as e:
        return out, ("OSError", f"{type(e).__name__}: {e}", {})
    return out, None


def refused(refusal: Refusal) -> Exception:
    """The exception a writer's refusal stands for, raised again in the main process."""
    kind, message, details = refusal
    cls: type[QuireError] | None = {"HubUnverified": HubUnverified,
                                    "TransferFailed": TransferFailed}.get(kind)
    return cls(message, details) if cls is not None else OSError(message)


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


LINES, SUMS = b"L", b"S"  # what a message to a writer asks for


def _serve(conn: Any, theirs: list[Any], args: tuple[Any, ...], parent: int) -> None:
    _die_with_parent(parent)
    for c in theirs:  # the parent's ends, inherited: else its close would never reach us
        c.close()
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the parent is gone or done
        if msg[:1] == SUMS:  # a share of the state's sums (Forked.lattices_of)
            import pickle  # here, not at import: a sync that clones nothing never needs it

            answer: Any = state.lattices_of(pickle.loads(msg[1:]))
        else:
            answer = apply_lines(args[0], msg[1:].split(b"\n"), *args[1:])
        try:
            conn.send(answer)
        except OSError:
            return  # the parent stopped listening (it failed or was killed)


class _Flush:
    """The flush of every file created, in a thread (the system call drops the GIL) while
    the main process checks the state root; the commit waits for it. Not one a chunk: a
    ``syncfs`` while the writers create files stalls them on the file system's journal
    (a 100k clone took 13.2 and 19.6 s with one after each chunk, 9.7 and 14.0 s without)."""

    def __init__(self, vault: Path):
        self.vault = vault
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def _run(self, paths: list[str]) -> None:
        try:
            vlt.sync_files(self.vault, paths, dirs_of=paths)
        except BaseException as e:  # noqa: BLE001 - re-raised by wait
            self.error = e

    def start(self, paths: list[str]) -> None:
        assert self.thread is None, "one flush, after the last file"
        self.thread = threading.Thread(target=self._run, args=(paths,), daemon=True)
        self.thread.start()

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error


class Inline:
    """The same interface, in this process (small snapshots, and where fork is not
    available)."""

    def __init__(self, vault: Path, mtime_ns: int, index: Index,
                 crash_hook: Callable[[], None] | None):
        self.vault, self.mtime_ns = vault, mtime_ns
        self.args = (os.fspath(vault), index, mtime_ns, clonefiles.final_mode(), crash_hook)
        self._done: tuple[list[Result], Refusal | None] = ([], None)
        self.written: list[str] = []  # paths of the files created (NEW)
        self.flush = _Flush(vault)

    def submit(self, lines: list[bytes]) -> None:
        """Hand over one chunk (not empty); ``result`` takes back what became of it."""
        self._done = apply_lines(self.args[0], lines, *self.args[1:])

    def result(self) -> tuple[list[Result], Refusal | None]:
        done, self._done = self._done, ([], None)
        self._note(done[0])
        return done

    def _note(self, done: list[Result]) -> None:
        vault = self.args[0]
        self.written += [md.entry_os_path(vault, r[1]) for r in done if r[0] == NEW]

    def durable(self) -> None:
        """Start flushing every file created, and its folder; ``flushed`` waits for it (call
        both before the commit that records them)."""
        self.flush.start(self.written)

    def flushed(self) -> None:
        self.flush.wait()

    def lattices_of(self, entries: list[tuple[str, str]]) -> dict[int, bytes]:
        """``state.lattices_of`` (the writers' processes share the work: Forked)."""
        return state.lattices_of(entries)

    def close(self) -> None:
        pass


class Forked(Inline):
    """One chunk in flight at a time: ``submit`` hands it over and returns at once;
    ``result`` waits for what the writers made of it (``WriterDied`` if one is gone)."""

    def __init__(self, vault: Path, mtime_ns: int, index: Index,
                 crash_hook: Callable[[], None] | None):
        import multiprocessing

        super().__init__(vault, mtime_ns, index, crash_hook)
        ctx = multiprocessing.get_context("fork")
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for _ in range(PROCESSES):
            mine, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, daemon=True, name="quire-vault-writer",
                               args=(child, [*self.conns, mine], self.args, os.getpid()))
            proc.start()
            child.close()
            self.conns.append(mine)
            self.procs.append(proc)
        self.busy = 0

    def submit(self, lines: list[bytes]) -> None:
        assert not self.busy, "one chunk at a time"
        # in contiguous parts: entries sorted by id, so each process mostly has its folders
        step = -(-len(lines) // len(self.conns))
        parts = [lines[i:i + step] for i in range(0, len(lines), step)]
        for conn, part in zip(self.conns, parts, strict=False):
            conn.send_bytes(LINES + b"\n".join(part))
        self.busy = len(parts)

    def lattices_of(self, entries: list[tuple[str, str]]) -> dict[int, bytes]:
        """The sums split three ways: one share to each writer, one done here."""
        assert not self.busy, "the writers are done with the lines"
        share = -(-len(entries) // (len(self.conns) + 1))
        import pickle

        for i, conn in enumerate(self.conns):
            conn.send_bytes(SUMS + pickle.dumps(entries[(i + 1) * share:(i + 2) * share]))
        parts = [state.lattices_of(entries[:share])]
        for conn, proc in zip(self.conns, self.procs, strict=True):
            try:
                parts.append(conn.recv())
            except (EOFError, OSError):
                raise WriterDied("a vault writer process died (exit code "
                                 f"{proc.exitcode})") from None
        return state.sum_lattices(parts)

    def result(self) -> tuple[list[Result], Refusal | None]:
        busy, self.busy = self.busy, 0
        done: list[Result] = []
        refusal: Refusal | None = None
        died = None
        for conn, proc in zip(self.conns[:busy], self.procs, strict=False):
            try:
                part, why = conn.recv()
            except (EOFError, OSError):
                died = died or WriterDied("a vault writer process died (exit code "
                                          f"{proc.exitcode})")
                continue
            done += part
            refusal = refusal or why
        self._note(done)
        if died is not None:
            raise died
        return done, refusal

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


def start(vault: Path, mtime_ns: int, expected: int | None, index: Index,
          crash_hook: Callable[[], None] | None = None) -> Inline | Forked:
    """A writer for a snapshot of ``expected`` entries (``None``: unknown, written inline)."""
    if expected is not None and expected >= MIN_ENTRIES and hasattr(os, "fork"):
        try:
            return Forked(vault, mtime_ns, index, crash_hook)
        except (OSError, ValueError):
            pass  # no fork here (limits, platform): the same writes, inline
    return Inline(vault, mtime_ns, index, crash_hook)
