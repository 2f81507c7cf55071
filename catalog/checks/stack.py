"""Whether a reproduction ran the stack its original ran: the same image (or local install), and
each arm with the same graph mode, environment switches, speculative method and depth, card count
and context length. Read from the two packets, never from a flag a runner could leave out: a
reproduction `make reproduce` ran with ALLOW_DIFFERENT_STACK=1 on another stack is labelled
"different stack" wherever it is shown, and never counts as an independent repeat (its numbers
say what another stack does)."""

from __future__ import annotations

from catalog.model.packet import Packet
from catalog.recipes.recorded import disagreements, recorded_facts, recorded_image, same_image

DIFFERENT_STACK = "different stack"


def stack_differences(original: Packet, reproduction: Packet) -> list[str]:
    """What the reproduction ran otherwise than its original, in words; empty: the same stack."""
    found: list[str] = []
    before, after = original.identity.runtime, reproduction.identity.runtime
    if before.platform != after.platform:
        found.append(f"platform {after.platform}, not {before.platform}")
    image_before, image_after = recorded_image(original), recorded_image(reproduction)
    if (image_before is None) != (image_after is None):
        found.append(f"ran {image_after or 'a local vLLM install'}, not {image_before or 'a local vLLM install'}")
    elif image_before is not None and image_after is not None and not same_image(image_after, image_before):
        found.append(f"ran the image {image_after}, not {image_before}")
    if before.version != after.version:
        found.append(f"vLLM {after.version}, not {before.version}")
    if before.package_set_sha256 and after.package_set_sha256 and before.package_set_sha256 != after.package_set_sha256:
        found.append("another set of installed packages (package_set_sha256)")
    arms = {arm.id: arm for arm in original.arms}
    for arm in reproduction.arms:
        if arm.id not in arms:
            continue
        old = recorded_facts(original, arms[arm.id])
        new = recorded_facts(reproduction, arm)
        for difference in disagreements(new, old, graph_label=arms[arm.id].config.graph_capture):
            if difference.field != "image":  # said once, for the whole packet
                found.append(
                    f"arm {arm.id}: {difference.field}: {difference.words('the reproduction', 'the original')}"
                )
    return found
