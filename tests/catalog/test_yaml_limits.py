"""The YAML loader's own limits, each at its edge (tests/adversarial/test_bad_files.py throws the
hostile files at both command lines): the values a document holds are counted as composed when it
has no alias, and walked with every alias expanded when it has one. Every test runs on libyaml's
parser and on PyYAML's in Python (what a PyYAML built without libyaml uses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.errors import CatalogError
from catalog.store import documents
from catalog.store.documents import parse_yaml

HERE = Path("data/models/x.yaml")


@pytest.fixture(autouse=True, params=["libyaml", "python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(documents, "_UniqueKeyLoader", documents.loader_on(documents.PythonParser))
    else:
        from yaml._yaml import CParser  # PyYAML's wheels carry libyaml (yaml.__with_libyaml__)

        monkeypatch.setattr(documents, "_UniqueKeyLoader", documents.loader_on(CParser))
    return str(request.param)


@pytest.fixture
def ten_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "MAX_NODES", 10)


def test_a_document_of_max_nodes_values_loads(ten_values: None) -> None:
    assert parse_yaml("[1, 2, 3, 4, 5, 6, 7, 8, 9]", HERE) == list(range(1, 10))  # the list and its nine


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]",  # no alias: counted as composed
        "a: &x [1, 2, 3]\nb: *x\nc: *x\n",  # 11 values once `x` is expanded twice
    ],
)
def test_a_document_past_max_nodes_values_is_refused(ten_values: None, text: str) -> None:
    with pytest.raises(CatalogError, match="more than 10 values") as refused:
        parse_yaml(text, HERE)
    assert refused.value.file == str(HERE)


def _nested(levels: int) -> str:
    """A mapping, then sequences each inside the last, the innermost holding an empty value: `levels` deep."""
    return "a:\n" + "".join(" " * i + "-\n" for i in range(1, levels - 1))


def test_nesting_is_refused_past_max_depth_and_names_the_line() -> None:
    assert parse_yaml(_nested(documents.MAX_DEPTH), HERE)
    with pytest.raises(CatalogError, match=f"nested deeper than {documents.MAX_DEPTH} levels") as refused:
        parse_yaml(_nested(documents.MAX_DEPTH + 1), HERE)
    assert refused.value.line == documents.MAX_DEPTH  # the empty value on the last line went past


def test_a_key_twice_is_refused() -> None:
    with pytest.raises(CatalogError, match="duplicate key 'a'") as refused:
        parse_yaml("a: 1\nb: 2\na: 3\n", HERE)
    assert refused.value.line == 3


def test_open_brackets_are_refused_in_a_moment() -> None:
    """100,000 open brackets: libyaml gives up on its own, PyYAML's parser in Python at the
    composer's MAX_DEPTH."""
    with pytest.raises(CatalogError, match="invalid YAML"):
        parse_yaml("[" * 100_000, HERE)
