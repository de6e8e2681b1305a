"""Tests of ``replica/cli/``: commands, completion, human output, exit codes, doctor."""
