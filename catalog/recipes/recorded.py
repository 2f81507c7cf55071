"""What an arm recorded of the facts its command states (catalog/recipes/command_facts.py), and
every field where a shown command disagrees with it, in words a reader can act on.

`recorded_facts` reads an arm's facts from its recorded configuration (never from its argv, so a
recorded command that contradicts its own arm is caught), all but the rest of the speculative
config, which an arm records in its command alone; `disagreements` names every field where a
command's facts and the arm's differ; `unrecorded` lists what a command states that the arm did
not record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from catalog.model.packet import Arm, Packet
from catalog.model.secrets import REDACTED
from catalog.recipes.command_facts import (
    CONFIG_FILE_FLAG,
    EAGER_FLAG,
    KV_CACHE_DEFAULT,
    KV_CACHE_DTYPE_FLAG,
    LEVEL_SHORT,
    CommandFacts,
    Image,
    Weights,
    command_facts,
)


@dataclass(frozen=True)
class Disagreement:
    """One field where a shown command and the arm's recorded configuration differ."""

    field: str  # "graph mode", "image", "env", "speculative method", "speculative depth", "speculative config",
    # "TP", "max-model-len", "quantization", "KV cache dtype"
    shown: str
    recorded: str
    config_field: str  # where in the arm's record the fact lives (arms[i].config.<this>)
    packet_field: str | None = None  # where the fact lives when it is the packet's, not the arm's

    @property
    def where(self) -> str:
        """The recorded field, relative to the arm (`config.<field>`) or the packet's own."""
        return self.packet_field or f"config.{self.config_field}"

    def words(self, shown_is: str = "the command", measured_by: str = "the arm") -> str:
        return f"{shown_is} {self.shown}; {measured_by} measured {self.recorded}"


def graph_capture_words(argv: Sequence[str]) -> str:
    """How the runner records an arm's graph capture from the command it launches, in words that
    `recorded_eager` reads back as the command's own `eager` fact."""
    if not command_facts(argv).eager:
        return "vLLM default"
    if EAGER_FLAG in argv:
        return f"off ({EAGER_FLAG})"
    return f"off (no graph capture: {LEVEL_SHORT}0 or a cudagraph_mode of NONE)"


def recorded_eager(graph_capture: str | None) -> bool | None:
    """An arm's graph capture as recorded: eager ("off (--enforce-eager)", "eager"), graph capture
    on ("vLLM default", "full decode-only XPU graph capture"), or None when not recorded."""
    if graph_capture is None:
        return None
    words = graph_capture.lower()
    return "eager" in words or words.startswith(("off", "none", "disabled"))


def recorded_image(packet: Packet) -> Image | None:
    """The image the packet's servers ran, as precisely as it was recorded (the recipe's tag, and
    the digest it resolved to); None on a local install."""
    runtime = packet.identity.runtime
    if runtime.image is None and runtime.image_pinned is None:
        return None
    named = Image.parse(runtime.image or runtime.image_pinned or "")
    pinned = Image.parse(runtime.image_pinned) if runtime.image_pinned else None
    digest = (pinned.digest if pinned else None) or runtime.image_digest or named.digest
    return Image(pinned.repository if pinned else named.repository, named.tag, digest)


def recorded_kv_cache_dtype(arm: Arm) -> str | None:
    """An arm's KV cache dtype as recorded. The runner records the `--kv-cache-dtype` its command
    set and nothing where it set none (runner/campaign.py), so beside a recorded command an empty
    kv_cache_dtype is vLLM's default "auto"; without one (an imported arm) it is not known."""
    config = arm.config
    if config.kv_cache_dtype is not None:
        return config.kv_cache_dtype
    return KV_CACHE_DEFAULT if (config.argv or config.launch_argv) else None


def recorded_facts(packet: Packet, arm: Arm) -> CommandFacts:
    config = arm.config
    spec_config, spec_field = _recorded_spec_config(arm)
    return CommandFacts(
        eager=recorded_eager(config.graph_capture),
        image=recorded_image(packet),
        env=dict(config.env),
        spec_method=config.spec_method,
        spec_depth=config.spec_depth,
        tp=config.tensor_parallel_size,
        max_model_len=config.max_model_len,
        kv_cache_dtype=recorded_kv_cache_dtype(arm),
        weights=Weights.of(packet.identity.model.quantization),
        spec_config=spec_config,
        spec_config_field=spec_field,
    )


