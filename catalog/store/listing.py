"""A packet's line in the catalog's listing: the few facts about it that pages other than its own
family's read.

The index, hardware pages, sitemap, API and recipe pages read of every packet only its family,
card, state, signature, title, dates and image. The builder holds every packet's listing (and
remembers them for the next build: builder/memory.py) while it holds a family's packets whole only
where that family's pages are made (builder/assemble.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from catalog.model.packet import Packet, State


# Not slotted: a build remembers 20,000 listings (builder/memory.py), and a slotted dataclass pickles
# through Python's per-object getstate and setstate (0.31 s a round trip at 1,000 x 20), a plain one
# through its __dict__ in C (0.20 s).
@dataclass(frozen=True)
class Listed:
    id: str
    slug: str  # the model family
    hardware: str  # the card's id
    quantization_label: str
    state: State
    title: str
    created: datetime | None
    sha256: str
    signed: bool
    reproduces: str | None
    image: str | None  # the docker image its servers ran, and that image's digest (recipe pages)
    image_digest: str | None
    unpaired_arms: tuple[str, ...]  # published arms without a fresh-server pair (catalog/checks/lint.py)
    host_key: str | None = None  # signed by this host's own key, not listed in data/keys.yaml

    @classmethod
    def of(cls, packet: Packet) -> Listed:
        identity = packet.identity
        return cls(
            id=packet.id,
            slug=identity.model.slug,
            hardware=identity.host.hardware,
            quantization_label=identity.model.quantization_label,
            state=packet.state,
            title=packet.title,
            created=packet.created,
            sha256=packet.sha256,
            signed=packet.signed,
            reproduces=packet.reproduces,
            image=identity.runtime.image,
            image_digest=identity.runtime.image_digest,
            unpaired_arms=tuple(a.id for a in packet.arms if a.state.published and len(a.server_values) < 2),
            host_key=packet.seal.host_key,
        )
