"""Shared pydantic building blocks."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

# Identifiers end up in URLs and file names: ASCII, no path characters, no leading dot.
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]{0,79}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
# Environment variable names are printed unquoted before commands (NAME=value vllm serve ...).
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class StrictModel(BaseModel):
    """Every input and output model: unknown keys are errors, values are not coerced loosely, and
    a number is finite (inf or NaN passed validation, then broke hashing and formatting)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FieldError(ValueError):
    """A whole-model check that knows which field is wrong: raised in a model validator, the loader
    names `loc` (relative to the model) instead of the model as a whole."""

    def __init__(self, message: str, *loc: str | int) -> None:
        super().__init__(message)
        self.loc = loc
