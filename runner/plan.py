"""A campaign's plan: which arms to measure and the exact vLLM command of each.

The command comes from the recipe through catalog.recipes.compose, then the protocol's fixed flags.
Depth 0 is the oracle, always measured first and reused by every speculative depth.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import Field, field_validator

from catalog.errors import UserError
from catalog.model.base import Slug, StrictModel
from catalog.model.load_sweep import LAG_BOUND_MS, LoadSweep, Slo
from catalog.model.packet import LADDER_MOST_USERS
from catalog.packets.canonical import canonical_sha256
from catalog.recipes.command_facts import MAX_MODEL_LEN_FLAG, option_value
from catalog.recipes.compose import LaunchCommand, Selection, compose, configuration_selection, flag_groups, merge_args
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe

SPEC_FLAG = "--speculative-config"
LadderKind = Literal["concurrency", "context", "load"]

# Fixed by the protocol, appended last so they win over anything a recipe says. `--stream-interval 1`:
# a chunk per token as it is decoded (vLLM 0.32's default, pinned: a larger interval buffers that
# many tokens per chunk, vllm/v1/engine/output_processor.py, and token times would say so).
PROTOCOL_ARGS = ["--no-enable-prefix-caching", "--enable-prompt-tokens-details", "--stream-interval", "1"]
# Flags a measured arm may not carry, and why (the runner reads what they remove).
REFUSED_ARGS = {
    "--disable-log-stats": "it removes the /metrics counters the runner reads (vLLM creates no Prometheus "
    "logger without engine statistics: vllm/v1/engine/async_llm.py)",
}
STRICT_ARGS = ["--max-num-seqs", "1"]
LADDER_MAX_SEQS = str(LADDER_MOST_USERS)
# Without --max-model-len vLLM sizes the KV cache for the model's whole context (262,144 tokens for
# Qwen3.5) and fails to start on a 24-32 GB card; the recipe guides' B60/B70 commands use 8192.
# The strict suite needs prompt + 512 tokens, the context ladder up to 32K (it caps itself to this).
DEFAULT_MAX_MODEL_LEN = 8192


LOAD_USERS = [1, 2, 4, 8, 16, 32, 64]
LOAD_REQUESTS_PER_LEVEL = 64
LOAD_RATE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)


class LoadSweepOptions(StrictModel):
    """The load sweep's settings (LADDERS=load); runner/load_sweep.py runs it."""

    users: list[int] = Field(
        default=LOAD_USERS, min_length=1, description="closed-loop levels: users sending back to back"
    )
    rates_rps: list[float] | None = Field(
        default=None,
        description="open-loop arrival rates (requests/s); none: LOAD_RATE_FRACTIONS of the highest "
        "closed-loop level's measured request rate",
    )
    requests_per_level: int = Field(
        default=LOAD_REQUESTS_PER_LEVEL, ge=1, le=4096, description="requests sent at every level"
    )
    seed: int = Field(default=1, description="seed of the open-loop Poisson arrival schedules")
    slo: Slo = Field(default_factory=Slo, description="objectives goodput counts against")
    lag_bound_ms: float = Field(
        default=LAG_BOUND_MS, gt=0, description="p99 schedule lag beyond which a level is unusable"
    )

    @classmethod
    def of_sweep(cls, sweep: LoadSweep) -> LoadSweepOptions:
        """The settings a recorded sweep ran with: a reproduction replays its levels and arrivals."""
        return cls(
            users=[level.users for level in sweep.levels if level.users is not None] or LOAD_USERS,
            rates_rps=[level.rate_rps for level in sweep.levels if level.rate_rps is not None] or None,
            requests_per_level=sweep.requests_per_level,
            seed=sweep.seed,
            slo=sweep.slo,
            lag_bound_ms=sweep.lag_bound_ms,
        )

    @field_validator("users")
    @classmethod
    def _users_fit_the_ladder_server(cls, users: list[int]) -> list[int]:
        if any(level < 1 or level > LADDER_MOST_USERS for level in users):
            raise ValueError(f"load users must be between 1 and {LADDER_MAX_SEQS}")
        return sorted(set(users))

    @field_validator("rates_rps")
    @classmethod
    def _positive_rates(cls, rates: list[float] | None) -> list[float] | None:
        if rates is not None and (not rates or any(rate <= 0 for rate in rates)):
            raise ValueError("load rates must be positive requests per second")
        return sorted(set(rates)) if rates is not None else None


