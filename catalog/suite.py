"""Prompt suites and canaries: `data/suites/*.json`. A suite's identity is its canonical hash."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import Field, model_validator

from catalog.base import FieldError, Slug, StrictModel
from catalog.canonical import canonical_sha256


class SuiteClass(StrictModel):
    id: Slug
    title: str
    description: str


class SuitePrompt(StrictModel):
    id: Slug
    class_: Slug = Field(alias="class")
    title: str
    prompt: str = Field(min_length=1)


class Suite(StrictModel):
    schema_version: Literal[1]
    id: Slug
    title: str
    description: str
    classes: list[SuiteClass] = Field(min_length=1)
    prompts: list[SuitePrompt] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Suite:
        class_ids = [c.id for c in self.classes]
        _require_unique(class_ids, "class id", "classes")
        _require_unique([p.id for p in self.prompts], "prompt id", "prompts")
        for index, prompt in enumerate(self.prompts):
            if prompt.class_ not in class_ids:
                raise FieldError(
                    f"prompt {prompt.id!r} names unknown class {prompt.class_!r}", "prompts", index, "class"
                )
        empty = [i for i, c in enumerate(class_ids) if all(p.class_ != c for p in self.prompts)]
        if empty:
            raise FieldError(f"class {class_ids[empty[0]]!r} has no prompt", "classes", empty[0])
        return self

    @cached_property
    def sha256(self) -> str:
        """Computed once: every packet's workload is checked against it."""
        return canonical_sha256(self.model_dump(mode="json", by_alias=True))

    def class_of(self) -> dict[str, str]:
        return {p.id: p.class_ for p in self.prompts}


class Canary(StrictModel):
    id: Slug
    kind: Literal["repeat", "contains", "json_keys"]
    title: str
    prompt: str = Field(min_length=1)
    max_tokens: int = Field(gt=0, le=4096)
    repeats: int | None = Field(default=None, ge=2)
    expect: list[str] | None = None
    expect_keys: dict[str, Literal["string", "integer", "number", "array", "object", "boolean"]] | None = None

    @model_validator(mode="after")
    def _fields_match_kind(self) -> Canary:
        needed = {"repeat": "repeats", "contains": "expect", "json_keys": "expect_keys"}[self.kind]
        if getattr(self, needed) is None:
            raise ValueError(f"a {self.kind} canary needs {needed}")
        return self


class CanarySet(StrictModel):
    schema_version: Literal[1]
    id: Slug
    title: str
    description: str
    canaries: list[Canary] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> CanarySet:
        _require_unique([c.id for c in self.canaries], "canary id", "canaries")
        return self

    @cached_property
    def sha256(self) -> str:
        return canonical_sha256(self.model_dump(mode="json"))


def _require_unique(ids: list[str], what: str, field: str) -> None:
    seen: set[str] = set()
    for index, item in enumerate(ids):
        if item in seen:
            raise FieldError(f"duplicate {what} {item!r}", field, index)
        seen.add(item)
