"""Clone and sync of a vault with attachments, Quire beside ``git``, on the same files.

The corpus is tests/kit/corpus.py's team folder, generated from text on this machine:
Markdown notes with every style of name and front matter, PNG images and PDFs (one in
25 over 1 MiB), plus the editor scratch its ``.quireignore`` and built-in defaults leave out.
Both systems get exactly the files an import takes (``corpus.files``)::

    author vault ── quire sync ──▶ hub ── quire join --vault + quire sync ──▶ clone  (timed)
    author tree  ── git push  ──▶ git daemon ── git clone ──────────────────▶ clone  (timed)

then the same change on both sides (notes edited, attachments added, one replaced; ``change``)
and one ``quire sync`` / ``git pull`` of the clone (timed). A Quire clone or sync whose vault
is not byte for byte the author's files fails its row instead of giving a time.
"""

from __future__ import annotations

import random
from pathlib import Path

from bench.proc import Unavailable

CHANGED_NOTES = 10


def build(root: Path, notes: int, attachments: int) -> dict[str, bytes]:
    """Write the corpus under ``root``; the files a vault of it holds (path -> bytes)."""
    from tests.kit import corpus

    corpus.build(root, notes=notes, attachments=attachments)
    return corpus.files(root)


def change(files: dict[str, bytes]) -> dict[str, bytes]:
    """What one member changes: ``CHANGED_NOTES`` notes get a line, two attachments are
    added (a PDF over 1 MiB and an image) and one is replaced. Path -> new bytes."""
    from tests.kit import corpus

    rnd = random.Random(11)
    notes = sorted(p for p in files if p.endswith(".md"))
    step = max(1, len(notes) // CHANGED_NOTES)
    out = {p: files[p] + b"\nEdited by the bench.\n" for p in notes[::step][:CHANGED_NOTES]}
    out["attachments/bench added.pdf"] = corpus.pdf("added by the bench", (1 << 20) + 4096, rnd)
    out["attachments/bench added.png"] = corpus.png(48, 48, rnd)
    replaced = next(p for p in sorted(files) if p.endswith(".png"))
    out[replaced] = corpus.png(40, 40, rnd)
    return out


def write(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def check_same(vault: Path, want: dict[str, bytes]) -> None:
    """Raise ``Unavailable`` unless the vault holds exactly ``want``, byte for byte."""
    from tests.kit import corpus

    got = corpus.files(vault)
    if got != want:
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        differ = sorted(p for p in set(want) & set(got) if want[p] != got[p])
        raise Unavailable(f"vault differs from the author's files: {len(missing)} missing "
                          f"{missing[:2]}, {len(extra)} extra {extra[:2]}, {len(differ)} "
                          f"different {differ[:2]}")
