"""Finding secrets in text (docs/security.md, "Screening"; decision D121): the providers' key
formats, secrets written in prose, and the disguises a paste carries, without refusing
documentation's placeholders and examples.

    scan(text) -> [(offset, rule, matched secret)]
      views of the text, each scanned, findings merged (one per rule and secret):
        plain      invisible characters removed (zero-width, soft hyphen, BOM: category
                   Cf), NFKC (full-width forms to ASCII); newlines kept, so offsets keep
                   their line
        joined     line breaks inside tokens and string concatenations removed: a key cut
                   over lines or fields             (FORMATS only: anchored by a prefix)
        reversed   the plain view backwards, when a reversed prefix is in it  (FORMATS)
        decoded    base64, hex and URL-encoded runs, decoded when they decode to text
                   (two levels at most)             (every rule)
      rules
        FORMATS    provider formats, each anchored by its prefix (sk-ant-, AKIA, ghp_, …)
                   or shape; the random part must look random (not_placeholder)
        PEM        a private key header (spaces or a line break inside allowed) followed
                   by key material
        PROSE      a secret word (password, token, api key, …) then a value: ``password is
                   X`` (password_like) or a random-looking token (random_token)
        ASSIGN     ``name = value`` with a high-entropy value (the rule of earlier releases)

A placeholder (``<your-key>``, ``sk-...``, ``xxxx``, ``changeme``, ``${TOKEN}``, an AWS
``EXAMPLE`` key) is never a finding, nor are generated ids and digests (UUIDs, hex hashes,
ARNs, paths, slugs): none has the random mixed-case body the formats demand. Pure: no I/O,
imports nothing of ours. The offsets are in the plain view, which has the raw text's lines.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import math
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from urllib.parse import unquote

Finding = tuple[int, str, str]  # (offset in the plain view, rule, matched secret)

# (rule, hints: the pattern runs only when one of these is in the text (a substring test
#  costs far less than a regular expression's pass), pattern: group ``s`` is the secret
#  when present, else the whole match; ``^`` first: no letter or digit just before it,
#  check: "any" (entropy), "mixed" (also upper, lower and digits), "jwt" (jwt_is_token))
_FORMAT_SPECS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    # LLM APIs
    ("anthropic_key", ("sk-ant-",), r"sk-ant-(?:api|admin|oat|ort|sid)\d{2}-[\w\-]{32,}", "any"),
    ("openai_key", ("sk-",), r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{32,}", "any"),
    ("openai_key", ("T3BlbkFJ",), r"sk-[A-Za-z0-9_\-]{0,80}T3BlbkFJ[A-Za-z0-9_\-]{16,}",
     "any"),
    ("openai_key", ("sk-",), r"^sk-(?!ant-|proj-)[A-Za-z0-9]{32,64}(?![\w-])", "any"),
    ("openrouter_key", ("sk-or-",), r"sk-or-v1-[0-9a-f]{64}", "any"),
    ("google_api_key", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}", "any"),
    ("google_oauth_secret", ("GOCSPX-",), r"GOCSPX-[A-Za-z0-9_\-]{28}", "any"),
    ("google_oauth_token", ("ya29.",), r"^ya29\.[0-9A-Za-z_\-]{30,}", "any"),
    ("huggingface_token", ("hf_",), r"^hf_[A-Za-z0-9]{30,}", "mixed"),
    ("groq_key", ("gsk_",), r"gsk_[A-Za-z0-9]{48,}", "any"),
    ("xai_key", ("xai-",), r"^xai-[A-Za-z0-9]{60,}", "any"),
    ("llm_api_key", ("pplx-", "r8_", "lsv2_", "fw_", "pcsk_", "nvapi-", "csk-"),
     r"^(?:pplx-[A-Za-z0-9]{40,}|r8_[A-Za-z0-9]{30,}|lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{8,}"
     r"|fw_[A-Za-z0-9]{20,}|pcsk_[A-Za-z0-9_]{40,}|nvapi-[A-Za-z0-9_\-]{40,}|"
     r"csk-[a-z0-9]{40,})", "any"),
    # cloud
    ("aws_access_key", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
     r"^(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])", "any"),
    ("azure_storage_key", ("AccountKey=",), r"AccountKey=(?P<s>[A-Za-z0-9+/]{80,}={0,2})",
     "any"),
    ("azure_client_secret", ("Q~",), r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", "any"),
    ("azure_sas_token", ("sig=",), r"[?&]sig=(?P<s>[A-Za-z0-9%+/]{40,}(?:%3D|=){0,2})", "any"),
    ("digitalocean_token", ("_v1_",), r"do[por]_v1_[a-f0-9]{64}", "any"),
    ("hashicorp_token", ("hvs.", "hvb."), r"^hv[sb]\.[A-Za-z0-9_\-]{24,}", "mixed"),
    # source hosting and registries
    ("github_token", ("gh",), r"^gh[pousr]_[A-Za-z0-9]{36,}", "any"),
    ("github_token", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{60,}", "any"),
    ("gitlab_token", ("gl",), r"^gl(?:pat|dt|rt|ptt|ft|cbt|oas|soat)-[A-Za-z0-9_\-]{20,}",
     "any"),
    ("gitlab_token", ("GR1348941",), r"GR1348941[A-Za-z0-9_\-]{20,}", "any"),
    ("npm_token", ("npm_",), r"^npm_[A-Za-z0-9]{36}", "any"),
    ("pypi_token", ("pypi-",), r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", "any"),
    # chat
    ("slack_token", ("xox",), r"^xox[abposre]-(?:\d+-)+[A-Za-z0-9\-]{10,}", "any"),
    ("slack_token", ("xapp-",), r"^xapp-\d-[A-Z0-9]+-\d+-[a-f0-9]{32,}", "any"),
    ("slack_token", ("hooks.slack.com",), r"hooks\.slack\.com/services/T[A-Z0-9]{6,}/"
     r"B[A-Z0-9]{6,}/(?P<s>[A-Za-z0-9]{20,})", "mixed"),
    ("discord_token", (".",), r"^[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\."
     r"[A-Za-z0-9_\-]{27,40}", "mixed"),
    ("discord_token", ("/api/webhooks/",), r"discord(?:app)?\.com/api/webhooks/\d{15,22}/"
     r"(?P<s>[A-Za-z0-9_\-]{60,})", "any"),
    ("telegram_token", (":AA",), r"\d{8,10}:AA[0-9A-Za-z_\-]{33}", "any"),
    ("twilio_key", ("SK",), r"^SK[0-9a-f]{32}(?![A-Za-z0-9])", "any"),
    ("sendgrid_key", ("SG.",), r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", "any"),
    ("mailchimp_key", ("-us",), r"^[0-9a-f]{32}-us\d{1,2}(?![0-9])", "any"),
    # payment
    ("stripe_key", ("_live_",), r"^[sr]k_live_[A-Za-z0-9]{20,}", "any"),
    ("stripe_key", ("whsec_",), r"^whsec_[A-Za-z0-9]{32,}", "any"),
    ("square_oauth", ("sq0",), r"sq0(?:csp|atp)-[0-9A-Za-z_\-]{22,43}", "any"),
    ("shopify_token", ("shp",), r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", "any"),
    # signed tokens: only with the claims of a live one (jwt_is_token)
    ("jwt", ("eyJ",), r"^eyJ[A-Za-z0-9_\-]{10,}\.(?P<p>eyJ[A-Za-z0-9_\-]{10,})\."
     r"[A-Za-z0-9_\-]{20,}", "jwt"),
)
# the discord pattern's first part is the base64 of a numeric id: it needs both dots, which
# a cheap look finds before the pattern runs
_DISCORD_SHAPE = re.compile(r"\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27}")

# a private key header; what follows it must be key material (a header alone, or one over
# "..." is documentation: openssl's manual shows them)
_PEM = re.compile(
    r"-----\s*BEGIN[ \t\r\n]+(?:[A-Z0-9]+[ \t\r\n]+){0,3}PRIVATE[ \t\r\n]+KEY"
    r"(?:[ \t\r\n]+BLOCK)?\s*-----(?P<body>(?:[A-Za-z0-9+/=:\-,\s]|\\[nr]){0,400})")
_PEM_MATERIAL = re.compile(r"[A-Za-z0-9+/]{16,}")
_PEM_PLACEHOLDER = re.compile(r"(?i)x{6,}|your|example|insert|paste")
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d: ")

# a run of token characters long enough to be a key: the prose, assignment and encoding
# rules start from these (rare in prose) and look around them
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_\-.~])[A-Za-z0-9+/_\-.~]{20,}={0,2}")
_SECRET_WORDS = (r"api[ _-]?key|apikey|access[ _-]?key|secret[ _-]?key|client[ _-]?secret|"
                 r"secret|token|credentials?|bearer|auth[ _-]?key|private[ _-]?key|"
                 r"signing[ _-]?key|key")
# before a token: a secret word, a few words at most, a verb or operator (lower case)
_PROSE_HEAD = re.compile(
    r"\b(?:" + _SECRET_WORDS + r")s?\b[^\n`'\"]{0,40}?(?:\bis|\bwas|\bare|:|=|\buse|"
    r"\bkey|\btoken|\bsecret|\bbearer)[ \t]*[`'\"]?$")
# a public key, a pin, a digest is named so: what follows is not a secret
_NOT_SECRET_HEAD = re.compile(r"public|sha\d|md5|fingerprint|digest|hash|checksum|\bpin\b")
_PROSE_PASSWORD = re.compile(
    r"(?:password|passwd|passphrase|passcode|pwd)\b(?:[ \t]+(?:for|of|on|to)[ \t]+"
    r"[\w.@\-]+(?:[ \t]+[\w.@\-]+)?)?[ \t]*(?:\bis\b|\bwas\b|:|=|:=|=>|\bset[ \t]+to\b)"
    r"[ \t]*[`'\"]?(?P<s>[^\s`'\",;)(\]\[<>{}]{6,64})")
_PASSWORD_HINT = ("pass", "pwd")
# ``name = value`` / ``name: value`` (quoted or not) just before a token
_SECRET_NAME = re.compile(
    r"(?i)secret|token|passw|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth|"
    r"credential|session|cookie|bearer|signing|openai|anthropic|claude|mistral|groq|cohere|"
    r"gemini|huggingface|hf_|aws|azure|gcp|github|gitlab|slack|discord|stripe|dsn")
MAX_FINDINGS = 200  # a text's, at most
MIN_TOKEN = 24  # a key's length at least (RFC 6749's 22-character examples are not)
SECRET_NAME_LIMIT = 3.5  # bits per character over a secret-named value (hex tops at 4.0)
# names of generated values that are not secrets: ids, digests, signatures, public keys
_ID_NAME = re.compile(r"(?i)(?:^|[_.\-])(?:e?tag|hash|digest|sha\d*|md5|checksum|integrity|"
                      r"fingerprint|commit|revision|uuid|guid|nonce|salt|signature|id|"
                      r"public\w*)(?:$|[_.\-])")

_HEX = re.compile(r"[0-9A-Fa-f]{24,}")
_ESCAPED_HEX = re.compile(r"(?:\\x[0-9A-Fa-f]{2}){12,}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
# over the lower-cased value; and a run of one character
_PLACEHOLDER = re.compile(
    r"xxxx|\.\.\.|…|\*\*\*|<|>|\{|\}|\$|example|your|placeholder|redacted|changeme|"
    r"dummy|sample|replace|insert|secret|pass|fake|abcdef|123456|qwerty|letmein|scott|tiger")
_RUN = re.compile(r"(.)\1{5}")
_PLACEHOLDER_WORDS = frozenset({
    "pass", "password", "passwd", "pwd", "pw", "secret", "token", "user", "username",
    "login", "test", "admin", "root", "guest", "anonymous", "foo", "bar", "baz", "none",
    "null", "true", "false", "required", "optional", "empty"})
# what a key looks like backwards: the reversed view is scanned when one of these is there
_REVERSED_HINTS = ("-ks", "AIKA", "AISA", "azIA", "_phg", "_ohg", "_tap_buhtig", "-taplg",
                   "xox", "_evil_", "_fh", "_ksg", "-iax", "ETAVIRP", "KFJblB3T", "-XPSCOG")
_BASIC_AUTH = re.compile(r"://[^:/?#\[\]@!$&'()*+,;=\s]{1,64}:(?P<pw>[^:/?#\[\]@\s]{3,64})@"
                         r"[A-Za-z0-9\-.]")


def _compile() -> tuple[tuple[str, tuple[str, ...], re.Pattern[str], bool, str], ...]:
    return tuple((rule, hints, re.compile(rx.lstrip("^")), rx.startswith("^"), check)
                 for rule, hints, rx, check in _FORMAT_SPECS)


FORMATS = _compile()
RULES = tuple(sorted({r for r, _, _, _ in _FORMAT_SPECS} | {
    "private_key", "password_in_text", "secret_in_text", "high_entropy_assignment",
    "basic_auth_url"}))


def entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def not_placeholder(s: str) -> bool:
    """No placeholder marker: ``xxxx``, ``...``, ``<…>``, ``${…}``, ``example``, ``your``,
    ``changeme``, a run of one character, a counting sequence."""
    return _PLACEHOLDER.search(s.lower()) is None and _RUN.search(s) is None


def _classes(s: str) -> int:
    """How many of lower case, upper case and digits ``s`` has."""
    return (s != s.upper()) + (s != s.lower()) + (_DIGIT.search(s) is not None)


_DIGIT = re.compile(r"\d")


def _encoded_text(s: str) -> bool:
    """Base64 that decodes to text: encoded words, scanned as such (``_decoded``), not a
    key (random bytes do not decode to text)."""
    return any(True for _ in _b64_texts(s))


def random_token(s: str) -> bool:
    """Does a value of 20+ token characters look generated (a key), not a word, a slug, a
    path, an id or a digest? Mixed case and digits, high entropy, not made of word-sized
    segments (``my-cluster-2024``), not hex (digests, UUIDs, fingerprints), not encoded
    text, not a JWT (the jwt rule judges those)."""
    if len(s) < 20 or _classes(s) < 3 or not not_placeholder(s):
        return False
    if s.startswith(("http", "www.", "/", "./", "~/", "eyJ")) or ("/" in s and "." in s):
        return False  # a URL, a path, a JWT
    if max(len(p) for p in re.split(r"[-_./=~+:]", s)) < 16:
        return False  # words or numbers joined by separators
    return entropy(s) > 3.7 and not _encoded_text(s)


def password_like(s: str) -> bool:
    """A value after ``password is``: not a placeholder or a reference (``$PW``, ``<pw>``,
    ``%(pw)s``), not code (``self.password``, ``None``), not a word or a list of words
    (``UID:GID:shell``), not a word and a number (``secure1``): eight characters or more of
    two kinds at least, one of them a digit or a symbol."""
    s = _ENTITY_END.sub("", s).rstrip(".:!?")
    if len(s) < 8 or s.lower() in _PLACEHOLDER_WORDS or not not_placeholder(s) or \
            s.startswith(("-", "/", "%", "@", "http", "~")):
        return False
    if re.fullmatch(r"[A-Za-z_]+(?:[.:/\-][A-Za-z_]+)*(?:\(\))?|[a-z]+\d{1,4}|\d+", s):
        return False  # a word, a name in code, words joined, a word and a number, a number
    kinds = (any(c.isalpha() for c in s) + any(c.isdigit() for c in s)
             + any(not c.isalnum() for c in s))
    return kinds >= 2 and entropy(s) > 2.5


_ENTITY_END = re.compile(r"&(?:[a-z]+|#\d+);?$")


def jwt_is_token(payload: str, now: float | None = None) -> bool:
    """A JWT is a live bearer token when its claims say so: an expiry in the future, or
    none and an issuer, subject, audience, role or scope that is not a documentation
    example (``John Doe``, ``1234567890``)."""
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return False
    if re.search(r"(?i)john|doe|example|1234567890|\"some\"|payload|test|foo", raw):
        return False
    exp = re.search(r"\"exp\"\s*:\s*(\d{9,11})", raw)
    if exp is not None:
        return int(exp.group(1)) > (time.time() if now is None else now)
    return re.search(r"\"(iss|sub|aud|role|scope)\"", raw) is not None


def _format_ok(check: str, m: re.Match[str]) -> bool:
    if not not_placeholder(m.group(0)):
        return False
    if check == "jwt":
        return jwt_is_token(m.group("p"))
    s = m.groupdict().get("s") or re.sub(r"^[A-Za-z0-9]{1,10}[-_.]", "", m.group(0))
    if check == "mixed" and _classes(s) < 3:
        return False
    return entropy(s) > (2.5 if len(s) < 24 else 3.2)


def _present(text: str) -> list[int]:
    """The FORMATS whose hints are in ``text``."""
    return [i for i, f in enumerate(FORMATS) if any(h in text for h in f[1])]


def _formats(text: str, present: list[int] | None = None, *, glued: bool = False
             ) -> Iterator[Finding]:
    """The FORMATS in ``text``; ``glued``: a joined view, whose pieces ran together (what
    stood before a key may be the end of the line before)."""
    for i in _present(text) if present is None else present:
        rule, _, rx, bound, check = FORMATS[i]
        if rule == "discord_token" and not _DISCORD_SHAPE.search(text):
            continue
        for m in rx.finditer(text):
            if bound and not glued and m.start() > 0 and text[m.start() - 1].isalnum():
                continue
            if _format_ok(check, m):
                yield m.start(), rule, m.groupdict().get("s") or m.group(0)


def _pem(text: str) -> Iterator[Finding]:
    if "-----" not in text:
        return
    for m in _PEM.finditer(text):
        # the lines joined, not the words of a sentence after a header
        body = re.sub(r"[ \t]*(?:[\r\n]|\\n|\\r)[ \t]*", "", m.group("body"))
        material = _PEM_MATERIAL.search(body)
        if material and _classes(material.group(0)) >= 2 and \
                not _PEM_PLACEHOLDER.search(body):
            yield m.start(), "private_key", body[:64]
    for m in _PUTTY.finditer(text):
        yield m.start(), "private_key", text[m.start():m.start() + 200]


def _basic_auth(text: str) -> Iterator[Finding]:
    """A password in a URL (``scheme://user:password@host``), unless a placeholder
    (``user:pass@``, ``${PW}``, ``<password>``)."""
    if "@" not in text:
        return
    for m in _BASIC_AUTH.finditer(text):
        pw = unquote(m.group("pw"))
        if password_like(pw):
            yield m.start(), "basic_auth_url", pw


def _passwords(text: str, low: str) -> Iterator[Finding]:
    if not any(h in low for h in _PASSWORD_HINT):
        return
    for m in _PROSE_PASSWORD.finditer(low):
        if m.start() > 0 and low[m.start() - 1].isalnum():
            continue  # inside a word (``bypassword``); ``db_password`` is a name
        pw = text[m.start("s"):m.end("s")].rstrip(".:!?")
        if password_like(pw):
            yield m.start("s"), "password_in_text", pw


def _tokens(text: str, low: str, tokens: list[tuple[int, str]]) -> Iterator[Finding]:
    """The rules that start from a long token: a high-entropy value assigned to a
    secret-named name (``MISTRAL_API_KEY=…``), or a random-looking one after a secret word
    in prose (``our mistral key is …``)."""
    for start, tok in tokens:
        if len(tok) < MIN_TOKEN:
            continue
        line_start = text.rfind("\n", max(0, start - 120), start) + 1
        head = text[max(line_start, start - 120):start]
        words = head.split()
        in_url = bool(words) and ("://" in words[-1] or words[-1].startswith("www."))
        if head.rstrip(" \t\"'`")[-1:] in (":", "=", ">"):
            name = assigned_name(head)
            if _SECRET_NAME.search(name) and not _ID_NAME.search(name) and \
                    _high_entropy(tok):
                yield start, "high_entropy_assignment", tok
                continue
        low_head = low[max(line_start, start - 120):start]
        if _classes(tok) == 3 and not in_url and _PROSE_HEAD.search(low_head) and \
                not _NOT_SECRET_HEAD.search(low_head) and random_token(tok):
            yield start, "secret_in_text", tok


def _tables(text: str, low: str) -> Iterator[Finding]:
    """Cells of a Markdown table column whose header names a password or a key."""
    if "|" not in text or "--" not in text:
        return
    for m in _TABLE_RULE.finditer(text):
        top = text.rfind("\n", 0, max(m.start() - 1, 0)) + 1
        header = low[top:m.start()].strip().strip("|").split("|")
        cols = {i: "password_in_text" if "pass" in h else "secret_in_text"
                for i, h in enumerate(header) if _SECRET_COLUMN.search(h)}
        pos = m.end() + 1
        while cols and pos < len(text):
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            row = text[pos:end]
            if "|" not in row:
                break
            cells = row.strip().strip("|").split("|")
            for i, rule in cols.items():
                value = cells[i].strip().strip("`'\"") if i < len(cells) else ""
                ok = password_like if rule == "password_in_text" else random_token
                if value and ok(value):
                    yield pos + row.find(value), rule, value
            pos = end + 1


_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+\|?[ \t]*$",
                         re.MULTILINE)
_SECRET_COLUMN = re.compile(r"pass(?:word|wd|phrase)|secret|token|api[ _-]?key|^\s*key\s*$")


def assigned_name(head: str) -> str:
    """The name in ``head`` when it ends in an assignment (``name = ``, ``"name": "``,
    ``name := ``, ``name => ``), else ``""``. Read backwards, character by character: a
    regular expression anchored at the end tries every start before it."""
    h = head.rstrip(" \t\"'`")
    if h.endswith(("=>", ":=")):
        h = h[:-2]
    elif h.endswith((":", "=")):
        h = h[:-1]
    else:
        return ""
    h = h.rstrip(" \t\"'")
    i = len(h)
    while i > 0 and len(h) - i < 64 and (h[i - 1].isalnum() or h[i - 1] in "_.-"):
        i -= 1
    name = h[i:].lstrip("0123456789.-")
    return name if name[:1].isalpha() or name[:1] == "_" else ""


def _high_entropy(value: str) -> bool:
    if value.startswith(("http", "www.", "/", "./", "../", "~/", "eyJ")) or \
            "/" in value.strip("/") and "." in value:
        return False  # a URL, a path, a JWT
    if all(c.isalpha() or c in "-_./" for c in value) or not not_placeholder(value):
        return False  # words joined by separators (a slug, a relative path), a placeholder
    if max(len(p) for p in re.split(r"[-_./=~+:]", value)) < 16:
        return False  # words or numbers joined by separators
    return entropy(value) > SECRET_NAME_LIMIT and not _encoded_text(value)


def plain(text: str) -> str:
    """Invisible characters out (category Cf: zero-width space and joiners, soft hyphen,
    BOM, direction marks), compatibility forms folded (NFKC: full-width letters); the
    newlines stay where they are."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text.translate(_INVISIBLE))


# Unicode's format characters (category Cf), which show nothing: deleted by str.translate
_INVISIBLE: dict[int, None] = dict.fromkeys(
    [0xAD, *range(0x600, 0x606), 0x61C, 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0x180E,
     *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065),
     *range(0x2066, 0x2070), 0xFEFF, *range(0xFFF9, 0xFFFC), 0x110BD, 0x110CD,
     *range(0x13430, 0x13440), *range(0x1BCA0, 0x1BCA4), *range(0x1D173, 0x1D17B), 0xE0001,
     *range(0xE0020, 0xE0080)])


