"""Test-only crash points. When ``QUIRE_TEST_CRASH_AT`` names a point, the process kills
itself with SIGKILL there (no cleanup, no flush: what a power cut or OOM kill looks like).
Used by the kill tests in ``tests/replica``; never set it in production.

Points: ``after_scan``, ``after_pull``, ``before_push`` (outbox saved, nothing sent),
``after_push_before_receipt`` (the hub committed, the receipt is lost), ``after_receipt``,
``before_vault_write`` (store committed, vault not yet written), ``mid_vault_write`` (temp
file written, not yet renamed; in a clone: a chunk's files created, not yet recorded),
``vault_written`` (files renamed and flushed, their record not committed: also what a power
cut leaves when it loses that unsynced commit), ``mid_clone`` (a snapshot chunk handed to
the vault writers, the snapshot's transaction open).
"""

from __future__ import annotations

import os
import signal

ENV = "QUIRE_TEST_CRASH_AT"
POINTS = ("after_scan", "after_pull", "before_push", "after_push_before_receipt",
          "after_receipt", "before_vault_write", "mid_vault_write", "vault_written",
          "mid_clone")


def crash_point(name: str) -> None:
    """SIGKILL this process if the test asked to crash at ``name``."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