def _recorded_spec_config(arm: Arm) -> tuple[tuple[tuple[str, str], ...] | None, str]:
    """The speculative config's other keys (its draft model, ...) as the arm recorded them, and
    where: its config records its method and depth only, its command (the portable `argv`, else
    `launch_argv`) the rest, so every other command of the arm, and every command shown beside it,
    must run the same; None where the arm recorded no command (an imported result)."""
    for field_name in ("argv", "launch_argv"):
        argv = getattr(arm.config, field_name)
        if argv:
            return command_facts(argv).spec_config, field_name
    return None, "argv"


def graph_words(eager: bool | None, recorded: str | None = None) -> str:
    if eager is None:
        return "an unrecorded graph mode"
    if eager:
        return f"eager mode ({EAGER_FLAG})"
    return f"graph capture ({recorded})" if recorded and "default" not in recorded else "graph capture"


def image_words(image: Image | None, label: str | None = None) -> str:
    if image is None:
        return "no image"
    where = f"{label}: " if label and label != str(image) else ""
    return f"the image {where}{image}"


def same_image(shown: Image, recorded: Image, *, by_tag: bool = False) -> bool:
    """Digests decide when both are pinned; `by_tag`: a fresh measurement pulls the tag again, so
    its repository and tag are all a shown `make measure` line can promise."""
    if by_tag:
        return (shown.repository, shown.tag) == (recorded.repository, recorded.tag)
    if shown.digest and recorded.digest:
        return shown.repository == recorded.repository and shown.digest == recorded.digest
    return str(shown) == str(recorded)


def disagreements(
    shown: CommandFacts, recorded: CommandFacts, *, graph_label: str | None = None, by_tag: bool = False
) -> list[Disagreement]:
    """Every fact the shown command states that the arm recorded otherwise. A fact the arm did not
    record (None) or the command cannot state (a local command's image) is not compared."""
    found: list[Disagreement] = []
    if recorded.eager is not None and shown.eager is not None and shown.eager != recorded.eager:
        found.append(
            Disagreement(
                "graph mode",
                "runs " + graph_words(shown.eager),
                graph_words(recorded.eager, graph_label),
                "graph_capture",
            )
        )
    if (
        shown.image is not None
        and recorded.image is not None
        and not same_image(shown.image, recorded.image, by_tag=by_tag)
    ):
        unpullable = "" if recorded.image.pullable else ", which no registry serves by digest"
        found.append(
            Disagreement(
                "image", f"runs {shown.image}", f"on {recorded.image}{unpullable}", "image", "identity.runtime"
            )
        )
    found.extend(_env_disagreements(shown.env, recorded.env))
    if shown.spec_method != recorded.spec_method:
        found.append(
            Disagreement(
                "speculative method",
                f"uses {shown.spec_method or 'no speculative decoding'}",
                recorded.spec_method or "no speculative decoding",
                "spec_method",
            )
        )
    if shown.spec_depth != recorded.spec_depth:
        found.append(
            Disagreement(
                "speculative depth",
                f"drafts {shown.spec_depth} tokens per step",
                f"depth {recorded.spec_depth}",
                "spec_depth",
            )
        )
    if shown.spec_config is not None and recorded.spec_config is not None:
        found.extend(_spec_config_disagreements(shown.spec_config, recorded.spec_config, recorded.spec_config_field))
    if shown.tp != recorded.tp:
        found.append(Disagreement("TP", f"spans {shown.tp} card(s)", f"on {recorded.tp}", "tensor_parallel_size"))
    if (shown.pp, shown.pcp, shown.dp) != (recorded.pp, recorded.pcp, recorded.dp):
        # an arm records its tensor parallel size only (ArmConfig.tensor_parallel_size, by which the
        # catalog ranks and labels it): a pipeline, prefill context or data parallel size above 1
        # spans cards the arm does not record
        found.append(
            Disagreement(
                "cards",
                shown.cards_words(),
                f"{recorded.cards} card(s) (config.tensor_parallel_size {recorded.tp}: the catalog records tensor"
                " parallelism only, no pipeline, prefill context or data parallel size)",
                "tensor_parallel_size",
            )
        )
    for words in shown.unread:
        found.append(
            Disagreement(
                "config file" if words.startswith(f"reads its flags from {CONFIG_FILE_FLAG}") else "unread flag",
                words,
                "only the flags its command shows (config.argv, config.launch_argv): none of the command can be"
                " checked against them",
                "argv",
            )
        )
    if (
        recorded.max_model_len is not None
        and shown.max_model_len is not None
        and shown.max_model_len != recorded.max_model_len
    ):
        found.append(
            Disagreement(
                "max-model-len",
                f"sizes the server for {shown.max_model_len} tokens",
                f"with {recorded.max_model_len}",
                "max_model_len",
            )
        )
    if (
        shown.quantization is not None
        and recorded.weights is not None
        and shown.quantization.lower() not in recorded.weights.methods
    ):
        found.append(
            Disagreement(
                "quantization",
                f"quantizes the weights with --quantization {shown.quantization}",
                recorded.weights.words(),
                "quantization",
                "identity.model.quantization",
            )
        )
    if (
        shown.kv_cache_dtype is not None
        and recorded.kv_cache_dtype is not None
        and shown.kv_cache_dtype != recorded.kv_cache_dtype
    ):
        found.append(
            Disagreement(
                "KV cache dtype",
                kv_words(shown.kv_cache_dtype),
                f"kv_cache_dtype {recorded.kv_cache_dtype!r}",
                "kv_cache_dtype",
            )
        )
    return found