def joined(view: str) -> str:
    """``view`` with its line breaks (and a line's leading quote and list marks, trailing
    backslash) and string concatenations (``"ab" + "cd"``, ``"ab" "cd"``) removed: a key cut
    over lines or fields is whole again."""
    out = _INDENT.sub("\n", view).replace("\\\n", "").replace("\r\n", "").replace(
        "\n", "").replace("\\n", "")
    if '"' in out or "'" in out:
        out = _CONCAT.sub("", out)
    return out


_INDENT = re.compile(r"\n[ \t>#*]+")
_CONCAT = re.compile(r"[\"'][ \t]*[+.]?[ \t]*[\"']")


def _b64_texts(run: str) -> Iterator[str]:
    if _classes(run) < 3 or len(run) < 16:
        return
    run = run.rstrip("=")
    for alt in (b"+/", b"-_"):
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            continue
        if _texty(raw):
            yield raw.decode("ascii")
            return


def _decoded(text: str, tokens: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(offset, decoded text) of each encoded run that decodes to text: base64, hex,
    URL-encoding."""
    for start, tok in tokens:
        for dec in _b64_texts(tok.strip(".~")):
            yield start, dec
    hexes = [(at, tok) for at, tok in tokens if _HEX.fullmatch(tok)]
    if "\\x" in text:
        hexes += [(m.start(), m.group(0).replace("\\x", "")) for m in _ESCAPED_HEX.finditer(text)]
    for at, digits in hexes:
        try:
            raw = bytes.fromhex(digits[:len(digits) // 2 * 2])
        except ValueError:
            continue
        if _texty(raw):
            yield at, raw.decode("ascii")
    if "%" in text:
        seen = -1
        for m in _PERCENT.finditer(text):
            if m.start() < seen:
                continue  # in the word already decoded
            start = max(text.rfind(" ", 0, m.start()), text.rfind("\n", 0, m.start())) + 1
            end = min(x for x in (text.find(" ", m.start()), text.find("\n", m.start()),
                                  len(text)) if x >= 0)
            seen = end
            word = text[start:end]
            if word.count("%") >= 1:
                yield start, unquote(word)


def _texty(raw: bytes) -> bool:
    return len(raw) >= 12 and all(32 <= b < 127 or b in (9, 10, 13) for b in raw)


def scan(text: str, *, depth: int = 2) -> list[Finding]:
    """Every secret in ``text``: (offset in ``plain(text)``, rule, secret), one finding a
    secret (the first rule that found it, in the order of the module's docstring)."""
    view = plain(text)
    low = view.lower()
    found: dict[str, tuple[int, str]] = {}

    by_start: dict[str, list[str]] = {}  # the secrets found, by their first 8 characters

    def add(items: Iterator[Finding], at: Callable[[int], int] | int) -> None:
        # a longer or shorter match of the same secret (a joined view runs into the next
        # line; a prose rule sees the value a format found) is the same finding; at most
        # MAX_FINDINGS (a text made of keys is refused by its first ones, and costs no more)
        for off, rule, secret in items:
            if len(found) >= MAX_FINDINGS:
                return
            same = by_start.setdefault(secret[:8], [])
            if not any(secret.startswith(s) or s.startswith(secret) for s in same):
                same.append(secret)
                found[secret] = (at if isinstance(at, int) else at(off), rule)

    glued = joined(view)
    present = _present(glued)  # a hint in the view is in the glued view too
    add(_formats(view, present), _same)
    add(_pem(view), _same)
    add(_basic_auth(view), _same)
    add(_passwords(view, low), _same)
    tokens = [(m.start(), m.group(0)) for m in _TOKEN.finditer(view)]
    tokens = [(at, tok) for at, tok in tokens if _classes(tok) >= 2]
    add(_tokens(view, low, tokens), _same)
    add(_tables(view, low), _same)
    if glued != view:
        add(_formats(glued, present, glued=True), lambda off: _locate(view, glued, off))
        add(_pem(glued), lambda off: _locate(view, glued, off))
    if any(h in view for h in _REVERSED_HINTS):
        rev = view[::-1]
        add(_formats(rev), lambda off: len(view) - 1 - off)  # the same line
        add(_pem(rev), lambda off: len(view) - 1 - off)
    if depth > 0:
        # every decoded run in one text, a line each: one scan, each finding placed where
        # its run was
        runs = list(_decoded(view, tokens))
        if runs:
            starts, at = [], 0
            for _, dec in runs:
                starts.append(at)
                at += len(dec) + 1
            inner = scan("\n".join(dec for _, dec in runs), depth=depth - 1)
            add(iter(inner), lambda off: runs[bisect.bisect_right(starts, off) - 1][0])
    return sorted((off, rule, secret) for secret, (off, rule) in found.items())


def _same(off: int) -> int:
    return off


def _locate(view: str, glued: str, off: int) -> int:
    """The offset in ``view`` of what starts at ``off`` in ``glued`` (its first eight
    characters found again; else the start)."""
    return max(view.find(glued[off:off + 8]), 0)
