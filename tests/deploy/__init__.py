"""Tests of ``deploy/``: the Compose, nginx and systemd files load and keep their
settings."""
