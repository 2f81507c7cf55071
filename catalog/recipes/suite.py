"""Prompt suites and canaries: `data/suites/*.json`. A suite's identity is its canonical hash."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import Field, model_validator

from catalog.model.base import FieldError, Slug, StrictModel
from catalog.packets.canonical import canonical_sha256


class SuiteClass(StrictModel):
    id: Slug = Field(description="Class id prompts refer to.")
    title: str = Field(description="Class name as pages show it.")
    description: str = Field(description="What prompts of the class exercise.")


class SuitePrompt(StrictModel):
    id: Slug = Field(description="Prompt id, unique in the suite.")
    class_: Slug = Field(alias="class", description="Id of the prompt's class (key: class).")
    title: str = Field(description="Prompt name as pages show it.")
    prompt: str = Field(min_length=1, description="The prompt text sent to /v1/completions.")


class Suite(StrictModel):
    schema_version: Literal[1] = Field(description="Suite format version.")
    id: Slug = Field(description="Suite id packets refer to.")
    title: str = Field(description="Suite name as pages show it.")
    description: str = Field(description="What the suite measures.")
    classes: list[SuiteClass] = Field(min_length=1, description="Prompt classes; each has at least one prompt.")
    prompts: list[SuitePrompt] = Field(min_length=1, description="The prompts, each in one class.")

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
    id: Slug = Field(description="Canary id, unique in the set.")
    kind: Literal["repeat", "contains", "json_keys"] = Field(
        description="How answers are judged: repeat-exact, holding expected strings, or JSON with expected keys."
    )
    title: str = Field(description="Canary name as pages show it.")
    prompt: str = Field(min_length=1, description="The prompt text.")
    max_tokens: int = Field(gt=0, le=4096, description="Completion tokens requested.")
    repeats: int | None = Field(
        default=None, ge=2, description="Times a repeat canary is asked; every answer must be identical."
    )
    expect: list[str] | None = Field(default=None, description="Strings a contains canary's answer must hold.")
    expect_keys: dict[str, Literal["string", "integer", "number", "array", "object", "boolean"]] | None = Field(
        default=None, description="Keys a json_keys canary's answer must hold, with the JSON type of each."
    )

    @model_validator(mode="after")
    def _fields_match_kind(self) -> Canary:
        needed = {"repeat": "repeats", "contains": "expect", "json_keys": "expect_keys"}[self.kind]
        if getattr(self, needed) is None:
            raise ValueError(f"a {self.kind} canary needs {needed}")
        return self


class CanarySet(StrictModel):
    schema_version: Literal[1] = Field(description="Canary set format version.")
    id: Slug = Field(description="Canary set id packets refer to.")
    title: str = Field(description="Canary set name as pages show it.")
    description: str = Field(description="What the canaries check.")
    canaries: list[Canary] = Field(min_length=1, description="The canaries, each id once.")

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
