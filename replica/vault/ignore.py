"""What the vault leaves out: ``.quireignore`` at the vault root (gitignore syntax, read with
``pathspec``) and the built-in names of editor scratch and system files (docs/replica.md,
"Ignored files").

    vault walk ──► hidden names and built-in scratch names   skipped by name
                   (#deploy.md#, deploy.md___jb_tmp___, …)   (``markdown.ignored``)
               ──► Changes (changed, missing, problems)
                        │ ``.quireignore`` there?  no ──► as they are (one failed open)
                        ▼ yes
                   ``IgnoreRules.apply``: an ignored path is not changed (never
                   published), not missing (its delete is never published), not a problem

One name is reserved whatever ``.quireignore`` says: ``<name>.conflict-<who>.md``, the other
side of a held conflict written next to ours (replica/conflicts/siblings.py). It is left
out as an ignored file is (``leave_out``), so a copy is never published and removing it is
never a delete, although such a name is a valid entry path.

An ignored file is outside Quire on this machine, as Syncthing's ignores are: its edits and
its delete stay local; a page pulled from the hub is still written (the file is the
space's). A ``.quireignore`` that cannot be read or holds a pattern that is not valid
refuses the sync (``ignore_file_invalid``) before anything is published: publishing under a
half-read ignore file could publish what a person meant to keep out.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replica.vault.markdown import ignored as builtin
from replica.vault.walk import Changes
from shared.errors import IgnoreFileInvalid

if TYPE_CHECKING:  # imported by ``load`` once a vault has an ignore file: most have none,
    import pathspec  # and every sync (a no-op too) loads the rules

IGNORE_FILE = ".quireignore"
MAX_IGNORE_BYTES = 64 * 1024  # a longer ignore file is refused (limits on every input)

@dataclass(frozen=True)
class IgnoreRules:
    """The patterns of one vault's ``.quireignore``, compiled."""

    spec: pathspec.GitIgnoreSpec
    patterns: int

    @classmethod
    def load(cls, vault: Path) -> IgnoreRules | None:
        """The vault's rules, None without an ignore file; ``IgnoreFileInvalid`` (naming the
        file and the line) for one that is too large, not UTF-8 or holds a bad pattern."""
        path = os.path.join(os.fspath(vault), IGNORE_FILE)
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_IGNORE_BYTES + 1)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise _invalid(path, None, "is a folder, not a file") from None
        except OSError as e:
            raise _invalid(path, None, f"cannot be read: {e.strerror or e}") from None
        if len(data) > MAX_IGNORE_BYTES:
            raise _invalid(path, None, f"is larger than {MAX_IGNORE_BYTES} bytes")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise _invalid(path, data[: e.start].count(b"\n") + 1,
                           "is not valid UTF-8") from None
        lines = text.splitlines()
        import pathspec

        try:
            spec = pathspec.GitIgnoreSpec.from_lines(lines)
        except (ValueError, TypeError):
            for number, line in enumerate(lines, 1):  # which line: the error names it
                try:
                    pathspec.GitIgnoreSpec.from_lines([line])
                except (ValueError, TypeError):
                    raise _invalid(path, number, f"pattern {line!r} is not valid gitignore "
                                                 "syntax") from None
            raise
        return cls(spec, len(spec.patterns))

    def ignores(self, rel: str) -> bool:
        """Is the vault path ``rel`` ('/'-separated, relative; a folder ends in '/')
        ignored, by its own name or a folder above it?"""
        return bool(self.spec.match_file(rel))

    def apply(self, changes: Changes) -> Changes:
        """``changes`` without what these rules leave out (see the module docstring)."""
        keep = [fs for fs in changes.changed if not self.ignores(_rel_of(fs))]
        # a missing file may have been Markdown or an attachment (its id is its path)
        missing = {m for m in changes.missing if not self.ignores(f"{m}.md")
                   and not ("." in m.rsplit("/", 1)[-1] and self.ignores(m))}
        problems = [p for p in changes.problems if not self.ignores(p.path)]
        return replace(changes, changed=keep, missing=missing, problems=problems)


def _rel_of(fs: Any) -> str:
    """The vault path of a changed file: ``<id>.md`` for Markdown, ``<id>`` for an
    attachment (replica/vault/walk.py)."""
    return f"{fs.entry_id}.md" if fs.os_path.endswith(".md") else fs.entry_id


CONFLICT_COPY = ".conflict-"  # <name>.conflict-<who>.md: the other side of a held conflict
_CONFLICT_COPY = re.compile(r"[^/]\.conflict-[^/]*\.md$")


def conflict_copy(rel: str) -> bool:
    """Is the vault path ``rel`` a name reserved for the other side of a held conflict
    (``page/deploy.conflict-bob.md``)? Never published, whatever ``.quireignore`` says."""
    return CONFLICT_COPY in rel and _CONFLICT_COPY.search(rel) is not None


def leave_out(rules: IgnoreRules | None, changes: Changes) -> Changes:
    """``changes`` without the reserved conflict copies and what ``rules`` leave out: a
    copy is not changed, not missing, not a problem (as an ignored file)."""
    if any(CONFLICT_COPY in fs.entry_id for fs in changes.changed) or any(
            CONFLICT_COPY in m for m in changes.missing) or any(
            CONFLICT_COPY in p.path for p in changes.problems):
        changes = replace(
            changes,
            changed=[fs for fs in changes.changed if not conflict_copy(f"{fs.entry_id}.md")],
            missing={m for m in changes.missing if not conflict_copy(f"{m}.md")},
            problems=[p for p in changes.problems if not conflict_copy(p.path)])
    return changes if rules is None else rules.apply(changes)


def apply(vault: Path, changes: Changes) -> Changes:
    """``changes`` filtered by the vault's ignore file (as they are without one) and
    without the reserved conflict copies."""
    return leave_out(IgnoreRules.load(vault), changes)


def ignored_files(vault: Path, limit: int = 1000) -> list[str]:
    """The vault's files that a sync leaves out because of the ignore file or a built-in
    scratch name (not hidden ones, which are never shown): relative paths, sorted, at most
    ``limit`` (``quire status --ignored``)."""
    rules = IgnoreRules.load(vault)
    out: list[str] = []
    base = os.fspath(vault)
    for folder, dirs, files in os.walk(base):
        rel_folder = os.path.relpath(folder, base).replace(os.sep, "/")
        prefix = "" if rel_folder == "." else rel_folder + "/"
        for name in sorted(dirs):
            if name.startswith("."):
                dirs.remove(name)
            elif builtin(name) or (rules is not None and rules.ignores(prefix + name + "/")):
                dirs.remove(name)
                out.append(prefix + name + "/")
        for name in files:
            if name.startswith("."):
                continue
            if builtin(name) or conflict_copy(prefix + name) or (
                    rules is not None and rules.ignores(prefix + name)):
                out.append(prefix + name)
        if len(out) >= limit:
            break
    return sorted(out)[:limit]


def _invalid(path: str, line: int | None, reason: str) -> IgnoreFileInvalid:
    where = f"{path}:{line}" if line else path
    return IgnoreFileInvalid(f"{where}: {reason}; nothing was published (fix or remove it)",
                             {"file": path, "line": line, "reason": reason})
