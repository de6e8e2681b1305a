"""The shipped alert rules behave as their tests say: ``promtool test rules`` on
deploy/prometheus/quire-alerts.test.yml (series in, alerts and their summaries out).

Fault (issue 29): ``QuireHubUnavailable`` summed away the ``reason`` label its summary
printed (an empty reason), and no rule was ever evaluated by a test."""

from __future__ import annotations

import shutil
import subprocess

from tests.kit.host import REPO, unavailable

RULES = REPO / "deploy" / "prometheus"


def test_alert_rule_unit_tests_pass() -> None:
    if shutil.which("promtool") is None:
        unavailable("promtool not installed (Debian: apt-get install prometheus)")
    out = subprocess.run(["promtool", "test", "rules", "quire-alerts.test.yml"],
                         capture_output=True, text=True, cwd=RULES, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
