"""The documentation corpus of the screening benchmark (bench/screening.py): real manuals
from this machine, cut into vault-sized pages, to count what screening wrongly refuses.

    man pages        /usr/share/man/**/*.gz (and plain), roff turned into text crudely
    package docs     /usr/share/doc/** text files (README, NEWS, changelogs, copyright)
    Python docs      the docstrings of every module under /usr/lib/python3*/ and the venv's
                     site-packages (one page a module: its docstring and its functions')
    package READMEs  METADATA / PKG-INFO / README* files in the site-packages folders

Nothing is fetched: what the machine has is what is measured (the count of pages is in the
report). A page is at most ``PAGE_CHARS`` characters, cut at a line; identical pages
(translations of one man page, a file shipped twice) are kept once. Extracted once into
``bench/.cache/`` (a few tens of seconds), then read from there.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import re
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"
FORMAT = 2
PAGE_CHARS = 16 * 1024
MAX_FILE = 4 * 1024 * 1024

_ROFF_FONT = re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)")
_ROFF_CHAR = re.compile(r"\\\((..)|\\\[([^\]]*)\]")
_ROFF_SPACE = re.compile(r"\\[0~ ]")
_ROFF_ESC = re.compile(r"\\[&|^%:/,]|\\s[-+]?\d|\\\*\(?..?|\\n\(?..?")
_ROFF_REQ = re.compile(r"^[.'][ \t]*([A-Za-z]{1,3})\b[ \t]*(.*)$")
_TEXT_EXT = {"", ".txt", ".md", ".rst", ".gz", ".text", ".markdown", ".html", ".htm"}
_TAGS = re.compile(r"<[^>]{0,300}>")


def roff_text(src: str) -> str:
    """A man page's roff source as plain text, roughly as ``man`` shows it (requests dropped,
    macro arguments kept, fonts and escapes removed)."""
    out = []
    for line in src.splitlines():
        if line.startswith((".\\\"", "'\\\"", '.\\"')) or line.strip() in (".", "'"):
            continue
        m = _ROFF_REQ.match(line)
        if m:
            req, arg = m.groups()
            if req in ("SH", "SS", "B", "I", "BR", "IR", "RB", "RI", "BI", "IB", "TP", "IP",
                       "SM", "SB", "UR", "MT", "Nm", "Nd", "Fl", "Ar", "Op", "It", "Xr"):
                line = arg.replace('"', "")
            else:
                continue
        line = _ROFF_FONT.sub("", line)
        line = _ROFF_CHAR.sub(" ", _ROFF_SPACE.sub(" ", line))
        line = _ROFF_ESC.sub("", line).replace("\\-", "-").replace("\\e", "\\")
        out.append(line)
    return "\n".join(out)


def _read(p: Path) -> str | None:
    try:
        if p.is_symlink() or not p.is_file() or p.stat().st_size > MAX_FILE:
            return None
        data = p.read_bytes()
        if p.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    if b"\0" in data[:4096]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _docstrings(src: str) -> str:
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return ""
    parts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                name = getattr(node, "name", "module")
                parts.append(f"## {name}\n\n{doc}\n")
    return "\n".join(parts)


def _site_dirs() -> list[Path]:
    dirs = {Path(p) for p in sorted(Path("/usr/lib").glob("python3*"))}
    dirs.add(Path(sysconfig.get_paths()["purelib"]))
    return sorted(d for d in dirs if d.is_dir())


def _files() -> Iterator[tuple[str, Path]]:
    """(kind, path) of every document, in a stable order."""
    for p in sorted(Path("/usr/share/man").rglob("*")):
        if ".gz" in p.suffixes or p.suffix[1:2].isdigit():
            yield "man", p
    for p in sorted(Path("/usr/share/doc").rglob("*")):
        if p.suffix.lower() in _TEXT_EXT:
            yield "doc", p
    for d in _site_dirs():
        for p in sorted(d.rglob("*.py")):
            if "/test" not in str(p.relative_to(d)):  # test suites: fixtures, not docs
                yield "py", p
        for p in sorted(d.rglob("*")):
            if p.name in ("METADATA", "PKG-INFO") or p.name.upper().startswith("README"):
                yield "meta", p


def _document(kind: str, p: Path) -> str:
    text = _read(p)
    if not text:
        return ""
    if kind == "man":
        return roff_text(text)
    if kind == "py":
        return _docstrings(text)
    return _TAGS.sub(" ", text) if ".htm" in p.name else text


def _documents() -> Iterator[tuple[str, str]]:
    """(source, text) of every document, in a stable order."""
    for kind, p in _files():
        text = _document(kind, p)
        if text:
            yield f"{kind}:{p}", text


def sample(n: int) -> list[tuple[str, str]]:
    """About ``n`` pages from documents spread evenly over all of them, without extracting
    the whole corpus (the test suite's slice: a second or two)."""
    files = list(_files())
    out: list[tuple[str, str]] = []
    for kind, p in files[::max(1, len(files) // n)]:
        text = _document(kind, p)
        if text:
            out.extend(list(_pages(f"{kind}:{p}", text))[:1])
    return out[:n]


def _pages(source: str, text: str) -> Iterator[tuple[str, str]]:
    lines, size, n = [], 0, 0
    for line in text.splitlines(keepends=True):
        if size + len(line) > PAGE_CHARS and lines:
            yield f"{source}#{n}", "".join(lines)
            lines, size, n = [], 0, n + 1
        lines.append(line[:PAGE_CHARS])
        size += len(line)
    if "".join(lines).strip():
        yield f"{source}#{n}", "".join(lines)


def extract() -> list[tuple[str, str]]:
    seen: set[bytes] = set()
    out = []
    for source, text in _documents():
        for name, page in _pages(source, text):
            digest = hashlib.sha256(page.encode("utf-8", "replace")).digest()
            if digest not in seen:
                seen.add(digest)
                out.append((name, page))
    return out


def pages() -> list[tuple[str, str]]:
    """The corpus: (where from, page text), from the cache when it is there."""
    path = CACHE / f"screening-docs-{FORMAT}-py{sys.version_info[0]}{sys.version_info[1]}.jsonl"
    if path.exists():
        with path.open(encoding="utf-8") as f:
            return [tuple(json.loads(line)) for line in f]  # type: ignore[misc]
    out = extract()
    CACHE.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in out:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return out


if __name__ == "__main__":
    ps = pages()
    kinds: dict[str, int] = {}
    for name, _ in ps:
        kinds[name.split(":", 1)[0]] = kinds.get(name.split(":", 1)[0], 0) + 1
    print(len(ps), kinds, sum(len(t) for _, t in ps) / 1e6, "M chars")
