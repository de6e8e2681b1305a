"""The vault's file format, pure (no file is opened here): where an entry's file is
(``entry_path``), which names are entries and which are left alone (``path_entry_id``,
``ignored``), a file's bytes read as an entry and an entry rendered as a file
(``read_entry``, ``render``, byte-identical to ``shared.entry.to_markdown``), the file hash,
and the ``Problem`` a file that cannot be an entry is reported as.

The walks, writes and flushes of the vault are in replica/vault/files.py.
"""

from __future__ import annotations

import hashlib
import os.path
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shared.attachments import attachment_dict, declares_attachment, is_attachment
from shared.entry import Entry, EntryError, make_entry, parse_markdown, to_markdown, without_local
from shared.ids import entry_id_problem
from shared.names import suggestion

TMP_SUFFIX = ".quire-tmp"  # our temp files (replica/vault/files.py), never entries


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the vault, with '/'
    line: int | None
    reason: str
    entry_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        # a file name in another encoding (bytes that are not UTF-8, kept as surrogates by
        # the walk) is shown with its bad bytes escaped: printed or sent as JSON as it is,
        # it would stop the command that reports it
        return {"path": _shown(self.path), "line": self.line, "reason": _shown(self.reason),
                "entry": self.entry_id}


def _shown(text: str) -> str:
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry_path(vault: Path, entry_id: str) -> Path:
    """The file of an entry: its id is its vault path without ``.md`` (D132)."""
    problem = entry_id_problem(entry_id)
    if problem:
        raise ValueError(f"invalid entry id {entry_id!r}: {problem}")
    *folders, name = entry_id.split("/")
    return vault.joinpath(*folders, name + ".md")


def entry_os_path(vault: str, entry_id: str) -> str:
    """``entry_path`` as a string, for an id already validated (``make_entry`` checks it):
    the bulk paths build one a file, and ``Path`` objects cost more than the rest."""
    return os.path.join(vault, entry_id) + ".md"


def attachment_path(vault: Path, entry_id: str) -> Path:
    """The file of an attachment: its id is its vault path, extension and all (D147)."""
    problem = entry_id_problem(entry_id)
    if problem:
        raise ValueError(f"invalid entry id {entry_id!r}: {problem}")
    return vault.joinpath(*entry_id.split("/"))


def file_of(vault: Path, entry: Entry) -> Path:
    """The vault file of a live entry: ``<id>`` for an attachment, ``<id>.md`` else."""
    return attachment_path(vault, entry.id) if is_attachment(entry) \
        else entry_path(vault, entry.id)


def recorded_path(vault: Path, entry_id: str) -> Path:
    """The file an entry has in the vault now: its Markdown file, else an attachment of
    that name, else (neither there) where its Markdown file would be."""
    path = entry_path(vault, entry_id)
    if not os.path.lexists(path):
        other = attachment_path(vault, entry_id)
        if os.path.lexists(other):
            return other
    return path


def is_markdown(path: str) -> bool:
    return path.endswith(".md")


def shown_hash(entry: Entry, local: dict[str, Any] | None = None) -> str:
    """The hash of the file that shows ``entry``: its bytes' SHA-256 for an attachment
    (the blob's name), the rendered Markdown's else."""
    if is_attachment(entry):
        return str(entry.meta["sha256"])
    return file_hash(render(entry, local))


def read_file(vault: Path, entry_id: str, path: str, data: bytes
              ) -> tuple[Entry, dict[str, Any]]:
    """A vault file's bytes as its entry: Markdown parsed (``read_entry``), anything else an
    attachment (shared/attachments.py)."""
    if is_markdown(path):
        return read_entry(vault, entry_id, data)
    return make_entry(attachment_dict(entry_id, data)), {}


def attachment_entry_id(rel: str) -> tuple[str | None, str | None]:
    """(entry id, None) for a vault path that is not Markdown: an attachment, its id the
    path itself; or (None, reason) when that is no entry id."""
    problem = entry_id_problem(rel)
    if problem:
        return None, f"invalid attachment name {rel!r}: {problem}"
    return rel, None


