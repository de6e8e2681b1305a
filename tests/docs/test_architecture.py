"""The design lives in the repository: docs/architecture.md maps every module of ``hub/``,
``replica/`` and ``shared/`` and names only modules that exist; references to a section of
a document name one of its headings (decisions by id and title); no reference to the old
design document's sections or to issue numbers comes back; decisions carry ids in order
and a status."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "architecture.md"
PACKAGES = ("hub", "replica", "shared")

# Alembic's revision files: one schema step each, named by its number and generated from a
# template; the map lists their folder, not each file (a line per migration would say
# nothing the file name does not, and every new migration would need one)
NOT_LISTED_ONE_BY_ONE = "hub/store/migrations/versions/"

MODULE = re.compile(r"\b(?:hub|replica|shared)/[\w/]*\w\.py\b")
ROW = re.compile(r"^\|\s*`(?P<path>[^`]+)`\s*\|\s*(?P<what>.*?)\s*\|\s*$")


def _modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for pkg in PACKAGES
                  for p in (ROOT / pkg).rglob("*.py")
                  if not p.relative_to(ROOT).as_posix().startswith(NOT_LISTED_ONE_BY_ONE))


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _map_rows() -> dict[str, str]:
    """The module map's table rows: path → what it is."""
    rows: dict[str, str] = {}
    for line in _section(ARCHITECTURE.read_text(), "Module map").splitlines():
        m = ROW.match(line)
        if m is not None:
            assert m["path"] not in rows, f"{m['path']} is in the module map twice"
            rows[m["path"]] = m["what"]
    return rows


def test_every_module_is_in_the_module_map() -> None:
    rows = _map_rows()
    missing = [m for m in _modules() if m not in rows]
    assert not missing, f"add these modules to docs/architecture.md, Module map: {missing}"
    assert NOT_LISTED_ONE_BY_ONE in rows, f"list {NOT_LISTED_ONE_BY_ONE} in the module map"


def test_every_row_of_the_module_map_says_what_it_is() -> None:
    empty = [path for path, what in _map_rows().items() if len(what) < 10]
    assert not empty, f"say in a line what these are (docs/architecture.md): {empty}"


def test_every_module_the_architecture_names_exists() -> None:
    text = ARCHITECTURE.read_text()
    named = set(MODULE.findall(text)) | {p for p in _map_rows() if p.endswith("/")}
    gone = sorted(p for p in named if not (ROOT / p).exists())
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"


# --- references -----------------------------------------------------------------------------

SOURCES = ("hub", "replica", "shared", "bench", "docs", "tests")
# e.g. docs/replica.md, "Sync" or docs/decisions.md, D26 "Rebase on publish" (a heading's start)
SECTION_REF = re.compile(r'\b(?:docs/|bench/)?(?P<doc>\w+)\.md,? (?:D(?P<id>\d+) )?"(?P<title>[^"]+)"')
HEADING = re.compile(r"^#+\s+(?:D(?P<id>\d+)\.\s+)?(?P<title>.+?)\s*$")


def _texts() -> list[tuple[str, str]]:
    """Each source file with its line breaks (and a comment's ``#``) folded into spaces, so
    a reference wrapped over two lines reads as one."""
    files = [p for d in SOURCES for p in (ROOT / d).rglob("*")
             if p.suffix in (".py", ".md") and ".cache" not in p.parts
             and "__pycache__" not in p.parts]
    files += [ROOT / n for n in ("README.md", "CONTRIBUTING.md") if (ROOT / n).exists()]
    return [(p.relative_to(ROOT).as_posix(), re.sub(r"\n\s*(?:#\s*)?", " ", p.read_text()))
            for p in files]


def _headings(doc: str) -> list[tuple[str | None, str]] | None:
    for folder in (DOCS, ROOT / "bench", ROOT):
        path = folder / f"{doc}.md"
        if path.exists():
            return [(m["id"], m["title"]) for line in path.read_text().splitlines()
                    if (m := HEADING.match(line))]
    return None  # not one of ours (a file name in a quotation)


def _plain(s: str) -> str:
    return re.sub(r"[`*]", "", s).lower()


def test_references_to_a_section_name_one_of_its_headings() -> None:
    bad = []
    for name, text in _texts():
        for m in SECTION_REF.finditer(text):
            headings = _headings(m["doc"])
            if headings is None:
                continue
            ok = any(_plain(title).startswith(_plain(m["title"]))
                     and (m["id"] is None or m["id"] == hid) for hid, title in headings)
            if not ok:
                bad.append(f"{name}: {m.group(0)}")
    assert not bad, f"these references name no heading of their document: {bad}"


def test_no_reference_to_design_sections_or_issue_numbers() -> None:
    """What the issue tracker and the old design document said is written down here now;
    cite the document that holds it (docs/architecture.md, "A sync"), not a number."""
    pattern = re.compile(r"DESIGN §|\bissue [0-9]")
    found = []
    for pkg in ("hub", "replica", "shared", "docs"):
        for p in (ROOT / pkg).rglob("*"):
            if p.suffix in (".py", ".md", ".html") and "__pycache__" not in p.parts:
                for n, line in enumerate(p.read_text().splitlines(), 1):
                    if pattern.search(line):
                        found.append(f"{p.relative_to(ROOT)}:{n}")
    for n, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1):
        if pattern.search(line):
            found.append(f"README.md:{n}")
    assert not found, f"cite a document in the repository instead: {found}"


# --- decisions ------------------------------------------------------------------------------

STATUS = re.compile(r"^\*\*Status:\*\* (?:accepted|superseded by D(?P<by>\d+)|proposed)\b")


def test_decisions_have_ids_in_order_and_a_status() -> None:
    lines = (DOCS / "decisions.md").read_text().splitlines()
    ids, problems = [], []
    for i, line in enumerate(lines):
        if not line.startswith("### "):
            continue
        m = re.match(r"^### D(\d+)\. \S", line)
        if m is None:
            problems.append(f"line {i + 1}: a decision heading is '### Dn. Title': {line}")
            continue
        ids.append(int(m[1]))
        status = next((s for s in lines[i + 1:i + 4] if s.strip()), "")
        sm = STATUS.match(status)
        if sm is None:
            problems.append(f"D{m[1]}: the line after its heading is its status "
                            f"(**Status:** accepted / superseded by Dn / proposed): {status!r}")
        elif sm["by"] is not None:
            by = int(sm["by"])
            if by == int(m[1]) or not re.search(rf"^### D{by}\. ", "\n".join(lines), re.M):
                problems.append(f"D{m[1]} is superseded by D{by}, which is no other decision")
    assert ids == list(range(1, len(ids) + 1)), f"decision ids must run D1, D2, …: {ids}"
    assert not problems, problems
