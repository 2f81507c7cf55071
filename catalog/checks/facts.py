"""A packet's model is the catalog's: facts come from data/, never from the packet.

A packet names its model (recipe slug and variant). What that model is — its architecture,
vocabulary, precision, and so its weight bytes — the catalog already knows: the recipe variant's
precision and the overlay's sourced facts (catalog/recipes/model_facts.py). A packet may record
what its server loaded (`identity.model.config`, `weight_bytes`, `weight_files`), and every such
claim must agree with the catalog; a packet that declares a smaller model to raise its own
ceiling, a cheaper precision, or token ids the real vocabulary cannot hold is refused, naming the
field and both values. A real model the catalog has no facts for cannot be checked, so its packet
is refused; only a synthetic model (the CPU demo, made locally) goes by what its packet declares.

Each check returns `(field, message)` problems, like catalog.checks.consistency's.
- `facts_problems(packet, recipe)`: against the catalog's facts (needs data/);
- `file_facts_problems(packet)`: the packet's own records of its checkpoint agree with each other.
"""

from __future__ import annotations

from collections.abc import Sequence

from catalog.model.arrays import largest
from catalog.model.packet import Packet, weight_file_bytes
from catalog.projection.facts import PACKET_FIELDS, catalog_facts, resolve_architecture
from catalog.projection.physics import layout_from
from catalog.projection.precision import SCHEMES, QuantScheme, scheme_for
from catalog.recipes.recipe import Recipe

Problem = tuple[str, str]

WEIGHT_BYTES_SLACK = 0.1
"""How far a checkpoint's recorded weight bytes may fall outside the span its precision allows.

The span runs from every parameter at the scheme's stored bits (what no checkpoint goes below:
llm-compressor keeps embeddings, lm_head and more at 16 bits) to every parameter at 16 bits (what
no checkpoint of that precision goes above). Which components a build keeps at 16 bits is not
published for every repository, hence the span; the slack covers scale tensors, buffers and the
rounding of the parameter count."""

PARAMETER_SLACK = 0.15
"""How far a declared parameter count may differ from the one the catalog's facts give."""


def facts_problems(packet: Packet, recipe: Recipe | None) -> list[Problem]:
    """Every claim the packet makes about its model, against the catalog's facts about it."""
    if recipe is None:
        return []  # the loader reports the missing recipe
    model = packet.identity.model
    problems = _precision_problems(packet, recipe)
    table = catalog_facts(recipe)
    if not table.known():
        if not model.synthetic:
            problems.append(
                (
                    "identity.model.slug",
                    f"the catalog has no facts for model {model.slug!r} (its overlay data/overlays/{model.slug}.yaml"
                    " has no `facts`), so nothing the packet says about its model can be checked; only a synthetic"
                    " model (identity.model.synthetic) goes by what its packet declares",
                )
            )
    else:
        problems += _declared_problems(packet, recipe)
        problems += _size_problems(packet, recipe)
    problems += _vocabulary_problems(packet, recipe)
    return problems


def _precision_problems(packet: Packet, recipe: Recipe) -> list[Problem]:
    """The quantization is the recipe variant's precision, and its label says the same."""
    model = packet.identity.model
    problems: list[Problem] = []
    scheme = scheme_for(model.quantization)
    if model.variant is not None and model.variant in recipe.variants:
        precision = recipe.variants[model.variant].precision
        expected = scheme_for(precision)
        same = (scheme.id == expected.id) if scheme and expected else model.quantization.lower() == precision.lower()
        if not same:
            problems.append(
                (
                    "identity.model.quantization",
                    f"is {model.quantization!r}, but recipe {model.slug!r} variant {model.variant!r} has precision"
                    f" {precision!r}" + (f" ({expected.label})" if expected else ""),
                )
            )
    if not _label_names(model.quantization_label, model.quantization, scheme):
        shown = f"{scheme.label!r} or {model.quantization!r}" if scheme else repr(model.quantization)
        problems.append(
            (
                "identity.model.quantization_label",
                f"is {model.quantization_label!r}, but quantization {model.quantization!r} is shown as {shown}",
            )
        )
    return problems


def _label_names(label: str, quantization: str, scheme: QuantScheme | None) -> bool:
    """The label is the quantization's, its scheme's label or another name of that scheme (FP8 for FP8-dynamic)."""
    names = {quantization.lower()}
    if scheme is not None:
        names |= {scheme.label.lower(), *(name for name, other in SCHEMES.items() if other is scheme)}
    return label.lower() in names


