"""Screening benchmark (docs/security.md, "Screening"; decision D121): what content
screening catches, what it wrongly refuses, and what it costs.

    secret_cases()   corpus 1: fake but format-valid secrets of the major providers (made
                     here from a fixed seed: no real key, none written in the repository),
                     each in a kind of placement people paste them in (PLACEMENTS)
    pages()          corpus 2: the real documentation on this machine
                     (bench/screening_docs.py), a vault page each
    run()            every secret must be caught; false positives per 10,000 pages; the CPU
                     time per MB of screened text

    python -m bench.screening [--pages N] [--module PATH] [--out FILE]
    make bench-screening

``--module`` screens with another implementation of ``shared/screening.py`` (the one of an
earlier commit, ``git show REV:shared/screening.py > /tmp/old.py``) to compare. The suite's
tests/shared/test_screening_corpus.py runs corpus 1 (a test per placement kind) and a slice
of corpus 2.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import random
import string
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

from shared.entry import make_entry

SEED = 20261203
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Case:
    placement: str
    kind: str
    entry: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, str] | None = None


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _pem_body(rng: random.Random, lines: int = 12) -> str:
    return "\n".join(_r(rng, ALNUM + "+/", 64) for _ in range(lines))


# kind -> (what people call it, the environment name, maker)
Maker = Callable[[random.Random], str]
KINDS: dict[str, tuple[str, str, Maker]] = {
    "anthropic": ("claude", "ANTHROPIC_API_KEY",
                  lambda g: "sk-ant-api03-" + _r(g, URLSAFE, 93) + "AA"),
    "openai_project": ("openai", "OPENAI_API_KEY",
                       lambda g: "sk-proj-" + _r(g, URLSAFE, 74) + "T3BlbkFJ"
                       + _r(g, URLSAFE, 74)),
    "openai_legacy": ("openai", "OPENAI_API_KEY",
                      lambda g: "sk-" + _r(g, ALNUM, 20) + "T3BlbkFJ" + _r(g, ALNUM, 20)),
    "google_ai": ("gemini", "GOOGLE_API_KEY", lambda g: "AIza" + _r(g, URLSAFE, 35)),
    "mistral": ("mistral", "MISTRAL_API_KEY", lambda g: _r(g, ALNUM, 32)),
    "groq": ("groq", "GROQ_API_KEY", lambda g: "gsk_" + _r(g, ALNUM, 52)),
    "huggingface": ("hugging face", "HF_TOKEN", lambda g: "hf_" + _r(g, ALNUM, 34)),
    "xai": ("grok", "XAI_API_KEY", lambda g: "xai-" + _r(g, ALNUM, 80)),
    "aws_key_id": ("aws", "AWS_ACCESS_KEY_ID",
                   lambda g: g.choice(("AKIA", "ASIA")) + _r(g, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
                                                             16)),
    "aws_secret": ("aws secret", "AWS_SECRET_ACCESS_KEY", lambda g: _r(g, ALNUM + "+/", 40)),
    "azure_storage": ("azure storage", "AZURE_STORAGE_CONNECTION_STRING",
                      lambda g: "DefaultEndpointsProtocol=https;AccountName=prodlogs;"
                      "AccountKey=" + _r(g, ALNUM + "+/", 86) + "==;"
                      "EndpointSuffix=core.windows.net"),
    "azure_client_secret": ("azure app", "AZURE_CLIENT_SECRET",
                            lambda g: _r(g, ALNUM, 3) + str(g.randint(0, 9)) + "Q~"
                            + _r(g, ALNUM + "_~.-", 34)),
    "github_classic": ("github", "GITHUB_TOKEN", lambda g: "ghp_" + _r(g, ALNUM, 36)),
    "github_oauth": ("github", "GH_TOKEN", lambda g: "gho_" + _r(g, ALNUM, 36)),
    "github_fine_grained": ("github", "GITHUB_TOKEN",
                            lambda g: "github_pat_" + _r(g, ALNUM, 22) + "_"
                            + _r(g, ALNUM, 59)),
    "gitlab": ("gitlab", "GITLAB_TOKEN", lambda g: "glpat-" + _r(g, URLSAFE, 20)),
    "slack_bot": ("slack", "SLACK_BOT_TOKEN",
                  lambda g: f"xoxb-{_r(g, string.digits, 11)}-{_r(g, string.digits, 13)}-"
                  + _r(g, ALNUM, 24)),
    "slack_webhook": ("slack webhook", "SLACK_WEBHOOK_URL",
                      lambda g: "https://hooks.slack.com/services/T" + _r(g, "ABCDEFGHJK0123", 8)
                      + "/B" + _r(g, "ABCDEFGHJK0123", 10) + "/" + _r(g, ALNUM, 24)),
    "discord_bot": ("discord", "DISCORD_TOKEN",
                    lambda g: "MT" + _r(g, ALNUM, 24) + "." + _r(g, URLSAFE, 6) + "."
                    + _r(g, URLSAFE, 38)),
    "stripe_secret": ("stripe", "STRIPE_SECRET_KEY", lambda g: "sk_live_" + _r(g, ALNUM, 99)),
    "stripe_restricted": ("stripe", "STRIPE_KEY", lambda g: "rk_live_" + _r(g, ALNUM, 24)),
    "password": ("database", "DB_PASSWORD",
                 lambda g: _r(g, string.ascii_letters, 4) + _r(g, "!#%&*+?", 1)
                 + _r(g, string.digits, 2) + _r(g, ALNUM, 5)),
    "pem_rsa": ("deploy", "DEPLOY_KEY",
                lambda g: "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + _r(g, ALNUM, 48)
                + "\n" + _pem_body(g) + "\n-----END RSA PRIVATE KEY-----"),
    "pem_openssh": ("ssh", "SSH_KEY",
                    lambda g: "-----BEGIN OPENSSH PRIVATE KEY-----\n"
                    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz\n"
                    + _pem_body(g, 5) + "\n-----END OPENSSH PRIVATE KEY-----"),
    "gcp_service_account": ("gcp", "GOOGLE_APPLICATION_CREDENTIALS",
                            lambda g: json.dumps({
                                "type": "service_account", "project_id": "acme-prod",
                                "private_key_id": _r(g, "0123456789abcdef", 40),
                                "private_key": "-----BEGIN PRIVATE KEY-----\n"
                                + _pem_body(g, 8) + "\n-----END PRIVATE KEY-----\n",
                                "client_email": "ci@acme-prod.iam.gserviceaccount.com"},
                                indent=2)),
}
TOKEN_KINDS = [k for k in KINDS if k not in ("password", "pem_rsa", "pem_openssh",
                                             "gcp_service_account")]
# kinds whose value alone (no prefix) needs its context to be told from a word: they are
# placed only where a name or a sentence says what they are
CONTEXT_KINDS = {"mistral", "aws_secret", "password"}


def _page(body: str, **extra: Any) -> dict[str, Any]:
    return {"id": "page/ops-notes", "title": "Ops notes", "tags": ["ops"], "body": body,
            **extra}


def _zero_width(s: str, mark: str) -> str:
    return "".join(c + (mark if i % 7 == 3 else "") for i, c in enumerate(s))


def _full_width(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


def _line(kind: str, s: str) -> str:
    """The line a person pastes: the environment name and the value."""
    return f"{KINDS[kind][1]}={s}"


# placement -> (the kinds it holds, make the case from (kind, secret))
PLACEMENTS: dict[str, tuple[list[str], Callable[[str, str], Case]]] = {}


def placement(name: str, kinds: list[str]) -> Callable[[Callable[[str, str], Case]],
                                                       Callable[[str, str], Case]]:
    def deco(f: Callable[[str, str], Case]) -> Callable[[str, str], Case]:
        PLACEMENTS[name] = (kinds, f)
        return f
    return deco


@placement("prose_sentence", TOKEN_KINDS + ["password"])
def _prose(kind: str, s: str) -> Case:
    who = KINDS[kind][0]
    verb = "password" if kind == "password" else "key"
    return Case("prose_sentence", kind, _page(
        f"# Eval runs\n\nQuick note: our {who} {verb} is {s} - rotate it monthly.\n"))


@placement("prose_use", ["anthropic", "openai_project", "groq", "github_classic", "xai"])
def _use(kind: str, s: str) -> Case:
    return Case("prose_use", kind, _page(f"For the eval runs use {s} until Friday.\n"))


@placement("env_file", TOKEN_KINDS + ["password"])
def _env(kind: str, s: str) -> Case:
    return Case("env_file", kind, _page(f"```sh\nexport APP_ENV=prod\n{_line(kind, s)}\n```\n"))


@placement("yaml_config", ["anthropic", "mistral", "slack_bot", "stripe_secret", "password",
                           "azure_client_secret"])
def _yaml(kind: str, s: str) -> Case:
    name = "password" if kind == "password" else "api_key"
    return Case("yaml_config", kind, _page(
        f"```yaml\nservice:\n  url: https://api.internal\n  {name}: \"{s}\"\n```\n"))


@placement("json_config", ["gcp_service_account", "openai_legacy", "huggingface",
                           "github_fine_grained"])
def _json(kind: str, s: str) -> Case:
    body = s if kind == "gcp_service_account" else json.dumps({"token": s}, indent=2)
    return Case("json_config", kind, _page(f"Credentials file:\n\n```json\n{body}\n```\n"))


@placement("code_call", ["anthropic", "openai_project", "google_ai", "groq", "mistral"])
def _code(kind: str, s: str) -> Case:
    return Case("code_call", kind, _page(
        f"```python\nclient = Client(api_key=\"{s}\", timeout=30)\n```\n"))


@placement("http_header", ["anthropic", "github_oauth", "gitlab", "discord_bot", "xai"])
def _header(kind: str, s: str) -> Case:
    return Case("http_header", kind, _page(
        f"curl -H \"Authorization: Bearer {s}\" https://api.example.com/v1/models\n"))


@placement("table_cell", ["openai_project", "aws_key_id", "gitlab", "stripe_restricted",
                          "password"])
def _table(kind: str, s: str) -> Case:
    col = "password" if kind == "password" else "key"
    return Case("table_cell", kind, _page(
        f"| service | {col} |\n|---|---|\n| {KINDS[kind][0]} | `{s}` |\n"))


@placement("front_matter", ["anthropic", "github_classic", "slack_webhook", "aws_key_id"])
def _meta(kind: str, s: str) -> Case:
    return Case("front_matter", kind, _page("See the front matter.\n",
                                            meta={"deploy": {"env": [_line(kind, s)]}}))


@placement("line_break_inside", ["anthropic", "openai_project", "github_fine_grained",
                                 "stripe_secret", "google_ai"])
def _broken(kind: str, s: str) -> Case:
    cut = len(s) // 2
    return Case("line_break_inside", kind, _page(
        f"The key (wrapped by the mail client):\n{s[:cut]}\n{s[cut:]}\nend\n"))


@placement("split_across_fields", ["anthropic", "groq", "github_classic", "huggingface"])
def _fields(kind: str, s: str) -> Case:
    cut = len(s) // 2
    return Case("split_across_fields", kind, _page(
        "Two halves, to be joined.\n", meta={"part_1": s[:cut], "part_2": s[cut:]}))


@placement("zero_width", ["anthropic", "openai_project", "aws_key_id", "slack_bot"])
def _zw(kind: str, s: str) -> Case:
    return Case("zero_width", kind, _page(f"key: {_zero_width(s, chr(0x200B))}\n"))


@placement("soft_hyphen", ["anthropic", "github_classic", "stripe_secret", "gitlab"])
def _shy(kind: str, s: str) -> Case:
    return Case("soft_hyphen", kind, _page(f"token {_zero_width(s, chr(0xAD))} for CI\n"))


@placement("full_width", ["anthropic", "openai_legacy", "aws_key_id", "github_classic"])
def _fw(kind: str, s: str) -> Case:
    return Case("full_width", kind, _page(f"the key is {_full_width(s)}\n"))


@placement("base64", ["anthropic", "mistral", "aws_secret", "slack_bot", "password"])
def _b64(kind: str, s: str) -> Case:
    enc = base64.b64encode(_line(kind, s).encode()).decode()
    return Case("base64", kind, _page(f"creds (base64): {enc}\n"))


@placement("hex", ["anthropic", "openai_project", "github_classic", "mistral"])
def _hex(kind: str, s: str) -> Case:
    return Case("hex", kind, _page(f"dump: {_line(kind, s).encode().hex()}\n"))


@placement("url_encoded", ["anthropic", "huggingface", "google_ai", "password"])
def _url(kind: str, s: str) -> Case:
    return Case("url_encoded", kind, _page(
        f"callback: https://hooks.example.com/cb?q={quote(_line(kind, s), safe='')}\n"))


@placement("reversed", ["anthropic", "openai_project", "aws_key_id", "github_classic",
                        "stripe_secret", "gitlab"])
def _rev(kind: str, s: str) -> Case:
    return Case("reversed", kind, _page(f"(reversed, so scanners miss it) {s[::-1]}\n"))


@placement("pem_header_mangled", ["pem_rsa", "pem_openssh"])
def _pem(kind: str, s: str) -> Case:
    two_spaces = s.replace(" PRIVATE KEY-----", "  PRIVATE KEY-----", 1)
    broken = s.replace(" PRIVATE KEY-----", "\nPRIVATE KEY-----", 1)
    return Case("pem_header_mangled", kind, _page(
        f"Old key:\n\n{two_spaces}\n\nNew key:\n\n{broken}\n"))


@placement("pem_plain", ["pem_rsa", "pem_openssh", "gcp_service_account"])
def _pem_plain(kind: str, s: str) -> Case:
    return Case("pem_plain", kind, _page(f"```\n{s}\n```\n"))


@placement("provenance", ["anthropic", "openai_project", "github_classic", "password"])
def _prov(kind: str, s: str) -> Case:
    note = f"password is {s}" if kind == "password" else f"ran with {s}"
    return Case("provenance", kind, provenance={"tool": "eval", "note": note})


@placement("string_concat", ["anthropic", "openai_project", "stripe_secret"])
def _concat(kind: str, s: str) -> Case:
    return Case("string_concat", kind, _page(
        f"```python\nKEY = \"{s[:12]}\" + \"{s[12:]}\"\n```\n"))


@placement("title_and_tags", ["aws_key_id", "gitlab", "github_classic"])
def _title(kind: str, s: str) -> Case:
    return Case("title_and_tags", kind, {"id": "page/creds", "title": f"creds {s}",
                                         "body": "see title\n"})


@placement("cli_flag", ["anthropic", "huggingface", "stripe_secret", "password"])
def _flag(kind: str, s: str) -> Case:
    flag = "--password" if kind == "password" else "--token"
    return Case("cli_flag", kind, _page(f"    mytool login {flag}={s} --region eu\n"))


def secret_cases(seed: int = SEED) -> list[Case]:
    """Corpus 1: every placement with each of its kinds, secrets made from ``seed``."""
    rng = random.Random(seed)
    out = []
    for kinds, make in PLACEMENTS.values():
        for kind in kinds:
            out.append(make(kind, KINDS[kind][2](rng)))
    return out


def load(path: str | None) -> ModuleType:
    """The screening module: ours, or the file at ``path`` (an earlier version)."""
    if path is None:
        from shared import screening
        return screening
    spec = importlib.util.spec_from_file_location("screening_under_test", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def caught(mod: ModuleType, case: Case) -> bool:
    if case.provenance is not None:
        f = getattr(mod, "screen_provenance", None)
        return bool(f(case.provenance)) if f is not None else False
    return bool(mod.screen_entry(make_entry(case.entry)))


def run(pages: int | None = None, module: str | None = None) -> dict[str, Any]:
    from bench.screening_docs import pages as doc_pages

    mod = load(module)
    cases = secret_cases()
    missed = [(c.placement, c.kind) for c in cases if not caught(mod, c)]
    docs = doc_pages()
    if pages is not None and pages < len(docs):
        docs = random.Random(SEED).sample(docs, pages)
    mod.screen_entry(make_entry(_page("warm up\n")))
    flagged, size, spent = [], 0, 0.0
    for i, (name, text) in enumerate(docs):
        e = make_entry({"id": f"page/doc-{i}", "title": "doc", "body": text})
        t0 = time.process_time()  # CPU time: the machine is shared, wall time wanders
        found = mod.screen_entry(e)
        spent += time.process_time() - t0
        size += len(text.encode())
        if found:
            flagged.append({"page": name, "rules": sorted({f.rule for f in found})})
    return {
        "secrets": len(cases), "placements": len(PLACEMENTS),
        "kinds": len({c.kind for c in cases}), "caught": len(cases) - len(missed),
        "missed": missed,
        "pages": len(docs), "mb": round(size / 1e6, 1),
        "false_positives": len(flagged),
        "fp_per_10k_pages": round(len(flagged) / len(docs) * 1e4, 2),
        "fp_rules": dict(Counter(r for f in flagged for r in f["rules"])),
        "flagged": flagged[:50],
        "ms_per_mb": round(spent / (size / 1e6) * 1000, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.screening", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, help="a sample of the documentation pages")
    ap.add_argument("--module", help="screen with this file instead of shared/screening.py")
    ap.add_argument("--out", type=Path, help="write the result here as JSON")
    args = ap.parse_args(argv)
    res = run(args.pages, args.module)
    print(f"secrets: {res['caught']} of {res['secrets']} caught ({res['kinds']} kinds, "
          f"{res['placements']} placements)")
    for placement_, kind in res["missed"]:
        print(f"  missed: {kind} in {placement_}")
    print(f"documentation: {res['pages']} pages, {res['mb']} MB: {res['false_positives']} "
          f"flagged, {res['fp_per_10k_pages']} per 10,000 pages {res['fp_rules']}")
    for f in res["flagged"][:20]:
        print(f"  flagged: {f['page']} {f['rules']}")
    print(f"time: {res['ms_per_mb']} ms of CPU per MB")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    return 0 if not res["missed"] else 1


if __name__ == "__main__":
    sys.exit(main())
