"""Compose the `vllm serve` command from a recipe.

Order, later flags of the same name replacing earlier ones: base args, variant args (and the
variant's hardware overrides), strategy (tensor parallel size, strategy overrides), the recipe's
hardware overrides, then enabled features (all minus opt-in unless asked), then caller extras.
Hardware override keys match a card's brand (vendor), generation or id, in that order.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from catalog.errors import CatalogError
from catalog.model.secrets import redact_argv, redact_env
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Args, Configuration, Env, Feature, Recipe

XPU_DOCKER_OPTIONS = [
    "--device",
    "/dev/dri",
    "-v",
    "/dev/dri/by-path:/dev/dri/by-path",
    "--shm-size=16g",
    "--privileged",
    "--ipc=host",
]
CUDA_DOCKER_OPTIONS = ["--gpus", "all", "--ipc=host"]
# A recipe's `default_frontend` (`rust`: vLLM's Rust API frontend, VLLM_USE_RUST_FRONTEND=1 under
# `vllm serve`) is not composed into its command, and the runner does not apply it: what a page
# says of it, in one place.
FRONTEND_NOT_APPLIED = (
    "not applied by this catalog: commands are composed, and servers measured, with vLLM's Python API "
    "server (the Rust frontend's support for --stream-interval and /server_info, which the runner relies on, "
    "is unverified); each packet records the entrypoint its servers ran"
)
# What a container needs whichever cards it is given (vLLM's workers share memory through /dev/shm).
_SHARED_MEMORY_OPTIONS = ["--shm-size=16g", "--ipc=host"]
HF_CACHE_MOUNT = ["-v", "$HOME/.cache/huggingface:/root/.cache/huggingface"]
_DOUBLE_QUOTE_ACTIVE = re.compile(r'[$`"\\!\n]')


@dataclass(frozen=True)
class Selection:
    variant: str = "default"
    hardware: Hardware | None = None
    tensor_parallel_size: int | None = None
    strategy: str | None = None
    features: Sequence[str] | None = None
    modes: Mapping[str, str] = field(default_factory=dict)
    extra_args: Sequence[str] = ()
    extra_env: Mapping[str, str] = field(default_factory=dict)
    # flags (with their values) a measured configuration ran without, though the recipe adds them
    drop_args: Sequence[str] = ()


@dataclass(frozen=True)
class LaunchCommand:
    model_id: str
    args: list[str]
    env: dict[str, str]
    docker_image: str | None = None
    platform: str | None = None

    def argv(self, program: Sequence[str] = ("vllm", "serve")) -> list[str]:
        return [*program, self.model_id, *self.args]

    def redacted(self) -> LaunchCommand:
        """The same command with credentials (HF_TOKEN=..., --api-key ...) replaced by a marker:
        the form to record, print or publish."""
        return LaunchCommand(
            self.model_id, redact_argv(self.args), redact_env(self.env), self.docker_image, self.platform
        )

    def shell(self) -> str:
        env = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join([*env, _shell_join(self.argv())])

    def shell_multiline(self) -> str:
        """One flag per line, for reading and copying."""
        env = [f"{k}={shlex.quote(v)} \\" for k, v in sorted(self.env.items())]
        lines = [f"vllm serve {shlex.quote(self.model_id)}"]
        lines += [f"  {_shell_join(group)}" for group in flag_groups(self.args)]
        return "\n".join([*env, " \\\n".join(lines)])

    def docker_argv(
        self,
        publish: str = "8000:8000",
        hf_cache: str | None = None,
        *,
        name: str | None = None,
        image: str | None = None,
        model_mount: tuple[str, str] | None = None,
        pass_env: Sequence[str] = (),
        device_options: Sequence[str] | None = None,
        runtime_env: Mapping[str, str] | None = None,
        mounts: Sequence[str] = (),
        served_name: bool = False,
        mount_hf_home: bool = True,
    ) -> list[str] | None:
        """`docker run` of the image. The runner binds loopback (`publish`), mounts the real hub
        cache, names the container (so it can be stopped and removed by name), runs the image
        pinned by digest (`image`), serves a local weights folder mounted read-only at
        `model_mount[1]`, and hands variables such as HF_TOKEN through by name only (`-e NAME`
        takes the value from the caller's environment: it never appears in the command).

        Without `device_options` the container gets the platform's usual options (every card);
        the runner gives the cards preflight checked, and sets `runtime_env` (container paths,
        the card selection) and `mounts` (more `-v` values) itself; `served_name` names the
        model as the recipe does when the server is given a path; `mount_hf_home=False` leaves the
        Hugging Face home unmounted (the runner mounts the hub cache it found, in `mounts`)."""
        if self.docker_image is None:
            return None
        platform = {"xpu": XPU_DOCKER_OPTIONS, "cuda": CUDA_DOCKER_OPTIONS}.get(self.platform or "", [])
        options = platform if device_options is None else [*device_options, *_SHARED_MEMORY_OPTIONS]
        mount = ["-v", f"{hf_cache}:/root/.cache/huggingface"] if hf_cache else list(HF_CACHE_MOUNT)
        if not mount_hf_home:
            mount = []
        mount += [token for value in mounts for token in ("-v", value)]
        extra = dict(runtime_env or {})
        env = [token for k, v in sorted({**self.env, **extra}.items()) for token in ("-e", f"{k}={v}")]
        passed = [token for k in pass_env if k not in self.env and k not in extra for token in ("-e", k)]
        named = ["--name", name] if name else []
        model = self.model_id
        args = list(self.args)
        if model_mount is not None:
            mount += ["-v", f"{model_mount[0]}:{model_mount[1]}:ro"]
            model = model_mount[1]
        if (model_mount is not None or served_name) and "--served-model-name" not in args:
            args += ["--served-model-name", self.model_id]
        return [
            "docker",
            "run",
            "--rm",
            *named,
            *options,
            "-p",
            publish,
            *mount,
            *env,
            *passed,
            image or self.docker_image,
            model,
            *args,
        ]

    def docker_shell(self) -> str | None:
        argv = self.docker_argv()
        return None if argv is None else _shell_join(argv)

    def docker_multiline(self, image_digest: str | None = None) -> str | None:
        """`docker run` one flag per line; the image pinned `@sha256:...` when a digest is known."""
        if self.docker_image is None:
            return None
        image = f"{self.docker_image}@{image_digest}" if image_digest else self.docker_image
        options = {"xpu": XPU_DOCKER_OPTIONS, "cuda": CUDA_DOCKER_OPTIONS}.get(self.platform or "", [])
        env = [["-e", f"{k}={v}"] for k, v in sorted(self.env.items())]
        groups = [*flag_groups(options), ["-p", "8000:8000"], *flag_groups(HF_CACHE_MOUNT), *env]
        lines = ["docker run --rm", *(f"  {_shell_join(g)}" for g in groups), f"  {_shell_join([image])}"]
        lines.append(f"  {_shell_join([self.model_id])}")
        lines += [f"  {_shell_join(g)}" for g in flag_groups(self.args)]
        return " \\\n".join(lines)


def _shell_join(argv: Iterable[str]) -> str:
    # $HOME stays expandable; everything else is quoted for a POSIX shell. Inside double quotes
    # $( ), backticks, \ and " still act, so a $HOME/ argument holding any of them (a recipe's
    # "$HOME/x$(curl ... | sh)") is single-quoted like the rest.
    return " ".join(
        f'"{a}"' if a.startswith("$HOME/") and not _DOUBLE_QUOTE_ACTIVE.search(a[6:]) else shlex.quote(a) for a in argv
    )


def _is_flag(token: str) -> bool:
    if token.startswith("--"):  # no number is written with two dashes: no float() to fail
        return True
    if not token.startswith("-") or token == "-":  # noqa: S105 - a CLI token, not a secret
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def flag_name(token: str) -> str:
    """`--no-x`, `--x`, `--x=1`, `--x 1` (one token) and `--x_y` spellings name one flag."""
    name = token.split("=", 1)[0].split(" ", 1)[0].replace("_", "-")
    return "--" + name[5:] if name.startswith("--no-") else name


def split_joined(args: Sequence[str]) -> list[str]:
    """Real recipes sometimes write `"--flag value"` as one token; a shell needs two (argparse reads
    one token with a space as a value). Recipe text only: a recorded argv is read as it ran."""
    out: list[str] = []
    for token in args:
        if _is_flag(token) and " " in token and "=" not in token:
            out.extend(token.split(" ", 1))
        else:
            out.append(token)
    return out


def grouped(tokens: Sequence[str], is_option: Callable[[str], bool]) -> list[list[str]]:
    """Each option (as `is_option` tells one) with the tokens that follow it."""
    groups: list[list[str]] = []
    for token in tokens:
        if is_option(token) or not groups:
            groups.append([token])
        else:
            groups[-1].append(token)
    return groups


def flag_groups(args: Sequence[str]) -> list[list[str]]:
    return grouped(split_joined(args), _is_flag)


def merge_args(args: Sequence[str]) -> list[str]:
    """Keep the last occurrence of every flag (with its values), in the order of those last ones."""
    groups = flag_groups(args)
    last = {flag_name(g[0]): i for i, g in enumerate(groups) if _is_flag(g[0])}
    return [
        token
        for i, group in enumerate(groups)
        if not _is_flag(group[0]) or last[flag_name(group[0])] == i
        for token in group
    ]


def without_flags(args: Sequence[str], dropped: Sequence[str]) -> list[str]:
    """`args` without the named flags and their values."""
    names = {flag_name(flag) for flag in dropped}
    return [token for group in flag_groups(args) if flag_name(group[0]) not in names for token in group]


def override_keys(hardware: Hardware | None) -> list[str]:
    if hardware is None:
        return []
    return [hardware.vendor.lower(), hardware.generation, hardware.id]


class _Layers:
    def __init__(self) -> None:
        self.args: Args = []
        self.env: Env = {}

    def add(self, args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        self.args.extend(args)
        self.env.update(env or {})


def compose(recipe: Recipe, selection: Selection, *, source: str = "recipe") -> LaunchCommand:
    if selection.variant not in recipe.variants:
        raise CatalogError(
            f"unknown variant {selection.variant!r} (choose from {', '.join(recipe.variants)})",
            file=source,
            field="variants",
        )
    variant = recipe.variants[selection.variant]
    keys = override_keys(selection.hardware)
    layers = _Layers()
    layers.add(recipe.model.base_args, recipe.model.base_env)
    layers.add(variant.extra_args, variant.extra_env)
    for key in keys:
        if key in variant.hardware_overrides:
            override = variant.hardware_overrides[key]
            layers.add(override.extra_args, override.extra_env)
    variant_tp = variant.tp if isinstance(variant.tp, int) else None
    tp = selection.tensor_parallel_size or variant_tp or 1
    if tp > 1:
        layers.add(["--tensor-parallel-size", str(tp)])
    strategy = selection.strategy or recipe.default_strategy
    if strategy and strategy in recipe.strategy_overrides:
        so = recipe.strategy_overrides[strategy]
        layers.add([*so.extra_args, *so.vllm_args], {**so.env, **so.extra_env})
    for key in keys:
        if key in recipe.hardware_overrides:
            recipe_override = recipe.hardware_overrides[key]
            layers.add(recipe_override.extra_args, recipe_override.extra_env)
    modes = {**variant.default_modes, **selection.modes}
    for name in _enabled_features(recipe, selection, source):
        _add_feature(layers, recipe.features[name], name, selection, modes, strategy, keys, source)
    layers.add(selection.extra_args, selection.extra_env)
    return LaunchCommand(
        model_id=recipe.variant_model_id(selection.variant),
        args=without_flags(merge_args(layers.args), selection.drop_args),
        env=layers.env,
        docker_image=_docker_image(recipe, selection),
        platform=selection.hardware.platform if selection.hardware else None,
    )


def _enabled_features(recipe: Recipe, selection: Selection, source: str) -> list[str]:
    """Asked-for features, or the defaults: all minus opt-in ones (globally and for this card),
    plus any feature the variant switches on through `default_modes`."""
    if selection.features is None:
        hardware_opt_in = {
            f for key in override_keys(selection.hardware) for f in recipe.hardware_opt_in_features.get(key, [])
        }
        forced = list(recipe.variants[selection.variant].default_modes)
        wanted = [f for f in recipe.default_features() if f not in hardware_opt_in] + forced
    else:
        wanted = list(selection.features)
    for name in wanted:
        if name not in recipe.features:
            raise CatalogError(
                f"unknown feature {name!r} (choose from {', '.join(recipe.features)})", file=source, field="features"
            )
    return [name for name in recipe.features if name in wanted]


def _add_feature(
    layers: _Layers,
    feature: Feature,
    name: str,
    selection: Selection,
    modes: Mapping[str, str],
    strategy: str | None,
    keys: list[str],
    source: str,
) -> None:
    if feature.variants and selection.variant not in feature.variants:
        return
    if feature.strategies and strategy and strategy not in feature.strategies:
        return
    layers.add(feature.args, {**feature.env, **feature.extra_env})
    if feature.modes:
        mode_name = modes.get(name) or feature.default_mode or next(iter(feature.modes))
        if mode_name not in feature.modes:
            raise CatalogError(
                f"feature {name!r} has no mode {mode_name!r}", file=source, field=f"features.{name}.modes"
            )
        mode = feature.modes[mode_name]
        if not mode.variants or selection.variant in mode.variants:
            layers.add(mode.args, mode.env)
            for key in keys:
                if key in mode.hardware_overrides:
                    layers.add(mode.hardware_overrides[key].args, mode.hardware_overrides[key].env)
    for key in keys:
        if key in feature.hardware_overrides:
            layers.add(feature.hardware_overrides[key].args, feature.hardware_overrides[key].env)


def _docker_image(recipe: Recipe, selection: Selection) -> str | None:
    hardware = selection.hardware
    if hardware is None:
        return None
    declared = recipe.variants[selection.variant].docker_image or recipe.model.docker_image
    if isinstance(declared, str):
        return declared
    if isinstance(declared, dict):
        for key in override_keys(hardware):
            image = declared.get(key)
            if isinstance(image, str):
                return image
            if isinstance(image, dict) and image:
                return next(iter(image.values()))
    return hardware.docker_image


SPECULATIVE_CONFIG_FLAG = "--speculative-config"


def configuration_selection(config: Configuration, hardware: Hardware | None, depth: int | None = None) -> Selection:
    """A measured configuration (an overlay's) as a Selection: its variant, card, TP, features,
    env switches, and its speculative config (at `depth` tokens when given) as the last flag."""
    extra = list(config.extra_args)
    if config.speculative_config is not None:
        spec = dict(config.speculative_config)
        if depth is not None:
            spec["num_speculative_tokens"] = depth
        extra += [SPECULATIVE_CONFIG_FLAG, json.dumps(spec, separators=(",", ":"), sort_keys=True)]
    return Selection(
        variant=config.variant,
        hardware=hardware,
        tensor_parallel_size=config.tp,
        features=config.features,
        extra_args=extra,
        extra_env=config.env,
        drop_args=config.drop_args,
    )


def compose_configuration(
    recipe: Recipe, name: str, hardware: Hardware | None, *, depth: int | None = None, source: str = "overlay"
) -> LaunchCommand:
    return compose(recipe, configuration_selection(recipe.configurations[name], hardware, depth), source=source)
