"""User-facing errors: one line naming the file, the line where known, and the field."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


class UserError(Exception):
    """Anything a user can fix (an input file, a command-line option, the measuring host):
    printed as one line naming where (file, line, field), what is wrong and, when known, what to
    do about it (`hint`); never with a traceback."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        field: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.field = field
        self.line = line
        self.hint = hint

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only fields: the default exception pickling would lose them (parallel loading).
        return (_rebuild_error, (type(self), self.message, self.file, self.field, self.line, self.hint))

    def __str__(self) -> str:
        where = self.file or ""
        if where and self.line is not None:
            where += f":{self.line}"
        parts = [p for p in (where, self.field) if p]
        text = ": ".join([*parts, self.message])
        return f"{text} ({self.hint})" if self.hint else text


class CatalogError(UserError):
    """A problem in the catalog's inputs (data/, packets/, a file a command reads)."""


def _rebuild_error(
    kind: type[UserError], message: str, file: str | None, field: str | None, line: int | None, hint: str | None
) -> UserError:
    return kind(message, file=file, field=field, line=line, hint=hint)


class CatalogErrors(CatalogError):
    """Several independent problems found in one pass (each still names its file)."""

    def __init__(self, errors: list[CatalogError]) -> None:
        super().__init__(f"{len(errors)} problems")
        self.errors = errors

    def __reduce__(self) -> tuple[object, ...]:
        return (CatalogErrors, (self.errors,))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


def exit_on_user_error(main: Callable[[], int | None]) -> Callable[[], NoReturn]:
    """Wrap a CLI entry point so a UserError (or an OSError) prints as plain lines and exits 1."""

    def wrapped() -> NoReturn:
        try:
            code = main() or 0
        except UserError as error:
            print(f"error: {error}".replace("\n", "\nerror: "), file=sys.stderr)
            code = 1
        except OSError as error:  # the system refused a read or write: the path and its reason, no traceback
            where = f"{error.filename}: " if error.filename else ""
            print(f"error: {where}{error.strerror or error}", file=sys.stderr)
            code = 1
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            code = 130
        sys.exit(code)

    return wrapped
