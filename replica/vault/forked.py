"""What a child forked to do one job for this process needs: to die with its parent.

The replica forks helpers that must never outlive the command that started them (the clone's
vault writers, replica/engine/clone_writers.py; the sync's vault walker, replica/vault/walk.py): a
helper left running after its parent was killed could race the next command over the vault.
"""

from __future__ import annotations

import os
import signal
import warnings


def die_with_parent(parent: int) -> None:
    """In a forked child: be killed when ``parent`` dies (Linux ``PR_SET_PDEATHSIG``); where
    that is missing the child's own pipe to the parent breaks instead. Exits at once when the
    parent died before this took effect."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def fork() -> int:
    """``os.fork`` without its warning about other threads (Python 3.12+; the child runs only
    its one job and touches no lock another thread may hold: no logging, no I/O but its
    pipe). Under warnings-as-errors that warning would be raised in the parent after the
    child exists, leaving it unreaped with its end of the pipe."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()
