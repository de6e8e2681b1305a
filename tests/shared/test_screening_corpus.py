"""Screening against what people paste and what documentation shows (docs/security.md,
Screening; decision D121), on the two corpora of bench/screening.py:

- every placement kind of corpus 1 (fake, format-valid keys of the major providers in
  prose, configs, code, headers, tables, front matter, titles, provenance; cut over lines
  or fields, with zero-width characters or soft hyphens inside, full-width, base64, hex,
  URL-encoded, reversed, PEM headers with two spaces or a line break) is caught, and no
  finding carries the secret;
- documentation examples and placeholders are not refused, nor a spread slice of this
  machine's manuals (the whole of corpus 2 is ``make bench-screening``).

On 0506cf5 (before D121) 70 of corpus 1's 137 secrets went through, in 19 of its 24
placement kinds, and 380 of 10,000 documentation pages were refused.
"""

from __future__ import annotations

import pytest

from bench import screening as b
from bench.screening_docs import sample
from shared import screening
from shared.entry import make_entry

CASES = b.secret_cases()


@pytest.mark.parametrize("placement", sorted(b.PLACEMENTS))
def test_each_placement_of_a_pasted_secret_is_caught(placement: str) -> None:
    cases = [c for c in CASES if c.placement == placement]
    assert cases
    missed = [c.kind for c in cases if not b.caught(screening, c)]
    assert missed == []
    for c in cases:
        if c.provenance is None:
            found = screening.screen_entry(make_entry(c.entry))
            assert all(c.entry["body"] not in repr(f.to_json()) for f in found)


def test_the_corpus_is_as_large_as_promised() -> None:
    assert len(CASES) >= 60 and len(b.PLACEMENTS) >= 15
    assert {"anthropic", "openai_project", "google_ai", "mistral", "groq", "huggingface",
            "aws_key_id", "aws_secret", "gcp_service_account", "azure_storage",
            "github_classic", "github_fine_grained", "gitlab", "slack_bot", "discord_bot",
            "stripe_secret", "stripe_restricted", "pem_rsa", "password"} <= {
                c.kind for c in CASES}


# what manuals and READMEs show: placeholders, examples, generated ids, digests
DOCUMENTATION = [
    "export https_proxy=http://user:pass@proxy.example.com:3128",
    "proxy = http://username:password@10.0.0.1:8080/",
    "postgresql://scott:tiger@localhost/test",
    "password: changeme",
    "password = \"<your-password>\"",
    "DB_PASSWORD=${DB_PASSWORD}",
    "api_key: <your-key>",
    "OPENAI_API_KEY=sk-...",
    "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "ANTHROPIC_API_KEY=sk-ant-api03-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "Set HF_TOKEN to your token (hf_...).",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "token: 'your-api-token-here'",
    "The password is required when the key is encrypted.",
    "password: str | None = None",
    "self.password = password",
    "Your password is stored in ~/.netrc (chmod 600).",
    "request id 3f2b8c9e-5d7a-4c1b-9e2f-7a6b5c4d3e2f failed",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "arn:aws:iam::123456789012:role/service-role/MyLambdaRole-abc123",
    "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "--kms-key=projects/my-project/locations/us-central1/keyRings/my-ring/cryptoKeys/key",
    "integrity=\"sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC\"",
    "key fingerprint = 4ED7 78F5 39E3 634C 779C  87C6 D7CA 6D42 0F16 51A4",
    "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
    "A PEM file starts with -----BEGIN PRIVATE KEY----- and ends with its END line.",
    "Authorization: Bearer <token>",
    "curl -H \"Authorization: Bearer $TOKEN\" https://api.example.com",
    "\"access_token\":\"2YotnFZFEjr1zCsicMWpAA\"",
    "token = \"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6"
    "IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c\"",
    "Run `gcloud compute ssh my-instance --zone=us-central1-a`.",
    "etag: BwWWja0YfJA=",
    "session_id = 7c9e6679-7425-40de-944b-e07fc1f90ae7",
]


@pytest.mark.parametrize("text", DOCUMENTATION)
def test_documentation_examples_are_not_refused(text: str) -> None:
    e = make_entry({"id": "page/howto", "title": "howto", "body": f"Example:\n\n{text}\n"})
    assert screening.screen_entry(e) == []


def test_a_spread_of_this_machines_manuals_is_not_refused() -> None:
    pages = sample(150)
    assert len(pages) > 60
    flagged = [name for i, (name, text) in enumerate(pages) if screening.screen_entry(
        make_entry({"id": f"page/doc-{i}", "title": "doc", "body": text}))]
    assert flagged == []


def test_a_secret_in_provenance_is_found_and_withheld_by_the_replica() -> None:
    from replica.engine.screened import WITHHELD, withhold_secrets

    key = b.KINDS["anthropic"][2](__import__("random").Random(1))
    prov = {"tool": "eval", "session": key, "note": "nightly run"}
    (f,) = screening.screen_provenance(prov)
    assert (f.entry, f.rule) == ("provenance.session", "anthropic_key")
    assert key not in repr(f.to_json())
    assert withhold_secrets(prov) == {"tool": "eval", "session": WITHHELD,
                                      "note": "nightly run"}
    assert withhold_secrets({"tool": "eval"}) == {"tool": "eval"}


def test_a_text_made_of_keys_yields_a_bounded_number_of_findings() -> None:
    """A body of thousands of keys (or of base64 that decodes to keys) is refused by its
    first findings; the de-duplication of findings no longer grows with their square."""
    from shared import secretscan

    rng = __import__("random").Random(2)
    keys = [b.KINDS["github_classic"][2](rng) for _ in range(3000)]
    assert len(secretscan.scan(" ".join(keys))) == secretscan.MAX_FINDINGS
    encoded = " ".join(__import__("base64").b64encode(k.encode()).decode() for k in keys)
    assert len(secretscan.scan(encoded)) == secretscan.MAX_FINDINGS


def test_a_live_jwt_is_found_an_expired_or_example_one_is_not() -> None:
    import base64
    import json

    def jwt(claims: dict[str, object]) -> str:
        def part(d: dict[str, object]) -> str:
            return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")
        return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}." + \
            "Qm9vN2tQcFh2Wm1xR2xSdEhjVXdFeUpzTmFCaUZvRGs"

    live = jwt({"iss": "https://auth.acme.dev", "sub": "svc-ci", "exp": 4102444800})
    expired = jwt({"iss": "https://auth.acme.dev", "sub": "svc-ci", "exp": 1572006964})
    for token, rules in ((live, ["jwt"]), (expired, [])):
        e = make_entry({"id": "page/t", "title": "t", "body": f"Authorization: {token}\n"})
        assert [f.rule for f in screening.screen_entry(e)] == rules