def _declared_problems(packet: Packet, recipe: Recipe) -> list[Problem]:
    """Each fact identity.model.config declares equals the catalog's."""
    config = packet.identity.model.config
    if config is None:
        return []
    table = catalog_facts(recipe)
    where = f"data/overlays/{packet.identity.model.slug}.yaml facts"
    problems: list[Problem] = []
    for name in PACKET_FIELDS:
        declared, known = getattr(config, name), getattr(table, name)
        if declared is not None and known is not None and declared != known.value:
            problems.append(
                (
                    f"identity.model.config.{name}",
                    f"is {declared!r}, but the catalog's facts for {packet.identity.model.slug!r} say"
                    f" {known.value!r} ({where}.{name})",
                )
            )
    layout = layout_from(table)
    if config.parameters is not None and layout is not None:
        expected = layout.checkpoint_parameters
        if abs(config.parameters - expected) > PARAMETER_SLACK * expected:
            problems.append(
                (
                    "identity.model.config.parameters",
                    f"is {config.parameters:,}, but the catalog's facts for {packet.identity.model.slug!r} give"
                    f" {expected:,} parameters (± {PARAMETER_SLACK:.0%})",
                )
            )
    return problems


def _size_problems(packet: Packet, recipe: Recipe) -> list[Problem]:
    """The checkpoint's weight bytes fit the model's parameters at the variant's precision."""
    model = packet.identity.model
    layout = layout_from(catalog_facts(recipe))
    scheme = scheme_for(model.quantization)
    if model.weight_bytes is None or layout is None or scheme is None:
        return []
    parameters = layout.checkpoint_parameters
    least = parameters * min(scheme.weight_bits, 16) / 8 * (1 - WEIGHT_BYTES_SLACK)
    most = parameters * 2 * (1 + WEIGHT_BYTES_SLACK)
    if least <= model.weight_bytes <= most:
        return []
    return [
        (
            "identity.model.weight_bytes",
            f"is {model.weight_bytes:,} B, but {parameters:,} parameters of {model.slug!r} (the catalog's facts) at"
            f" {scheme.label} take {least:,.0f} to {most:,.0f} B",
        )
    ]


def _vocabulary_problems(packet: Packet, recipe: Recipe | None) -> list[Problem]:
    """Every token id lies in the model's vocabulary: the catalog's, or a synthetic model's own."""
    vocab_fact = resolve_architecture(packet, recipe).vocab_size
    if vocab_fact is None:
        return []
    vocab = vocab_fact.value
    rows = [row.token_ids for arm in packet.arms for server in arm.servers for row in server.rows]
    top = largest(rows)
    if top is None or top < vocab:  # unsigned: nothing below 0; every row at once, at C speed
        return []
    problems: list[Problem] = []
    for i, arm in enumerate(packet.arms):
        for j, server in enumerate(arm.servers):
            for k, row in enumerate(server.rows):
                problem = _outside(row.token_ids, vocab, f"arms[{i}].servers[{j}].rows[{k}]", vocab_fact.origin)
                if problem:
                    problems.append(problem)
    return problems


def _outside(ids: Sequence[int], vocab: int, where: str, origin: str) -> Problem | None:
    if not ids or max(ids) < vocab:  # unsigned: nothing below 0
        return None
    position, token = next((p, t) for p, t in enumerate(ids) if t >= vocab)
    whose = "the catalog's" if origin == "model-table" else "the synthetic model's declared"
    return (
        f"{where}.token_ids[{position}]",
        f"token id {token:,} is outside the vocabulary: {whose} vocab_size is {vocab:,}",
    )


def file_facts_problems(packet: Packet) -> list[Problem]:
    """`weight_bytes` is the sum of the weight files listed, and `config.config_sha256` the hash of
    the config.json listed: one checkpoint, not two stories about it."""
    model = packet.identity.model
    problems: list[Problem] = []
    if model.weight_files and model.weight_bytes is not None:
        listed = weight_file_bytes(model.weight_files)
        if listed != model.weight_bytes:
            problems.append(
                (
                    "identity.model.weight_bytes",
                    f"is {model.weight_bytes:,} B, but the weight files listed in weight_files hold {listed:,} B",
                )
            )
    config_file = next((f for f in model.weight_files if f.name == "config.json"), None)
    declared = model.config.config_sha256 if model.config is not None else None
    if config_file is not None and declared is not None and declared != config_file.sha256:
        problems.append(
            (
                "identity.model.config.config_sha256",
                f"is {declared}, but weight_files lists config.json with sha256 {config_file.sha256}",
            )
        )
    return problems
