"""A realistic folder of notes for ``quire import``, generated from text on this machine (the
licences in /usr/share/common-licenses, the repository's docs, the standard library's
docstrings: whatever is there), never downloaded. Deterministic for a seed.

    build(root, notes=2000, attachments=300)  ->  Corpus (what was written, what is ignored)

Three layouts in one folder, as teams bring them:

- an Obsidian vault: ``.obsidian/`` settings, ``.trash/``, nested folders with spaces, upper
  case and accents (``Meeting Notes/Q3 Réunion.md``), ``[[wikilinks]]`` with aliases and
  headings, embeds of images;
- an LLM-wiki layout: ``wiki/<Topic>.md`` pages, each with a sidecar ``<Topic>.notes.md``
  and sources under ``raw/`` (text files: attachments);
- a plain folder: ``docs/`` Markdown with relative links, PDFs beside it.

Files vary as people's files do: no front matter, YAML front matter in several styles
(block and flow lists, quoted values, ``aliases``, ``kind: skill`` in front matter,
``skill/`` as a folder), CRLF line ends, a UTF-8 byte-order mark. Attachments are valid PNG
images and PDFs, some over 1 MiB. Editor scratch and OS files (``.DS_Store``,
``#draft.md#``, ``x.md___jb_tmp___``) are there too, and a ``.quireignore``: what
``ignored`` lists must be left out.
"""

from __future__ import annotations

import os
import random
import re
import struct
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from shared.names import name_problem

FOLDERS = ["Meeting Notes", "Projects/Release Plan", "Projects/Café Ops", "Archive/2025",
           "People", "Réunions/Équipe", "Ideas", "Inbox", "Research/Deep Dive/Papers",
           "docs/guides", "docs/reference", "wiki", "skill", "Notes ÅÄÖ"]


_YAML_WORDS = {"yes", "no", "true", "false", "on", "off", "null", "y", "n", "nan", "inf"}


@dataclass
class Corpus:
    root: Path
    notes: list[str] = field(default_factory=list)  # relative paths of the .md files
    attachments: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # files and folders (ending in /)


def _words() -> list[str]:
    """Words from text on this machine."""
    text = []
    for folder in (Path("/usr/share/common-licenses"), Path(__file__).parents[2] / "docs"):
        if folder.is_dir():
            for p in sorted(folder.iterdir())[:40]:
                if p.is_file():
                    try:
                        text.append(p.read_text("utf-8", errors="ignore")[:200_000])
                    except OSError:
                        pass
    if not text:
        for name in sorted(sys.modules)[:200]:
            text.append(getattr(sys.modules[name], "__doc__", None) or "")
    words = re.findall(r"[A-Za-zÀ-ÿ]{3,14}", "\n".join(text))
    return words or ["note", "plan", "team", "release", "café"]


def png(width: int, height: int, rnd: random.Random) -> bytes:
    """A valid PNG of noise (incompressible: its size is about width × height × 3)."""
    raw = b"".join(b"\x00" + rnd.randbytes(width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                               0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))


def pdf(text: str, padding: int, rnd: random.Random) -> bytes:
    """A valid one-page PDF showing ``text``, with ``padding`` bytes of an embedded stream."""
    content = f"BT /F1 12 Tf 72 720 Td ({text[:80]}) Tj ET".encode("latin-1", "replace")
    blob = rnd.randbytes(padding)
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Length %d >>\nstream\n" % len(blob) + blob + b"\nendstream"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objs) + 1, xref)
    return bytes(out)


def _front(rnd: random.Random, title: str, words: list[str], style: int, kind: str | None
           ) -> str:
    # a bare yes/no/true/off is a YAML boolean, not a tag: such a file is refused
    # (invalid_entry), which the corpus keeps out so that everything it has imports
    tags = [w.lower() for w in rnd.sample(words, 6) if w.lower() not in _YAML_WORDS][:2]
    if style == 0:
        return ""
    if style == 1:
        head = f"title: {title}\ntags: [{', '.join(tags)}]\n"
    elif style == 2:
        head = f'title: "{title}"\ntags:\n' + "".join(f"  - {t}\n" for t in tags)
    elif style == 3:
        head = f"aliases: [{title.lower()}]\ncreated: 2025-0{rnd.randint(1, 9)}-1{rnd.randint(0, 9)}\n"
    else:
        head = f"title: '{title}'\nauthor: {rnd.choice(words)}\nstatus: draft\n"
    if kind:
        head += f"kind: {kind}\n"
    return f"---\n{head}---\n"


