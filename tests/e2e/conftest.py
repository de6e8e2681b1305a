"""Fixtures these flows share with the replica tests: a real hub process and an owner
joined through the CLI (tests/replica/conftest.py)."""

from tests.replica.conftest import hub, owner  # noqa: F401 - fixtures