def path_entry_id(rel: str) -> tuple[str | None, str | None]:
    """(entry id, None) for a relative vault path, or (None, reason): any Markdown file is
    an entry, its id the path without ``.md`` (shared/names.py says why a name is refused,
    with a name that would do)."""
    if not rel.endswith(".md"):
        return None, "not a Markdown file (entries end in .md)"
    entry_id = rel[: -len(".md")]
    problem = entry_id_problem(entry_id)
    if problem:
        return None, f"invalid entry id {entry_id!r}: {problem}{suggestion(entry_id)}"
    return entry_id, None


# editor scratch and system files, skipped by name: Emacs lock and autosave files, JetBrains
# safe-write files, Kate swap files, Office lock files, Windows thumbnails and folder
# settings (Obsidian's .obsidian/ and .trash/, .DS_Store and vim's swap files are hidden)
_SCRATCH_SUFFIXES = ("~", TMP_SUFFIX, "___jb_tmp___", "___jb_old___", ".kate-swp")
_SCRATCH_NAMES = frozenset({"Thumbs.db", "ehthumbs.db", "desktop.ini", "Desktop.ini"})


def ignored(name: str) -> bool:
    """Is a file or folder of this name skipped by every walk, whatever the vault's
    ``.quireignore`` says (replica/vault/ignore.py): hidden names (editor swap files,
    .DS_Store, .git, .obsidian), our own temporary files, editor scratch and system files."""
    return (name.startswith(".") or name.endswith(_SCRATCH_SUFFIXES)
            or (len(name) > 1 and name[0] == "#" and name[-1] == "#")
            or name.startswith("~$") or name in _SCRATCH_NAMES)


def read_entry(vault: Path, entry_id: str, data: bytes) -> tuple[Entry, dict[str, Any]]:
    """Parse file bytes as ``entry_id``; raises ``EntryError`` with a line number. The
    entry carries the file's text as ``raw`` unless the file is in canonical vault form
    (what ``render`` writes for an entry without raw): such files keep today's versions."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise EntryError("file is not valid UTF-8 (a Markdown file is text in UTF-8: save it "
                         "as UTF-8, or rename it without .md to keep it out of the space)",
                         line=line) from e
    return entry_of_text(entry_id, text, data)


def entry_of_text(entry_id: str, text: str, data: bytes | None = None
                  ) -> tuple[Entry, dict[str, Any]]:
    """``read_entry`` of a file's decoded text (``data``: its bytes, when at hand)."""
    entry, local = parse_markdown(entry_id, text)
    if declares_attachment(entry.meta):
        raise EntryError("kind: attachment is for files that are not Markdown (an image, a "
                         "PDF): remove the kind line", line=2, key="kind")
    if not (text.startswith(_CANONICAL_START)
            and render(entry, local or None) == (data or text.encode("utf-8"))):
        # not the canonical vault form of its fields: the entry carries the text, which
        # every vault then writes byte for byte (D150); its markers stay local
        entry = replace(entry, raw=without_local(text) if local else text)
    return entry, local


_CANONICAL_START = "---\ntitle: "  # every canonical vault form starts so (to_markdown)


def render(entry: Entry, local: dict[str, Any] | None = None) -> bytes:
    """Vault form, byte-identical to ``shared.entry.to_markdown``: an entry's ``raw`` as it
    is (its markers added to its front matter), else the canonical form of its fields.

    PyYAML's pure-Python dumper costs about 1 ms an entry, most of a clone. The common shape
    (one-line strings without control or break characters, a flat ``meta`` of strings,
    integers, booleans and nulls) is assembled here with each scalar rendered once by the
    libyaml emitter (cached); anything else goes through ``to_markdown``. Tested equal on the
    bench corpus and on the edge cases of tests/replica/vault/test_vault.py."""
    text = _fast_markdown(entry) if local is None and entry.raw is None \
        and not entry.deleted else None
    if text is None:
        text = to_markdown(entry, local)
    return text.encode("utf-8")


# the fast path takes only characters both emitters print as they are (libyaml escapes
# anything outside the BMP, PyYAML does not; they differ on NEL): anything else is slow
_ODD = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]")
_CACHE_MAX = 50_000
_values: dict[str, str | None] = {}
_keys: dict[str, str | None] = {}
_CDumper: Any = None


