"""Tests of ``replica/app/``: the service layer (agent grants, the world model)."""
