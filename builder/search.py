"""The search over every family: a Pagefind index built into the site (`pagefind/`), searched in
the reader's browser by Pagefind's own script; a static host serves it, no server runs.

Pagefind (PyPI `pagefind[bin]`, which ships its binary) indexes one record per family, made from
the family's index card: its name, maker and description, the cards, quantizations, methods,
evidence grade and state it was measured with, as words. Not as Pagefind filters: with any filter
its index files differ from one run to the next (pagefind 1.5.2), and a build must give the same
bytes for the same inputs; the index's pre-rendered filter pages and its page script filter.
Records go to the binary's service mode, whose
protocol is the one Pagefind's own Python wrapper speaks (pagefind 1.5.2, `pagefind/service/`:
each message base64 of a JSON object, ended by a comma, answered in kind on stdout). It is spoken
here without the wrapper, which polls for each answer every 100 ms: 109 s for 1,000 families
against under a second here. The same records give the same bytes (tests/builder/test_search.py).
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from collections.abc import Iterable, Iterator
from typing import IO, Any

from pagefind_bin import get_executable

from builder import routes
from builder.views.index import FamilyCard

FOLDER = "pagefind"
LANGUAGE = "en"


def search_files(cards: Iterable[FamilyCard]) -> dict[str, bytes]:
    """Pagefind's script, styles and index of every family, by their path in the site."""
    records = [_record(card) for card in sorted(cards, key=lambda c: c.slug)]
    with subprocess.Popen(
        [str(get_executable()), "--service"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as service:
        assert service.stdin is not None and service.stdout is not None
        try:
            answers = _answers(service.stdout)
            _send(service.stdin, 0, {"type": "NewIndex", "config": {"force_language": LANGUAGE}})
            index = _answer(answers, 0)["index_id"]
            writer = threading.Thread(target=_send_all, args=(service.stdin, index, records))  # or the pipes fill
            writer.start()
            for number in range(1, len(records) + 1):
                _answer(answers, number)
            files = _answer(answers, len(records) + 1)["files"]
            writer.join()
        finally:
            service.kill()
    files.sort(key=lambda file: file["path"])
    return {f"{FOLDER}/{file['path']}": base64.b64decode(file["content"]) for file in files}


def _record(card: FamilyCard) -> dict[str, Any]:
    words = [card.title, card.provider, card.description, card.headline_detail]
    words += sorted({*card.hardware_names, *card.recipe_hardware_names})
    words += [*card.quantizations, *card.spec_methods, f"evidence {card.grade}", card.state_label]
    return {
        "url": routes.family_page(card.slug),
        "content": " · ".join(w for w in words if w),
        "language": LANGUAGE,
        "meta": {"title": card.title},
        "filters": None,
        "sort": None,
    }


def _send_all(stream: IO[bytes], index: int, records: list[dict[str, Any]]) -> None:
    for number, record in enumerate(records, start=1):
        _send(stream, number, {"type": "AddRecord", "index_id": index, **record})
    _send(stream, len(records) + 1, {"type": "GetFiles", "index_id": index})


def _send(stream: IO[bytes], number: int, payload: dict[str, Any]) -> None:
    stream.write(base64.b64encode(json.dumps({"message_id": number, "payload": payload}).encode()) + b",")
    stream.flush()


def _answers(stream: IO[bytes]) -> Iterator[dict[str, Any]]:
    pending = b""
    while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]
        pending += chunk
        *complete, pending = pending.split(b",")
        for message in complete:
            yield json.loads(base64.b64decode(message))


def _answer(answers: Iterator[dict[str, Any]], number: int) -> dict[str, Any]:
    """The answer to message `number` (the service answers in order)."""
    answer = next(answers, None)
    if answer is None or answer.get("message_id") != number or answer["payload"]["type"] == "Error":
        raise RuntimeError(f"pagefind's service failed at message {number}: {answer}")
    payload: dict[str, Any] = answer["payload"]
    return payload
