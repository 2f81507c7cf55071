"""Dates: when a packet says its figures were made, and the day it is judged as of.

A measured packet's day is its `created` (when its campaign finished); an imported packet's are
its source's: `published` (when the source printed the figures) and `retrieved` (when the
importer read them and sealed the transcription). Each is a claim, and each is checked:

- a measured packet says when it was made, an imported one when its source published and when it
  was read; none of these days lies in the future, and a source is read after it is published,
  for a screened packet too wherever it names them (it is signed as of its `retrieved` day);
- no packet is dated before its model existed (the `released` day of the catalog's facts about
  the model, catalog/recipes/model_facts.py): a measurement made, or a page published, before the
  model was public did not happen as written.

What a signature vouches for (catalog/packets/signing.py) is judged as of `signed_day`: a
measurer key vouches for the campaigns it measured while it was valid, so a measured packet is
judged as of its `created`; an importer key vouches for the transcriptions it made while valid, so
an imported packet is judged as of its `retrieved` day, never its source's `published` day (an
importer key made today can transcribe a page printed last year, but not a page it claims to have
read before it existed). A key that expires later still vouches for what it signed while valid; a
revoked key for nothing. The figures themselves are judged as of `published`: the model must have
existed by then.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from catalog.model.packet import Packet
from catalog.recipes.recipe import Recipe

Problem = tuple[str, str]

CLOCK_SKEW = timedelta(minutes=10)
"""How far in the future `created` may be: the measuring host's clock may run ahead of this one."""


def signed_day(packet: Packet) -> date | None:
    """The day a packet's signature is judged as of: its campaign's, or its transcription's."""
    source = packet.provenance.source
    if packet.provenance.kind != "measured" and source is not None and source.retrieved is not None:
        return source.retrieved
    return packet.created.date() if packet.created is not None else None


def date_problems(packet: Packet, now: datetime) -> list[Problem]:
    """The dates a packet needs are there, in order, and none in the future."""
    problems: list[Problem] = []
    created = packet.created
    if created is not None:
        aware = created if created.tzinfo is not None else created.replace(tzinfo=UTC)
        if aware > now + CLOCK_SKEW:
            problems.append(
                (
                    "created",
                    f"{aware.isoformat()} is in the future (now {now.isoformat(timespec='seconds')},"
                    f" {int(CLOCK_SKEW.total_seconds() // 60)} minutes of clock skew allowed)",
                )
            )
    elif packet.provenance.kind == "measured":
        problems.append(
            (
                "created",
                "a measured packet says when its campaign finished: its key's validity and its model's existence"
                " are judged as of that day",
            )
        )
    source = packet.provenance.source
    if packet.provenance.kind == "measured" or source is None:
        return problems
    # an imported packet must name its source's days; a screened one may not have them (a local
    # `vllm bench serve` result has no publication), but the days it names are held as an import's
    today = (now + CLOCK_SKEW).date()
    for name, day in (("published", source.published), ("retrieved", source.retrieved)):
        if day is None:
            if packet.provenance.kind == "imported":
                problems.append(
                    (
                        f"provenance.source.{name}",
                        "an imported packet says when its source published its figures (published) and when they"
                        " were read (retrieved): it is judged as of those days",
                    )
                )
        elif day > today:
            problems.append((f"provenance.source.{name}", f"{day} is in the future (today is {now.date()})"))
    if source.published is not None and source.retrieved is not None and source.retrieved < source.published:
        problems.append(
            (
                "provenance.source.retrieved",
                f"{source.retrieved} is before the source was published ({source.published})",
            )
        )
    return problems


def model_date_problems(packet: Packet, recipe: Recipe | None) -> list[Problem]:
    """No packet is dated before its model existed: a campaign's `created`, a source's `published`."""
    facts = recipe.facts if recipe is not None else None
    if facts is None:
        return []
    released = facts.released.value
    source = packet.provenance.source
    days = [("created", packet.created.date() if packet.created is not None else None)]
    if source is not None:
        days.append(("provenance.source.published", source.published))
    return [
        (
            field,
            f"{day} is before model {packet.identity.model.slug!r} existed (released {released}: data/overlays/"
            f"{packet.identity.model.slug}.yaml facts.released)",
        )
        for field, day in days
        if day is not None and day < released
    ]
