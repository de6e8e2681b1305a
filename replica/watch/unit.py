"""``quire watch --install``: the systemd user unit that keeps a space's watcher running."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

UNIT_NAME = "quire-watch@.service"
UNIT = """\
# Written by 'quire watch --install' for this machine; remove with 'quire watch --uninstall'.
# One instance per space: systemctl --user enable --now quire-watch@SPACE
[Unit]
Description=Quire watcher for space %i
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
Environment=QUIRE_HOME={home}
ExecStart={exe} watch %i
Restart=always
# the watcher paces its own retries (backoff, suspension); this only covers crashes
RestartSec=5s
# SIGTERM: the sync in flight finishes and the status says 'stopped'
TimeoutStopSec=60s

[Install]
WantedBy=default.target
"""


def unit_dir(env: Mapping[str, str] | None = None) -> Path:
    source: Mapping[str, str] = os.environ if env is None else env
    base = source.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def quire_command() -> str:
    """How a service manager should start this very installation of quire."""
    import shutil
    import sys

    exe = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if exe is not None and exe.name == "quire" and exe.exists():
        return str(exe)
    found = shutil.which("quire")
    if found:
        return str(Path(found).resolve())
    return f"{sys.executable} -m replica.cli.main"


def install_unit(home_root: Path, spaces: list[str]) -> dict[str, Any]:
    """Write the systemd user unit template for this machine; say how to enable it."""
    path = unit_dir() / UNIT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(UNIT.format(home=Path(home_root).resolve(), exe=quire_command()),
                   encoding="utf-8")
    os.replace(tmp, path)
    commands = ["systemctl --user daemon-reload"] + [
        f"systemctl --user enable --now quire-watch@{s}" for s in spaces]
    return {"unit": str(path), "installed": True, "commands": commands}


def uninstall_unit(spaces: list[str]) -> dict[str, Any]:
    path = unit_dir() / UNIT_NAME
    existed = path.exists()
    if existed:
        path.unlink()
    commands = [f"systemctl --user disable --now quire-watch@{s}" for s in spaces] + [
        "systemctl --user daemon-reload"]
    return {"unit": str(path), "installed": False, "removed": existed, "commands": commands}
