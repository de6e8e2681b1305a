"""Fixtures these flows share with the replica tests: a real hub process and an owner
joined through the CLI (tests/kit/cli.py)."""

from tests.kit.cli import (
    hub,  # noqa: F401 - fixtures
    owner,  # noqa: F401 - fixtures
)