def build(root: Path, notes: int = 2000, attachments: int = 300, seed: int = 7,
          big_every: int = 25) -> Corpus:
    """Write the corpus under ``root`` (created); ``big_every``: one attachment in that
    many is over 1 MiB."""
    rnd = random.Random(seed)
    words = _words()
    c = Corpus(root)
    root.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < notes:
        n = len(names)
        folder = FOLDERS[n % len(FOLDERS)]
        stem = " ".join(w.capitalize() if rnd.random() < 0.6 else w.lower()
                        for w in rnd.sample(words, rnd.randint(1, 3)))
        if n % 7 == 0:
            stem += " é"
        if n % 11 == 0:
            stem = stem.upper()
        rel = f"{folder}/{stem}.md" if n % 13 else f"{stem}.md"
        if folder == "wiki" and n % 2 == 0:
            rel = f"wiki/{stem}.notes.md"  # a sidecar of the page below
        key = rel.casefold()
        if key in seen or len(rel.encode()) > 200 or name_problem(rel[:-3]) is not None:
            continue
        seen.add(key)
        names.append(rel)
    att_names = []
    for i in range(attachments):
        folder = rnd.choice(["attachments", "Projects/Release Plan/img", "docs/reference",
                             "raw", "Meeting Notes/Scans"])
        ext = ["png", "pdf", "txt"][i % 3] if folder == "raw" else ["png", "pdf"][i % 2]
        att_names.append(f"{folder}/{rnd.choice(words).lower()} {i}.{ext}")
    for i, rel in enumerate(names):
        title = rel.rsplit("/", 1)[-1][:-3]
        body_lines = []
        for _ in range(rnd.randint(3, 25)):
            line = " ".join(rnd.choices(words, k=rnd.randint(5, 14)))
            r = rnd.random()
            if r < 0.15:
                target = names[rnd.randrange(len(names))].rsplit("/", 1)[-1][:-3]
                line += f" see [[{target}]]"
            elif r < 0.2:
                target = names[rnd.randrange(len(names))][:-3]
                line += f" ([[{target}|{rnd.choice(words)}]])"
            elif r < 0.23:
                line += f" [[{title}#{rnd.choice(words)}]]"
            elif r < 0.26 and att_names:
                line += f" ![[{att_names[rnd.randrange(len(att_names))].rsplit('/', 1)[-1]}]]"
            elif r < 0.3:
                line += " [relative](../Inbox/" + rnd.choice(words) + ".md)"
            body_lines.append(line)
        kind = "skill" if i % 23 == 5 else None
        text = _front(rnd, title, words, i % 5, kind) + f"# {title}\n\n" + "\n".join(
            body_lines) + "\n"
        if i % 17 == 3:
            text = text.replace("\n", "\r\n")
        data = text.encode("utf-8")
        if i % 19 == 4:
            data = b"\xef\xbb\xbf" + data
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        c.notes.append(rel)
    for i, rel in enumerate(att_names):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        big = i % big_every == 0
        if rel.endswith(".png"):
            side = 620 if big else rnd.randint(8, 64)
            data = png(side, side, rnd)
        elif rel.endswith(".pdf"):
            data = pdf(" ".join(rnd.sample(words, 8)), (1 << 20) + 4096 if big else 2048, rnd)
        else:
            data = (" ".join(rnd.choices(words, k=400)) + "\n").encode()
        path.write_bytes(data)
        c.attachments.append(rel)
    scratch = {".obsidian/workspace.json": b"{}", ".obsidian/app.json": b"{}",
               ".trash/old note.md": b"gone\n", ".DS_Store": b"\x00\x00\x00\x01Bud1",
               "Inbox/#draft.md#": b"autosave\n", "Inbox/today.md___jb_tmp___": b"x\n",
               "Inbox/Thumbs.db": b"\x00", "private/diary.md": b"mine\n",
               ".quireignore": b"private/\n"}
    for rel, data in scratch.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    c.ignored = sorted(scratch)
    return c


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` that an import of a corpus takes (Markdown and
    attachments): hidden names, editor scratch and ``private/`` (its ``.quireignore``) left
    out. The same of a vault: what its entries' files hold."""
    from replica.vault.markdown import ignored

    out = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not ignored(d)]
        for name in names:
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if not ignored(name) and not rel.startswith("private/"):
                out[rel] = (root / rel).read_bytes()
    return out
