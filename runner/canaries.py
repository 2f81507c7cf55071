"""Judge the canaries each server answers before the strict suite."""

from __future__ import annotations

import json
import re

from catalog.packet import CanaryResult
from catalog.suite import Canary

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "array": list,
    "object": dict,
    "boolean": bool,
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def judge(canary: Canary, outputs: list[str]) -> CanaryResult:
    """`outputs` holds one answer, or `repeats` answers for a repeat canary."""
    if canary.kind == "repeat":
        distinct = len(set(outputs))
        return CanaryResult(
            id=canary.id, passed=distinct == 1, detail=f"{len(outputs)} runs, {distinct} distinct outputs"
        )
    answer = outputs[0]
    if canary.kind == "contains":
        missing = [e for e in canary.expect or [] if e not in answer]
        detail = "all expected text present" if not missing else f"missing {missing[0]!r}"
        return CanaryResult(id=canary.id, passed=not missing, detail=detail)
    return _judge_json(canary, answer)


def _judge_json(canary: Canary, answer: str) -> CanaryResult:
    try:
        value = json.loads(_FENCE.sub("", answer.strip()))
    except json.JSONDecodeError as error:
        return CanaryResult(id=canary.id, passed=False, detail=f"not JSON: {error.msg}")
    if not isinstance(value, dict):
        return CanaryResult(id=canary.id, passed=False, detail="not a JSON object")
    for key, kind in (canary.expect_keys or {}).items():
        expected = _JSON_TYPES[kind]
        actual = value.get(key)
        if actual is None or not isinstance(actual, expected) or (kind == "integer" and isinstance(actual, bool)):
            return CanaryResult(id=canary.id, passed=False, detail=f"key {key!r} is not a {kind}")
    return CanaryResult(id=canary.id, passed=True, detail="typed keys present")