def unrecorded(shown: CommandFacts, recorded: CommandFacts) -> list[Disagreement]:
    """What the shown command sets that the arm did not record at all (an imported source that
    printed no such fact): not a disagreement a check could refuse, but a difference a reader of
    the command must see beside the source's figure."""
    found: list[Disagreement] = []
    if recorded.eager is None and shown.eager:
        found.append(Disagreement("graph mode", "runs " + graph_words(True), graph_words(None), "graph_capture"))
    if recorded.max_model_len is None and shown.max_model_len is not None:
        found.append(
            Disagreement(
                "max-model-len",
                f"sizes the server for {shown.max_model_len} tokens",
                "with a length it did not record",
                "max_model_len",
            )
        )
    if recorded.spec_config is None and shown.spec_config:
        settings = ", ".join(f"{key} {value}" for key, value in shown.spec_config)
        found.append(
            Disagreement(
                "speculative config", f"sets {settings} in its speculative config", "settings it did not record", "argv"
            )
        )
    if recorded.kv_cache_dtype is None and shown.kv_cache_dtype not in (None, KV_CACHE_DEFAULT):
        found.append(
            Disagreement(
                "KV cache dtype",
                kv_words(str(shown.kv_cache_dtype)),
                "a KV cache dtype it did not record",
                "kv_cache_dtype",
            )
        )
    return found


def _spec_config_disagreements(
    shown: Sequence[tuple[str, str]], recorded: Sequence[tuple[str, str]], field_name: str
) -> list[Disagreement]:
    """Key for key: a key one side sets and the other does not, or sets to another value."""
    mine, theirs = dict(shown), dict(recorded)
    found = []
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) == theirs.get(key):
            continue
        sets = f"sets {key} {mine[key]}" if key in mine else f"sets no {key}"
        found.append(
            Disagreement(
                "speculative config",
                f"{sets} in its speculative config",
                f"with {key} {theirs[key]}" if key in theirs else f"without {key}",
                field_name,
            )
        )
    return found


def kv_words(dtype: str) -> str:
    if dtype == KV_CACHE_DEFAULT:
        return f"sets no {KV_CACHE_DTYPE_FLAG} (vLLM's default {KV_CACHE_DEFAULT!r}: the model's own dtype)"
    return f"sets {KV_CACHE_DTYPE_FLAG} {dtype}"


def _env_disagreements(shown: Mapping[str, str], recorded: Mapping[str, str]) -> list[Disagreement]:
    found = []
    for name in sorted(set(shown) | set(recorded)):
        if REDACTED in (shown.get(name), recorded.get(name)):
            continue  # a credential: recorded redacted, supplied by the host that runs it
        if name not in shown:
            found.append(Disagreement("env", f"does not set {name}", f"with {name}={recorded[name]}", "env"))
        elif name not in recorded:
            found.append(Disagreement("env", f"sets {name}={shown[name]}", f"without {name}", "env"))
        elif shown[name] != recorded[name]:
            found.append(Disagreement("env", f"sets {name}={shown[name]}", f"with {name}={recorded[name]}", "env"))
    return found
