"""A ``quire`` command imports only what it uses (issue 16, fast start; docs/decisions.md
"Start-up cost"): the replica's stores are plain ``sqlite3``, so no replica module imports
SQLAlchemy, and a status or a sync never loads it (nor detect-secrets, which loads on the
first screening). Importing either cost every process a quarter of a second before any work.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "detect_secrets", "alembic", "starlette", "uvicorn")


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_replica_module_imports_sqlalchemy_or_the_hub():
    """Anywhere in a module (lazy imports count): only the demo runs a hub in-process."""
    offenders = {}
    for path in sorted((ROOT / "replica").rglob("*.py")):
        if path.name == "demo.py":
            continue
        bad = _imported_roots(path) & {"sqlalchemy", "hub", "alembic", "starlette"}
        if bad:
            offenders[path.relative_to(ROOT).as_posix()] = sorted(bad)
    assert offenders == {}


def test_the_sync_status_and_mcp_paths_load_no_heavy_package(tmp_path):
    """Every module a sync, a status, the watcher and the MCP server load, imported in a fresh
    interpreter (the parser built as ``quire`` builds it): none of the heavy packages."""
    code = (
        "import json, sys\n"
        "from replica.cli import main as cli\n"
        "cli.build_parser()\n"
        "import replica.app.service, replica.engine.sync, replica.ipc.status_file\n"
        "import replica.engine.pending, replica.engine.push, replica.trust.verify\n"
        "import replica.conflicts.desk, replica.watch.core, replica.watch.syncer\n"
        "import replica.ipc.journal, replica.cli.doctor, replica.app.selfcheck\n"
        "import replica.conflicts.report, replica.engine.screened\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_clients_load_the_ca_bundle_once_and_an_http_hubs_client_fails_closed():
    """Every client loaded the CA bundle (about 50 ms; a join made four clients). An https
    hub's clients share one verified context; an http hub's context holds no CA at all but
    still requires a verified certificate, so a TLS connection through it is refused, never
    accepted unverified."""
    import ssl

    from replica.hubclient.client import tls_context

    plain = tls_context("http://127.0.0.1:8470")
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0
    tls = tls_context("https://hub.example")
    assert tls is tls_context("HTTPS://other.example")
    assert tls.verify_mode == ssl.CERT_REQUIRED and tls.check_hostname
