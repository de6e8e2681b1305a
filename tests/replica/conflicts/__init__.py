"""Tests of ``replica/conflicts/``: packets, the desk, reports, conflicts end to end."""