def _cdump(value: Any) -> str:
    global _CDumper
    if _CDumper is None:
        import yaml

        base = getattr(yaml, "CSafeDumper", None)
        if base is None:
            raise LookupError("no libyaml")

        class _D(base):  # type: ignore[misc, valid-type]
            pass

        _D.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s))
        _CDumper = _D
    return str(yaml_dump(value, _CDumper))


def yaml_dump(value: Any, dumper: Any) -> str:
    import yaml

    return str(yaml.dump(value, Dumper=dumper, sort_keys=True, allow_unicode=True,
                         default_flow_style=False, width=1 << 30))


def _scalar(v: Any) -> str | None:
    """How a one-line scalar prints as a block mapping value or sequence item."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is int:
        return str(v)
    if type(v) is not str:
        return None
    out = _values.get(v, "")  # tags, links and meta values recur from entry to entry
    if out != "":
        return out
    if "\n" in v or _ODD.search(v):
        return None
    if _PLAIN.match(v) and _plain_is_str(v):
        return v  # letters, digits, ._()/,- and single spaces, from a letter: printed as is
    if v[:1] == "#" or " #" in v:
        # a comment indicator: never plain; one line of printable characters (checked
        # above) is always allowed single-quoted, which libyaml prints with '' for '
        return "'" + v.replace("'", "''") + "'"
    text = _cdump({"k": v})
    out = text[3:-1] if text.startswith("k: ") and text.count("\n") == 1 else None
    _remember(v, out)
    return out


def _remember(v: str, out: str | None) -> None:
    if len(_values) > _CACHE_MAX:
        _values.clear()
    _values[v] = out


def _item(v: Any) -> str | None:
    """``_scalar`` for the items of tags, links and meta, remembered (they recur)."""
    out = _values.get(v, "") if type(v) is str else ""
    if out == "":
        out = _scalar(v)
        if type(v) is str:
            _remember(v, out)
    return out


_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_.()/,-]*(?: [A-Za-z0-9_.()/,-]+)*\Z")
_resolver: Any = None
_BOOL_NULL_START = frozenset("yYnNtTfFoO")


def _plain_is_str(v: str) -> bool:
    """Does ``v`` read back as a string when printed plain (not a bool, null, number…)?"""
    if len(v) > 5 or v[:1] not in _BOOL_NULL_START:
        # (only called on strings that start with a letter: the implicit resolvers a letter
        # can start are bool and null, whose words have at most five letters)
        return True
    global _resolver
    if _resolver is None:
        import yaml

        _resolver = yaml.resolver.Resolver()
        _resolver.node_kind = yaml.ScalarNode
    return bool(_resolver.resolve(_resolver.node_kind, v, (True, False))
                == "tag:yaml.org,2002:str")


def _key(k: Any) -> str | None:
    if type(k) is not str or "\n" in k or _ODD.search(k):
        return None
    out = _keys.get(k, "")
    if out == "":
        text = _cdump({k: 0})
        out = text[:-4] if text.endswith(": 0\n") and text.count("\n") == 1 else None
        if len(_keys) > _CACHE_MAX:
            _keys.clear()
        _keys[k] = out
    return out


def _fast_markdown(entry: Entry) -> str | None:
    try:
        title = _scalar(entry.title)
        if title is None:
            return None
        parts = ["---\ntitle: ", title, "\n"]
        for name, items in (("links", entry.links), ("meta", None), ("tags", entry.tags)):
            if name == "meta":
                if not entry.meta:
                    continue
                parts.append("meta:\n")
                for k in sorted(entry.meta):
                    ks, vs = _key(k), _item(entry.meta[k])
                    if ks is None or vs is None:
                        return None
                    parts += ("  ", ks, ": ", vs, "\n")
                continue
            if not items:
                continue
            parts.append(name + ":\n")
            for x in items:
                xs = _item(x)
                if xs is None:
                    return None
                parts += ("- ", xs, "\n")
    except LookupError:
        return None
    parts += ("---\n", entry.body)
    return "".join(parts)
