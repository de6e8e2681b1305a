"""The world model's pure part lives in shared/worldmodel.py (the hub's remote endpoint builds
the same bundle); these names stay importable from here."""

from __future__ import annotations

from shared.worldmodel import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
from shared.worldmodel import PROFILE as PROFILE
from shared.worldmodel import SkillIn as SkillIn
from shared.worldmodel import bundle as bundle
from shared.worldmodel import merge_guardrails as merge_guardrails
from shared.worldmodel import merge_skills as merge_skills
from shared.worldmodel import runtime_guardrail_problems as runtime_guardrail_problems