class CampaignRequest(StrictModel):
    """What the user asked for on the command line; validation errors name the option."""

    model: Slug
    variant: Slug = "default"  # part of the runs/ folder name: no "../"
    hardware: Slug | None = None
    tp: int = Field(default=1, ge=1, le=16)
    depths: list[int] = Field(default=[0], min_length=1)
    ladders: list[LadderKind] = []
    suite: Slug = "strict-v1"
    canaries: Slug = "canaries-v1"
    max_tokens: int = Field(default=512, ge=101, le=8192)
    seed: int = 1234
    servers_per_arm: int = Field(default=2, ge=2, le=4)
    # users per step of the concurrency ladder (the protocol's c1..c64; fewer for a quick run)
    concurrency_levels: list[int] = Field(default=[1, 2, 4, 8, 16, 32, 64], min_length=1)
    # a reproduction's campaign is new, never the one it reproduces (runner/reproduce.py)
    salt: str | None = None
    # A measured configuration of the recipe's overlay (its env switches and speculative method);
    # None: the recipe's default features and speculative feature.
    configuration: Slug | None = None
    # The load sweep's settings; None unless LADDERS has load (and then the defaults).
    load: LoadSweepOptions | None = None

    @field_validator("concurrency_levels")
    @classmethod
    def _levels_fit_the_ladder_server(cls, levels: list[int]) -> list[int]:
        if any(level < 1 or level > LADDER_MOST_USERS for level in levels):
            raise ValueError(f"concurrency levels must be between 1 and {LADDER_MAX_SEQS}")
        return sorted(set(levels))

    @field_validator("depths")
    @classmethod
    def _oracle_first(cls, depths: list[int]) -> list[int]:
        if any(d < 0 or d > 16 for d in depths):
            raise ValueError("depths must be between 0 and 16")
        return sorted({0, *depths})


@dataclass(frozen=True)
class ArmPlan:
    id: str
    spec_depth: int
    spec_method: str | None
    command: LaunchCommand
    max_model_len_source: Literal["recipe", "runner default"] | None = None
    draft_head: str | None = None  # an overlay configuration's, recorded in the packet's arm


def refuse_unmeasurable(command: LaunchCommand, arm_id: str, source: str) -> None:
    """A flag that would leave the runner without what it measures is refused before anything starts."""
    for group in flag_groups(command.args):
        name = group[0].split("=", 1)[0]
        if name in REFUSED_ARGS:
            raise UserError(
                f"arm {arm_id} would run with {name}: {REFUSED_ARGS[name]}; remove it from the recipe, overlay or "
                "configuration",
                file=source,
                field="CONFIG",
            )


def flag_value(args: list[str], flag: str) -> str | None:
    """The first value the runner's composed arguments give `flag` (`--flag value`, `--flag=value`
    or `--flag_name`: the spellings `merge_args` keeps one of), or None. What a packet records, or
    what decides whether a recipe's own setting is kept, is read as vLLM reads it instead
    (`option_value`, catalog/recipes/command_facts.py): aliases and abbreviations too."""
    for group in flag_groups(args):
        name, eq, attached = group[0].partition("=")
        if name.replace("_", "-") == flag:
            if eq:
                return attached
            if len(group) > 1:
                return group[1]
    return None


def spec_feature(recipe: Recipe) -> str | None:
    for name, feature in recipe.features.items():
        args = [*feature.args, *(a for m in feature.modes.values() for a in m.args)]
        if SPEC_FLAG in args:
            return name
    return None


def _with_depth(command: LaunchCommand, depth: int) -> tuple[LaunchCommand, str]:
    """Set num_speculative_tokens in the composed --speculative-config to the requested depth."""
    args: list[str] = []
    method = ""
    for group in flag_groups(command.args):
        if group[0] == SPEC_FLAG and len(group) == 2:
            config = json.loads(group[1])
            config["num_speculative_tokens"] = depth
            method = str(config.get("method", "unknown"))
            group = [SPEC_FLAG, json.dumps(config, separators=(",", ":"), sort_keys=True)]
        args.extend(group)
    return LaunchCommand(command.model_id, args, command.env, command.docker_image, command.platform), method


