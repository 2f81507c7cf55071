"""Credentials never leave the machine: which environment variables and flags hold one, and how
a recorded command or a log says "set, value withheld" instead of the value."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

REDACTED = "<redacted>"
# Whole words of a variable name (HF_TOKEN, OPENAI_API_KEY, AWS_SESSION_TOKEN, MY_SECRET), so
# TOKENIZERS_PARALLELISM or VLLM_MAX_TOKENS_PER_EXPERT stay visible.
SECRET_ENV = re.compile(
    r"SECRET|PASSW(?:OR)?D|CREDENTIAL|APIKEY|PRIVATE_?KEY|(?:^|_)(?:TOKEN|KEY|AUTH|COOKIE|SESSION)(?:_|$)",
    re.IGNORECASE,
)
# The last words of a flag: --api-key, --hf-token, --ssl-keyfile-password; not --tokenizer-mode or
# --max-num-batched-tokens.
SECRET_FLAG = re.compile(r"^--(?:[a-z0-9]+-)*(?:api-key|key|token|secret|password|passwd|credentials?)$")
MIN_SECRET_CHARS = 6  # shorter values ("1", "true") are flags, and redacting them would mangle logs


def is_secret_env(name: str) -> bool:
    return bool(SECRET_ENV.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: REDACTED if is_secret_env(k) else v for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`--api-key X` and `--api-key=X` keep the flag and lose the value."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if SECRET_FLAG.match(flag):
            out.append(f"{flag}={REDACTED}" if eq else arg)
            hide_next = not eq
            continue
        out.append(arg)
    return out


def secret_values(argv: Sequence[str], env: Mapping[str, str]) -> set[str]:
    """The literal secrets an argv and an environment carry, to scrub from free text (logs)."""
    values = {v for k, v in env.items() if is_secret_env(k)}
    for index, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if SECRET_FLAG.match(flag):
            values.add(value if eq else (argv[index + 1] if index + 1 < len(argv) else ""))
    return {v for v in values if len(v) >= MIN_SECRET_CHARS}


def redact_text(text: str, values: Iterable[str]) -> str:
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text
