"""Run a documented tour as written: the ``console`` blocks of one section of a Markdown file.

    README section ──parse──► steps ($ command, the output shown under it, README line)
                   ──run────► bash, one step at a time, in a fresh home and work folder;
                              exported variables and the folder carry from step to step
                   ──check──► exit status 0 and the output matches what the README shows

What is substituted, and nothing else: ``qi_…`` in a command is the most recent invite code
a previous step printed and no step used yet. A line starting with ``> `` right under a
command continues it (the lines of a here-document), as a shell shows them. In the shown output ``…`` stands for any text within a line,
and a line holding only ``…`` for any number of lines; blank lines are not compared. A
command ending in ``&`` runs in the background (until the tour ends); a background
``quire hub serve`` counts as started when its ``/readyz`` answers.

The hub's port is the one the README names. ``python -m tests.docs.tour FILE HEADING`` runs
one tour and prints a JSON report: the test runs it inside ``unshare -rn`` (a private network
namespace, so port 8470 is free whatever else runs on the machine) and falls back to
replacing the port with a free one only where namespaces are not available.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

CODE = re.compile(r"\bqi_[A-Za-z0-9_-]{20,}")
STEP_DEADLINE = 120.0


@dataclass
class Step:
    line: int  # in the Markdown file, 1-based
    command: str
    shown: list[str] = field(default_factory=list)

    @property
    def background(self) -> bool:
        return self.command.split("#")[0].rstrip().endswith("&")


def section(text: str, heading: str) -> list[tuple[int, str]]:
    """The numbered lines of the section whose heading is ``heading`` (up to the next heading
    of the same or a higher level)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == heading)
    level = len(heading) - len(heading.lstrip("#"))
    out = []
    for i in range(start + 1, len(lines)):
        ln = lines[i]
        m = re.match(r"^(#+) ", ln)
        if m and len(m.group(1)) <= level:
            break
        out.append((i + 1, ln))
    return out


def parse(text: str, heading: str) -> list[Step]:
    steps: list[Step] = []
    in_block = False
    for no, ln in section(text, heading):
        if ln.startswith("```"):
            in_block = ln.strip() == "```console" if not in_block else False
            continue
        if not in_block:
            continue
        if ln.startswith("$ "):
            steps.append(Step(no, ln[2:]))
        elif ln.startswith("> ") and steps and not steps[-1].shown:
            steps[-1].command += "\n" + ln[2:]  # a continuation line (a here-document)
        elif steps:
            steps[-1].shown.append(ln)
    return steps


def shown_regex(shown: list[str]) -> re.Pattern[str]:
    parts = []
    for ln in shown:
        ln = ln.rstrip()
        if not ln:
            continue
        if ln.strip() == "…":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(p) for p in ln.split("…")) + r"\n")
    return re.compile("".join(parts))


def matches(shown: list[str], output: str) -> bool:
    got = "".join(ln.rstrip() + "\n" for ln in output.splitlines() if ln.strip())
    return shown_regex(shown).fullmatch(got) is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Tour:
    def __init__(self, root: Path, bindir: Path, port_map: dict[str, str] | None = None):
        self.root = root
        self.work = root / "work"
        self.work.mkdir(parents=True)
        (root / "home").mkdir()
        self.state = root / "state"
        self.state.mkdir()
        self.env = {"HOME": str(root / "home"), "PATH": f"{bindir}:/usr/bin:/bin",
                    "LANG": "C.UTF-8", "TERM": "dumb",
                    "NO_COLOR": "1"}
        (self.state / "env").write_text("")
        (self.state / "cwd").write_text(str(self.work))
        self.port_map = port_map or {}
        self.codes: list[str] = []
        self.used: set[str] = set()
        self.background: list[subprocess.Popen[bytes]] = []

    def _mapped(self, text: str) -> str:
        for old, new in self.port_map.items():
            text = text.replace(old, new)
        return text

    def _command(self, step: Step) -> str:
        cmd = self._mapped(step.command)
        while "qi_…" in cmd:
            fresh = [c for c in self.codes if c not in self.used]
            if not fresh:
                raise AssertionError(f"line {step.line}: no printed invite code left for qi_…")
            self.used.add(fresh[-1])
            cmd = cmd.replace("qi_…", fresh[-1], 1)
        return cmd

    def _script(self, cmd: str) -> str:
        s = shlex.quote(str(self.state))
        return (f"source {s}/env; cd \"$(cat {s}/cwd)\"\n{cmd}\n__rc=$?\n"
                f"export -p > {s}/env; pwd > {s}/cwd; exit $__rc\n")

    def run(self, step: Step) -> dict[str, object]:
        cmd = self._command(step)
        report: dict[str, object] = {"line": step.line, "command": cmd}
        if step.background:
            bare = cmd.split("#")[0].rstrip()[:-1]
            s = shlex.quote(str(self.state))
            with open(self.root / f"bg-{step.line}.log", "wb") as log:
                p = subprocess.Popen(["bash", "-c", f"source {s}/env; cd \"$(cat {s}/cwd)\"; "
                                                    f"exec {bare}"],
                                     env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            self.background.append(p)
            if "hub serve" in bare:
                report.update(self._wait_ready(bare, p))
            else:
                report["ok"] = True
            return report
        done = subprocess.run(["bash", "-c", self._script(cmd)], env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=STEP_DEADLINE)
        out = done.stdout.decode("utf-8", "replace")
        for c in CODE.findall(out):
            if c not in self.codes:
                self.codes.append(c)
        shown = [self._mapped(ln) for ln in step.shown]
        report.update(rc=done.returncode, output=out, shown=shown,
                      ok=done.returncode == 0 and matches(shown, out))
        return report

    def _wait_ready(self, cmd: str, p: subprocess.Popen[bytes]) -> dict[str, object]:
        m = re.search(r"--port[ =](\d+)", cmd)
        port = m.group(1) if m else "8470"
        url = f"http://127.0.0.1:{port}/readyz"
        deadline = time.monotonic() + STEP_DEADLINE
        while time.monotonic() < deadline:
            if p.poll() is not None:
                return {"ok": False, "rc": p.returncode, "output": self._bg_log(p)}
            try:
                if httpx2.get(url, timeout=2).status_code == 200:
                    return {"ok": True}
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        return {"ok": False, "output": f"{url} did not answer in {STEP_DEADLINE} s"}

    def _bg_log(self, p: subprocess.Popen[bytes]) -> str:
        logs = sorted(self.root.glob("bg-*.log"))
        return "\n".join(f.read_text(errors="replace") for f in logs)

    def close(self) -> None:
        for p in self.background:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.background:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def run_tour(path: Path, heading: str, root: Path, *, port_map: dict[str, str] | None = None
             ) -> dict[str, object]:
    """Run every step until one fails; the report lists each step run."""
    steps = parse(path.read_text(encoding="utf-8"), heading)
    tour = Tour(root, Path(sys.executable).parent, port_map)
    done: list[dict[str, object]] = []
    try:
        for step in steps:
            r = tour.run(step)
            done.append(r)
            if not r["ok"]:
                break
    finally:
        tour.close()
    return {"steps": len(steps), "run": done, "ok": bool(done) and all(r["ok"] for r in done)
            and len(done) == len(steps)}


def main() -> int:
    path, heading = Path(sys.argv[1]), sys.argv[2]
    port_map = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    if os.environ.get("QUIRE_TOUR_NETNS"):
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory(prefix="quire-tour-") as tmp:
        print(json.dumps(run_tour(path, heading, Path(tmp), port_map=port_map)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
