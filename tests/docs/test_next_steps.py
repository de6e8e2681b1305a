"""Next steps that are true: what ``quire hub init`` and ``make run`` print as next steps is
pasted, step by step, into a fresh home (tests/docs/tour.py) and every step works; the serve
line listens where the public URL says; ``make run`` leaves out the serve step it does itself."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from tests.docs.tour import Step, Tour
from tests.kit.host import free_port

REPO = Path(__file__).resolve().parents[2]
STEP = re.compile(r"^  \d+\. .{24} (\S.*)$")
RECIPE = re.compile(r"^\s+#\s+(export QUIRE_HOME=\S+)$")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def next_steps(output: str) -> list[str]:
    """The commands of the "Next steps" list, in order; the commented recipe for a member on
    the same machine is run too (this test is one machine)."""
    cmds = []
    for ln in output.split("Next steps", 1)[1].splitlines():
        m = STEP.match(ln) or RECIPE.match(ln)
        if m:
            cmds.append(m.group(1))
    return cmds


def paste(cmds: list[str], root: Path) -> list[dict]:
    tour = Tour(root, Path(sys.executable).parent)
    ran = []
    member_home = next((c for c in cmds if c.startswith("export QUIRE_HOME")), None)
    try:
        for n, cmd in enumerate(cmds):
            if cmd.startswith("export QUIRE_HOME"):
                continue  # run right before the member joins, where it applies
            if cmd.startswith("source "):
                continue  # relative to where make ran; the tour's PATH has the venv's bin
            if cmd.startswith("quire hub serve"):
                cmd += " &"
            if "<code from the step above>" in cmd and member_home:
                ran.append(tour.run(Step(n, member_home)))
            cmd = cmd.replace("<code from the step above>", "qi_…")
            r = tour.run(Step(n, cmd, ["…"]))
            ran.append(r)
            assert r["ok"], r
    finally:
        tour.close()
    return ran


def test_hub_init_next_steps_work_when_pasted(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    out = subprocess.run([sys.executable, "-m", "replica.cli.main", "hub", "init", "--data",
                          str(tmp_path / "hub"), "--public-url", url],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    cmds = next_steps(out)
    assert cmds[0 if cmds[0].startswith("quire") else 1] == (
        f"quire hub serve --data {tmp_path / 'hub'} --port {port}")
    ran = paste(cmds, tmp_path / "tour")
    assert [r["command"].split()[:3] for r in ran][-2:] == [
        ["export", "QUIRE_HOME=$PWD/member-home"], ["quire", "join", url]]


def test_make_run_prints_only_what_is_left_to_do(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "hub"
    log = tmp_path / "make.log"
    with open(log, "wb") as f:
        make = subprocess.Popen(["make", "-s", "run", f"DATA={data}", f"PORT={port}"],
                                cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert make.poll() is None, log.read_text()
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                time.sleep(0.2)
        out = log.read_text()
        cmds = next_steps(out)
        assert not any("hub serve" in c for c in cmds), out  # make run serves it already
        assert f"quire join http://127.0.0.1:{port} --invite qi_" in out
        paste(cmds, tmp_path / "tour")
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        make.wait(timeout=30)
