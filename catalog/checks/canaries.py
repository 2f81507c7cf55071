"""Judge the canaries each server answers before the strict suite: the runner judges the answers
as it gets them, and verify judges the recorded answers again."""

from __future__ import annotations

import json
import re

from catalog.model.packet import CanaryResult
from catalog.recipes.suite import Canary

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "array": list,
    "object": dict,
    "boolean": bool,
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def judge(canary: Canary, outputs: list[str], reasoning: list[str] | None = None) -> CanaryResult:
    """`outputs` holds one answer, or `repeats` answers for a repeat canary ("" for a null
    content); `reasoning` what the server returned beside each, when it returned any."""
    passed, detail = verdict(canary, outputs, reasoning)
    return CanaryResult(id=canary.id, outputs=outputs, passed=passed, detail=detail, reasoning=reasoning)


def verdict(canary: Canary, outputs: list[str], reasoning: list[str] | None = None) -> tuple[bool, str]:
    """An empty answer fails every kind (eight empty repeats are not "one output"); the detail
    says when the text went to the reasoning field instead."""
    empty = next((index for index, answer in enumerate(outputs) if not answer.strip()), None)
    if empty is not None:
        thought = reasoning[empty] if reasoning is not None and empty < len(reasoning) else ""
        which = f"answer {empty + 1} of {len(outputs)}" if len(outputs) > 1 else "the answer"
        if thought:
            return False, (
                f"{which} has no content: the server returned {len(thought)} characters of reasoning "
                "instead (thinking on, </think> never closed)"
            )
        return False, f"{which} is empty"
    if canary.kind == "repeat":
        distinct = len(set(outputs))
        expected = canary.repeats or 1
        if len(outputs) != expected:
            return False, f"{len(outputs)} runs recorded, {expected} expected"
        return distinct == 1, f"{len(outputs)} runs, {distinct} distinct outputs"
    if len(outputs) != 1:
        return False, f"{len(outputs)} answers recorded, 1 expected"
    answer = outputs[0]
    if canary.kind == "contains":
        missing = [e for e in canary.expect or [] if e not in answer]
        return not missing, "all expected text present" if not missing else f"missing {missing[0]!r}"
    return _judge_json(canary, answer)


def _judge_json(canary: Canary, answer: str) -> tuple[bool, str]:
    try:
        value = json.loads(_FENCE.sub("", answer.strip()))
    except json.JSONDecodeError as error:
        return False, f"not JSON: {error.msg}"
    if not isinstance(value, dict):
        return False, "not a JSON object"
    for key, kind in (canary.expect_keys or {}).items():
        expected = _JSON_TYPES[kind]
        actual = value.get(key)
        if actual is None or not isinstance(actual, expected) or (kind == "integer" and isinstance(actual, bool)):
            return False, f"key {key!r} is not a {kind}"
    return True, "typed keys present"