def plan_arms(request: CampaignRequest, recipe: Recipe, hardware: Hardware, source: str) -> list[ArmPlan]:
    if request.configuration is not None:
        return _configuration_arms(request, recipe, hardware, source)
    feature = spec_feature(recipe)
    if max(request.depths) > 0 and feature is None:
        raise UserError("has no speculative decoding feature; use DEPTHS=0", file=source, field="features")
    base_features = [f for f in recipe.default_features() if f != feature]
    arms = []
    for depth in request.depths:
        features = base_features if depth == 0 else [*base_features, feature or ""]
        selection = Selection(
            variant=request.variant,
            hardware=hardware,
            tensor_parallel_size=request.tp,
            features=features,
            extra_args=[*PROTOCOL_ARGS, *STRICT_ARGS, "--seed", str(request.seed)],
        )
        command = compose(recipe, selection, source=source)
        command, length_source = with_max_model_len(command, recipe.model.context_length)
        method = None
        if depth:
            command, method = _with_depth(command, depth)
        arm_id = f"tp{request.tp}-{method or 'spec'}{depth}" if depth else f"tp{request.tp}-oracle"
        refuse_unmeasurable(command, arm_id, source)
        arms.append(ArmPlan(arm_id, depth, method, command, length_source))
    return arms


def _configuration_arms(request: CampaignRequest, recipe: Recipe, hardware: Hardware, source: str) -> list[ArmPlan]:
    """Arms of an overlay configuration: its variant, card, TP, env and speculative method, at each
    requested depth. Depth 0, the oracle, is the plain model: without the speculative config and
    without the configuration's env switches (they tune the draft)."""
    name = request.configuration or ""
    config = recipe.configurations.get(name)
    if config is None:
        known = ", ".join(recipe.configurations) or "none"
        raise UserError(f"unknown configuration {name!r} (this recipe's: {known})", field="CONFIG")
    if config.variant != request.variant or config.hardware != hardware.id or config.tp != request.tp:
        raise UserError(
            f"configuration {name!r} is VARIANT={config.variant} HW={config.hardware} TP={config.tp}: "
            "ask for those, or leave CONFIG out",
            field="CONFIG",
        )
    if max(request.depths) > 0 and config.speculative_config is None:
        raise UserError(f"configuration {name!r} has no speculative config; use DEPTHS=0", field="CONFIG")
    arms = []
    protocol = [*PROTOCOL_ARGS, *STRICT_ARGS, "--seed", str(request.seed)]
    for depth in request.depths:
        arm_config = config if depth else config.model_copy(update={"speculative_config": None, "env": {}})
        selection = configuration_selection(arm_config, hardware, depth or None)
        selection = replace(selection, extra_args=[*selection.extra_args, *protocol])
        command = compose(recipe, selection, source=source)
        command, length_source = with_max_model_len(command, recipe.model.context_length)
        method = str((config.speculative_config or {}).get("method", "spec")) if depth else None
        arm_id = f"tp{request.tp}-{method}{depth}" if depth else f"tp{request.tp}-oracle"
        refuse_unmeasurable(command, arm_id, source)
        arms.append(ArmPlan(arm_id, depth, method, command, length_source, config.draft_head if depth else None))
    return arms


def with_max_model_len(
    command: LaunchCommand, context_length: int
) -> tuple[LaunchCommand, Literal["recipe", "runner default"]]:
    """The recipe's --max-model-len for this card when it sets one; else the runner's default
    (never more than the model's context), appended and recorded as such in the packet."""
    if option_value(command.argv(), MAX_MODEL_LEN_FLAG) is not None:  # 8k, --max-model-len=8192, auto
        return command, "recipe"
    length = min(DEFAULT_MAX_MODEL_LEN, context_length) if context_length > 0 else DEFAULT_MAX_MODEL_LEN
    args = [*command.args, MAX_MODEL_LEN_FLAG, str(length)]
    return LaunchCommand(command.model_id, args, command.env, command.docker_image, command.platform), "runner default"


def ladder_command(arm: ArmPlan) -> LaunchCommand:
    """The same command with room for 64 sequences: ladders batch requests."""
    args = [*arm.command.args, "--max-num-seqs", LADDER_MAX_SEQS]
    return LaunchCommand(
        arm.command.model_id, merge_args(args), arm.command.env, arm.command.docker_image, arm.command.platform
    )


def campaign_id(request: CampaignRequest, arms: list[ArmPlan], suite_sha: str, runtime_key: str = "") -> str:
    """Same request, same commands, same suite, same runtime (image digest and vLLM version, or the
    local install's version and package set): same campaign folder, so a rerun resumes; a new image
    is a new campaign, never mixed with attempts measured on the old one."""
    # Without a load sweep the request hashes as it did before `load` existed: runs resume.
    plan = {
        "request": request.model_dump(mode="json", exclude={"load"} if request.load is None else None),
        "arms": [[a.id, a.command.argv(), sorted(a.command.env.items())] for a in arms],
        "suite": suite_sha,
        "runtime": runtime_key,
    }
    return f"{request.model}-{request.variant}-{canonical_sha256(plan)[:12]}"
