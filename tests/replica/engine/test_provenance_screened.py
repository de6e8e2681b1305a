"""A secret in a batch's provenance never leaves the replica (docs/security.md, Screening,
"Provenance"): ``QUIRE_SESSION`` holding a token, a note quoting a key. The replica withholds
that field before signing and the edit still publishes; the hub would refuse the batch.
On 0506cf5 the key went out in the provenance and was stored in the space's history."""

from __future__ import annotations

import json
from pathlib import Path

from replica.engine.screened import WITHHELD
from shared.entry import Entry
from tests.kit.inproc import Space

KEY = "ghp_" + "Zq8Lw2Nx7Vb1Ty6Kp3Hs9Dm5Fg0JcR4tY7uE"  # assembled: no literal key here


def test_a_secret_in_the_provenance_goes_out_withheld_and_the_edit_publishes(
        tmp_path: Path, space: Space) -> None:
    a = space.replica(tmp_path, "a")
    a.engine.publisher.provenance = {"tool": "eval", "session": KEY}
    a.write(Entry(id="page/p", title="P", body="hello\n"))
    a.sync()
    batch = space.batches(a)[-1]
    assert [op["entry"]["id"] for op in batch["ops"]] == ["page/p"]
    assert batch["provenance"] == {"tool": "eval", "session": WITHHELD}
    assert KEY not in json.dumps(space.batches())
