"""The error tree drawn in shared/errors.py's docstring is the class hierarchy: every class
is drawn, under its own base, with its code, HTTP status and whether it is retryable, and
nothing is drawn that is not a class. A class added without being drawn, or drawn under the
wrong parent, fails here (the self-tests below plant both)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared import errors
from shared.errors import ERROR_CLASSES, QuireError

# a node of the drawing: the tree's prefix ("│   " or "    " a level), the connector, then
# the columns name, code, HTTP status ("-": client side only) and retry ("yes"/"no")
NODE = re.compile(r"^    (?P<prefix>(?:│   |    )*)(?:├── |└── )(?P<name>[A-Z]\w*)\s+"
                  r"(?P<code>[a-z_]+)\s+(?P<status>\d{3}|-)\s+(?P<retry>yes|no)(?:\s|$)")
ROOT = re.compile(r"^    (?P<name>QuireError)\s")


@dataclass(frozen=True)
class Drawn:
    name: str
    parent: str | None
    code: str
    status: str
    retry: str
    line: int


def drawn_tree(doc: str) -> tuple[list[Drawn], list[str]]:
    """The nodes of the drawing (the block that starts at the ``QuireError`` line and ends at
    the first blank line) and the lines that look like nodes but cannot be read."""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if ROOT.match(line))
    nodes = [Drawn("QuireError", None, "", "", "", start + 1)]
    stack = ["QuireError"]  # stack[d]: the last node drawn at depth d
    bad = []
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if not line.strip():
            break
        m = NODE.match(line)
        if m is None:
            if "├──" in line or "└──" in line:
                bad.append(f"line {i + 1} of the docstring cannot be read: {line.strip()!r}")
            continue  # a note wrapped onto its own line
        depth = len(m["prefix"]) // 4 + 1
        if depth > len(stack):
            bad.append(f"line {i + 1}: {m['name']} is drawn deeper than any parent")
            continue
        del stack[depth:]
        nodes.append(Drawn(m["name"], stack[depth - 1], m["code"], m["status"], m["retry"],
                           i + 1))
        stack.append(m["name"])
    return nodes, bad


def classes_of(module: object) -> dict[str, type[QuireError]]:
    """Every ``QuireError`` class defined in the module (imported ones are not its own)."""
    return {name: obj for name, obj in vars(module).items()
            if isinstance(obj, type) and issubclass(obj, QuireError)
            and obj.__module__ == getattr(module, "__name__", None)}


def problems(doc: str, classes: dict[str, type[QuireError]]) -> list[str]:
    nodes, out = drawn_tree(doc)
    by_name: dict[str, Drawn] = {}
    for n in nodes:
        if n.name in by_name:
            out.append(f"{n.name} is drawn twice (docstring lines {by_name[n.name].line}, "
                       f"{n.line})")
        by_name[n.name] = n
    for name in classes:
        if name not in by_name:
            out.append(f"{name} is a class but is not drawn in the tree")
    for n in nodes:
        cls = classes.get(n.name)
        if cls is None:
            out.append(f"{n.name} is drawn (docstring line {n.line}) but is no class")
            continue
        if n.parent is None:
            continue  # the root: its base is Exception
        base = cls.__bases__[0].__name__
        if base != n.parent:
            out.append(f"{n.name} is drawn under {n.parent} but its base is {base}")
        if n.code != cls.code:
            out.append(f"{n.name} is drawn with code {n.code}, its code is {cls.code}")
        status = str(cls.status) if cls.status else "-"
        if n.status != status:
            out.append(f"{n.name} is drawn with HTTP {n.status}, its status is {status}")
        retry = "yes" if cls.retryable else "no"
        if n.retry != retry:
            out.append(f"{n.name} is drawn with retry {n.retry}, its retryable is {retry}")
    return out


DOC = errors.__doc__ or ""


def test_the_drawn_error_tree_is_the_class_hierarchy() -> None:
    assert problems(DOC, classes_of(errors)) == []


def test_every_error_class_can_be_rebuilt_from_the_wire() -> None:
    """The replica maps a response back to the same class: each class has its code in
    ``ERROR_CLASSES`` (the root's code is ``Internal``'s)."""
    missing = [name for name, cls in classes_of(errors).items()
               if cls is not QuireError and ERROR_CLASSES.get(cls.code) is not cls]
    assert missing == []


# --- self-tests: the check finds what it is for --------------------------------------------


def test_a_class_added_without_being_drawn_is_found() -> None:
    class Planted(errors.LocalError):
        code = "planted"

    classes = {**classes_of(errors), "Planted": Planted}
    assert problems(DOC, classes) == ["Planted is a class but is not drawn in the tree"]


def test_a_class_drawn_under_the_wrong_parent_is_found() -> None:
    wrong = DOC.replace("    │   └── PolicyDenied      ", "    ├── PolicyDenied          ")
    assert wrong != DOC
    assert problems(wrong, classes_of(errors)) == [
        "PolicyDenied is drawn under QuireError but its base is Forbidden"]


def test_a_drawn_node_without_a_class_is_found() -> None:
    extra = DOC.replace(
        "    ├── Unavailable ",
        "    ├── Gone                        gone               410   no\n"
        "    ├── Unavailable ")
    found = problems(extra, classes_of(errors))
    assert len(found) == 1 and found[0].startswith("Gone is drawn (docstring line ")


def test_a_wrong_code_status_or_retry_is_found() -> None:
    wrong = DOC.replace("head_changed       409   yes", "head_moved         412   no ")
    assert problems(wrong, classes_of(errors)) == [
        "HeadChanged is drawn with code head_moved, its code is head_changed",
        "HeadChanged is drawn with HTTP 412, its status is 409",
        "HeadChanged is drawn with retry no, its retryable is yes",
    ]
