"""Benchmark corpus: one Markdown page per documented public module, class, function and
method of the running Python's standard library, with the real docstring text.

The base corpus is extracted once per Python version in a child process (importing the
whole standard library has side effects we keep out of the benchmark process: printed
output, warnings, imported modules), then cached under ``bench/.cache/``. ``corpus(n)``
scales it to ``n`` entries: fewer than the base takes an even spread, more adds numbered
copies with small edits, so every run at a given ``n`` on a given Python sees the same data.

Entries are plain dicts in wire form (``{"id", "title", "body", "tags", "links", "meta"}``),
valid under ``shared.entry.make_entry``. ``write_vault`` writes them as vault files (what the
git peer commits), ``pouch_docs`` turns them into CouchDB documents (what the PouchDB peer
stores).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
FORMAT = 2  # bump when the extraction changes, so stale caches are not reused

# Modules that do something when imported (open a browser, print, start a GUI), that are
# tests or IDE internals, or that would dominate the corpus with generated near-duplicates.
SKIP_TOP = frozenset({
    "antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3",
    "ensurepip", "pydoc_data", "__hello__", "__phello__", "site", "sitecustomize",
    "usercustomize", "xxsubtype", "xxlimited", "xxlimited_35",
})
SKIP_PREFIXES = ("encodings.",)
MAX_BODY_CHARS = 64 * 1024
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SLUG_BAD = re.compile(r"[^a-z0-9_.-]+")


# ---------------------------------------------------------------- extraction (child process)


def _public(name: str) -> bool:
    return not name.startswith("_")


def _module_names() -> list[str]:
    import pkgutil

    names: set[str] = set()
    for top in sorted(sys.stdlib_module_names):
        if not _public(top) or top in SKIP_TOP or top.startswith("xx"):
            continue
        names.add(top)
        try:
            mod = __import__(top)
        except BaseException:  # noqa: BLE001 - any failure means "not on this platform"
            continue
        path = getattr(mod, "__path__", None)
        if not path:
            continue
        for info in pkgutil.walk_packages(path, prefix=top + ".", onerror=lambda _n: None):
            parts = info.name.split(".")
            if any(not _public(p) or p in ("test", "tests") for p in parts):
                continue
            if info.name.startswith(SKIP_PREFIXES):
                continue
            names.add(info.name)
    return sorted(names)


def _scrub(text: str) -> str:
    text = _ADDRESS.sub("", text)
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if prefix:
            text = text.replace(prefix, "<prefix>")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _signature(obj: Any) -> str | None:
    import inspect

    try:
        return _scrub(str(inspect.signature(obj)))
    except (TypeError, ValueError):
        return None


def _record(kind: str, module: str, qualname: str, obj: Any, doc: str) -> dict[str, Any]:
    sig = _signature(obj) if kind in ("class", "function", "method") else None
    return {"kind": kind, "module": module, "qualname": qualname, "signature": sig,
            "doc": _scrub(doc)[:MAX_BODY_CHARS]}


def _own_doc(obj: Any) -> str | None:
    import inspect

    raw = getattr(obj, "__doc__", None)
    if not isinstance(raw, str) or not raw.strip():
        return None
    return inspect.cleandoc(raw)


def extract() -> list[dict[str, Any]]:
    """Every documented public module, class, function and method, in a stable order."""
    import importlib
    import inspect
    import warnings

    warnings.simplefilter("ignore")
    records: list[dict[str, Any]] = []
    for modname in _module_names():
        try:
            mod = importlib.import_module(modname)
        except BaseException:  # noqa: BLE001 - platform-specific or broken: skip it
            continue
        doc = _own_doc(mod)
        if doc:
            records.append(_record("module", modname, "", mod, doc))
        public = getattr(mod, "__all__", None)
        for name, obj in sorted(vars(mod).items()):
            if not _public(name) or (public is not None and name not in public):
                continue
            if getattr(obj, "__module__", None) != modname:
                continue  # re-exported from elsewhere: documented where it is defined
            if inspect.isclass(obj):
                doc = _own_doc(obj)
                if doc:
                    records.append(_record("class", modname, name, obj, doc))
                for mname, member in sorted(vars(obj).items()):
                    if not _public(mname):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if not callable(member) or inspect.isclass(member):
                        continue
                    mdoc = _own_doc(member)
                    if mdoc:
                        records.append(_record("method", modname, f"{name}.{mname}", member,
                                               mdoc))
            elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
                doc = _own_doc(obj)
                if doc:
                    records.append(_record("function", modname, name, obj, doc))
    return records


# ---------------------------------------------------------------- base corpus (cached)


def python_tag() -> str:
    v = sys.version_info
    return f"{v.major}.{v.minor}.{v.micro}"


def _cache_path() -> Path:
    return CACHE_DIR / f"stdlib-{python_tag()}-f{FORMAT}.json"


def _slug_part(text: str) -> str:
    part = _SLUG_BAD.sub("-", text.lower()).strip("-.") or "x"
    if part.endswith((".md", ".tmp")):
        part += "-"
    return part


def _to_entry(rec: dict[str, Any], taken: set[str]) -> dict[str, Any]:
    module, qualname, kind = rec["module"], rec["qualname"], rec["kind"]
    parts = ["stdlib", *(_slug_part(p) for p in module.split("."))]
    if qualname:
        parts += [_slug_part(p) for p in qualname.split(".")]
    base = "/".join(parts)
    slug, n = base, 1
    while slug in taken:  # e.g. a class and a function differing only in case
        n += 1
        slug = f"{base}-{n}"
    taken.add(slug)
    dotted = f"{module}.{qualname}" if qualname else module
    lines = [f"# {dotted}", ""]
    if rec["signature"] is not None:
        name = qualname.rsplit(".", 1)[-1]
        lines += ["```python", f"{name}{rec['signature']}", "```", ""]
    lines += [rec["doc"], ""]
    top = module.split(".")[0]
    # the parent page: the class of a method, the module of a class or function, the
    # package of a submodule (links to pages that were not documented are dropped later)
    mod_parts = ["stdlib", *(_slug_part(p) for p in module.split("."))]
    if qualname and "." in qualname:
        links = ["page/" + "/".join([*mod_parts, _slug_part(qualname.split(".")[0])])]
    elif qualname:
        links = ["page/" + "/".join(mod_parts)]
    elif "." in module:
        links = ["page/" + "/".join(mod_parts[:-1])]
    else:
        links = []
    return {
        "id": f"page/{slug}",
        "title": f"{dotted} ({kind})",
        "body": "\n".join(lines),
        "tags": sorted({"stdlib", kind, _slug_part(top)}),
        "links": links,
        "meta": {"python": ".".join(python_tag().split(".")[:2]), "kind": kind,
                 "module": module, "qualname": qualname},
    }


def base_corpus(*, refresh: bool = False) -> list[dict[str, Any]]:
    """The unscaled corpus for the running Python, extracted once and cached."""
    path = _cache_path()
    if path.exists() and not refresh:
        return json.loads(path.read_text("utf-8"))
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8", LC_ALL="C.UTF-8",
               TZ="UTC", PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="ignore")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    raw_path = CACHE_DIR / f"raw-{os.getpid()}.json"
    root = Path(__file__).resolve().parent.parent
    try:
        subprocess.run(
            [sys.executable, "-m", "bench.corpus", "--extract", str(raw_path)],
            cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, timeout=600, check=True,
        )
        records = json.loads(raw_path.read_text("utf-8"))
    finally:
        raw_path.unlink(missing_ok=True)
    taken: set[str] = set()
    entries = [_to_entry(r, taken) for r in records]
    ids = {e["id"] for e in entries}
    for e in entries:  # drop links to pages that were not documented
        e["links"] = [link for link in e["links"] if link in ids]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, ensure_ascii=False), "utf-8")
    tmp.replace(path)
    return entries


# ---------------------------------------------------------------- scaling and edits


def _copy(entry: dict[str, Any], k: int) -> dict[str, Any]:
    """Copy ``k`` of an entry: its own id, a numbered title and a small body edit."""
    slug = entry["id"].split("/", 1)[1]
    body = entry["body"]
    head, sep, rest = body.partition("\n\n")
    note = f"Copy {k} of `{entry['title']}`, kept for the benchmark corpus."
    return {
        "id": f"page/copy{k}/{slug}",
        "title": f"{entry['title']} #{k}",
        "body": f"{head}{sep}{note}\n\n{rest}" if sep else f"{body}\n\n{note}\n",
        "tags": sorted({*entry["tags"], f"copy{k % 10}"}),
        "links": [f"page/copy{k}/{link.split('/', 1)[1]}" for link in entry["links"]],
        "meta": dict(entry["meta"], copy=k),
    }


def corpus(n: int, *, base: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """``n`` entries, deterministic for ``n`` and the Python version."""
    base = base_corpus() if base is None else base
    size = len(base)
    if n <= size:
        picked = [base[i * size // n] for i in range(n)]
        ids = {e["id"] for e in picked}
        return [dict(e, links=[x for x in e["links"] if x in ids]) for e in picked]
    out = list(base)
    k = 1
    while len(out) < n:
        for e in base[: n - len(out)]:
            out.append(_copy(e, k))
        k += 1
    return out


def edited(entries: list[dict[str, Any]], count: int, round_: int = 1) -> list[dict[str, Any]]:
    """``count`` entries spread over the corpus with one appended line each (round ``round_``)."""
    size = len(entries)
    picks = sorted({(i * size) // count for i in range(count)}) if count else []
    return [dict(entries[i], body=entries[i]["body"] + f"\nEdited in round {round_}.\n")
            for i in picks]


def digest(entries: Iterable[dict[str, Any]]) -> str:
    """A short fingerprint of a corpus, recorded with the results."""
    h = hashlib.sha256()
    for e in entries:
        h.update(json.dumps(e, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- encodings for the peers


def vault_path(root: Path, entry_id: str) -> Path:
    kind, slug = entry_id.split("/", 1)
    return root / kind / (slug + ".md")


def write_vault(entries: Iterable[dict[str, Any]], root: Path) -> int:
    """Write entries in vault form (``<root>/<kind>/<slug>.md``); returns the count."""
    from shared.entry import make_entry, to_markdown

    count = 0
    made: set[Path] = set()
    for e in entries:
        path = vault_path(root, e["id"])
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_text(to_markdown(make_entry(e)), "utf-8")
        count += 1
    return count


def pouch_docs(entries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """CouchDB documents carrying the same fields (``_id`` is the entry id)."""
    for e in entries:
        yield {"_id": e["id"], "title": e["title"], "body": e["body"], "tags": e["tags"],
               "links": e["links"], "meta": e["meta"]}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.corpus")
    p.add_argument("--extract", metavar="OUT", help="(internal) write raw records to OUT")
    p.add_argument("-n", type=int, default=0, help="print stats for a corpus of N entries")
    p.add_argument("--refresh", action="store_true", help="rebuild the cached base corpus")
    p.add_argument("--vault", metavar="DIR", help="write the corpus as vault files into DIR")
    args = p.parse_args(argv)
    if args.extract:
        records = extract()
        Path(args.extract).write_text(json.dumps(records, ensure_ascii=False), "utf-8")
        return 0
    base = base_corpus(refresh=args.refresh)
    entries = corpus(args.n or len(base), base=base)
    size = sum(len(e["body"].encode("utf-8")) for e in entries)
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e["meta"]["kind"]] = kinds.get(e["meta"]["kind"], 0) + 1
    print(json.dumps({"python": python_tag(), "base": len(base), "entries": len(entries),
                      "body_bytes": size, "kinds": kinds, "digest": digest(entries)}))
    if args.vault:
        write_vault(entries, Path(args.vault))
    return 0


if __name__ == "__main__":
    sys.exit(main())
