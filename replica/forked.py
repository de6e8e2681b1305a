"""What a child forked to do one job for this process needs: to die with its parent.

The replica forks helpers that must never outlive the command that started them (the clone's
vault writers, replica/vaultwriter.py; the sync's vault walker, replica/vaultscan.py): a
helper left running after its parent was killed could race the next command over the vault.
"""

from __future__ import annotations

import os
import signal


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
