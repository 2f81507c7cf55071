"""A listed key cannot publish a lie about a concurrency or context ladder (tests/adversarial/
test_listed_key.py's harness): a lab seals, with its listed key, a campaign carrying a ladder no
run of runner/ladders.py gives, and `python -m catalog.verify` and `python -m builder build` refuse
each, published and with `--allow-unsigned`, by an error line naming the packet and the field; the
same lab's honest ladders are accepted by both (the controls).

- 4 users "identical to the oracle" with 2,048 completion tokens, where the oracle's rows for the
  prompts they send hold 4 x 120 = 480: refused at the level's completion_tokens
  (catalog/checks/workload.py `concurrency_oracle_problems`);
- a level identical to the oracle that carries the divergence cause "speculative" (the project's
  seal refuses to make it, so the lab writes and signs the bytes): refused at its divergence
  (catalog/model/packet.py `ConcurrencyPoint`);
- a context ladder on the oracle arm whose points claim identical_to_oracle (the runner compares
  only a speculative arm's outputs), 65,536 tokens deep with a faster decode than 1,024: refused at
  identical_to_oracle; a context point of a class the runner never fills context with: refused at
  its content_class. (No "slower with depth" rule: noise makes one unsafe.)
- the speculative arm's context ladder "identical to the oracle" at every depth and class while
  the oracle arm has no context ladder (the runner compares with the oracle's output at the same
  depth and class, and records null where there is none): refused at identical_to_oracle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catalog.model.packet import packet_id
from catalog.packets.canonical import canonical_json, sha256_hex
from catalog.packets.layout import signature_path
from catalog.packets.signing import sign_packet
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import accepted, campaign, lab, lab_key, lab_seal  # noqa: F401 (lab: fixture)

Document = dict[str, Any]
ORACLE = "tp1-mtp0"  # the campaign's oracle arm (its rows: 120 tokens each)
SPEC = "tp1-mtp2"  # its speculative arm, whose G3 names the oracle


def with_ladder(arm: str, kind: str, points: list[Document]) -> Document:
    document = campaign()
    document["ladders"] = [{"arm": arm, "kind": kind, kind: points}]
    return document


def level(users: int, tokens: int, identical: bool, **more: Any) -> Document:
    return {
        "users": users,
        "completion_tokens": tokens,
        "wall_s": 2.0 + users,
        "identical_to_oracle": identical,
        **more,
    }


def depth(tokens: int, content_class: str, identical: bool | None, tok_s: float, ttft_ms: float) -> Document:
    return {
        "depth_tokens": tokens,
        "content_class": content_class,
        "decode_tok_s": tok_s,
        "ttft_ms": ttft_ms,
        "identical_to_oracle": identical,
    }


def lab_bytes(root: Path, document: Document) -> Path:
    """Bytes `seal` would not make (the models refuse them): canonical, named by their digest,
    signed by the lab's listed measurer key."""
    data = canonical_json(document) + b"\n"
    digest = sha256_hex(data)
    model = document["identity"]["model"]
    path = root / "packets" / f"{packet_id(model['slug'], model['quantization'], digest)}.json"
    path.write_bytes(data)
    signature_path(path).write_bytes(sign_packet(digest, path.name, lab_key(root, "measurer")))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_an_identical_level_with_more_tokens_than_the_oracle_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The sceptic's levels: 512 and 2,048 tokens in 10.8 and 11.5 s (within the card's physics)."""
    points = [level(1, 512, True) | {"wall_s": 10.8}, level(4, 2048, True) | {"wall_s": 11.5}]
    document = with_ladder(ORACLE, "concurrency", points)
    refused(lab, lab_seal(lab, document), options, because="ladders[0].concurrency[1].completion_tokens")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_an_identical_level_with_a_divergence_cause_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """Sealed honestly as a level that differs, then its identical_to_oracle set true and signed."""
    sealed = lab_seal(lab, with_ladder(SPEC, "concurrency", [level(2, 240, False, divergence="speculative")]))
    document = json.loads(sealed.read_bytes())
    sealed.unlink()
    signature_path(sealed).unlink()
    document["ladders"][0]["concurrency"][0]["identical_to_oracle"] = True
    refused(lab, lab_bytes(lab, document), options, because="ladders[0].concurrency[0].divergence")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_the_oracle_arms_context_compared_with_an_oracle_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The sceptic's ladder: deeper context, sooner first token and a 2.25x faster decode, both
    points 'identical to the oracle' on the oracle arm itself."""
    points = [depth(1024, "prose", True, 20.0, 9000.0), depth(65536, "prose", True, 45.0, 7000.0)]
    forged = lab_seal(lab, with_ladder(ORACLE, "context", points))
    refused(lab, forged, options, because="ladders[0].context[0].identical_to_oracle")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_context_class_the_runner_never_fills_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    points = [depth(2048, "prose", True, 40.0, 300.0), depth(2048, "structured", True, 40.0, 310.0)]
    forged = lab_seal(lab, with_ladder(SPEC, "context", points))
    refused(lab, forged, options, because="ladders[0].context[1].content_class")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_spec_context_point_with_no_oracle_point_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The red team's ladder: the control's speculative context ladder alone, its oracle's gone."""
    points = [depth(2048, c, True, 70.0, 320.0) for c in ("prose", "code", "analysis")]
    forged = lab_seal(lab, with_ladder(SPEC, "context", points))
    refused(lab, forged, options, because="ladders[0].context[0].identical_to_oracle")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_honest_ladders_are_accepted(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The controls: both arms' concurrency levels (16 users wrap past the suite's 12 prompts),
    identical ones holding the oracle rows' tokens and one that differs by speculation; the
    oracle's context ladder with no comparison, the speculative arm's compared with it."""
    document = campaign()
    classes = ("prose", "code", "analysis")
    document["ladders"] = [
        {"arm": ORACLE, "kind": "concurrency", "concurrency": [level(u, 120 * u, True) for u in (1, 2, 4, 16)]},
        {
            "arm": SPEC,
            "kind": "concurrency",
            "concurrency": [level(1, 120, True), level(4, 470, False, divergence="speculative")],
        },
        {"arm": ORACLE, "kind": "context", "context": [depth(2048, c, None, 40.0, 300.0) for c in classes]},
        {"arm": SPEC, "kind": "context", "context": [depth(2048, c, True, 70.0, 320.0) for c in classes]},
    ]
    lab_seal(lab, document)
    accepted(lab, options)
