"""The `{% docs %}` block parser and the `{{ doc('name') }}` renderer of descriptions (config.doc_blocks)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelinez.config.doc_blocks import (
    collect_doc_blocks,
    doc_reference_problems,
    parse_doc_blocks,
    render_description,
)
from pipelinez.core.diagnostics import Place

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
# Markdown without a tag of its own ('{%' starts one)
TEXTS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40).filter(lambda t: "{%" not in t)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(NAMES, TEXTS, TEXTS), min_size=1, max_size=5, unique_by=lambda b: b[0]))
def test_every_block_comes_back_with_its_stripped_text_and_line(
    blocks: list[tuple[str, str, str]],
) -> None:
    text, lines = "", []
    for name, body, between in blocks:
        text += between.replace("{", "(") + "\n"
        lines.append(text.count("\n") + 1)
        text += f"{{% docs {name} %}}{body}{{% enddocs %}}"
    found, problems = parse_doc_blocks(text, "docs/a.md")
    assert problems == []
    assert [(b.name, b.text, b.place.line) for b in found] == [
        (name, body.strip(), line) for (name, body, _), line in zip(blocks, lines, strict=True)
    ]


def test_whitespace_control_and_spacing_are_accepted() -> None:
    text = "{%-docs  a-%}\n  one\n{%- enddocs -%}{%docs b%}two{%enddocs%}"
    found, problems = parse_doc_blocks(text, "f.md")
    assert problems == []
    assert [(b.name, b.text) for b in found] == [("a", "one"), ("b", "two")]


def test_other_tags_are_text_and_a_docs_prefix_is_no_tag() -> None:
    text = "{% raw %}{% docs a %}{% if x %}{% endif %}{% enddocs %}{% docsx %}"
    found, problems = parse_doc_blocks(text, "f.md")
    assert problems == []
    assert [(b.name, b.text) for b in found] == [("a", "{% if x %}{% endif %}")]


def test_malformed_blocks_are_pz0125_each_at_its_line() -> None:
    text = "\n".join(
        [
            "{% docs %}x{% enddocs %}",  # 1: no name
            "{% docs 9lives %}x{% enddocs %}",  # 2: not a name
            "{% enddocs %}",  # 3: closes nothing
            "{% docs a %}",  # 4: opened ...
            "{% docs b %}kept{% enddocs foo %}",  # 5: ... b inside a; enddocs with words
            "{% docs c %}never closed",  # 6
        ]
    )
    found, problems = parse_doc_blocks(text, "docs/x.md")
    assert found == []
    assert [(d.code, d.place.file, d.place.line) for d in problems] == [
        ("PZ0125", "docs/x.md", line) for line in (1, 2, 3, 4, 5, 6)
    ]
    messages = [d.message for d in problems]
    assert "the block has no name" in messages[0] and "'9lives' is not a block name" in messages[1]
    assert "opens inside block 'a' (line 4)" in messages[3] and "has 'foo'" in messages[4]
    assert "block 'c' has no {% enddocs %}" in messages[5]


def test_a_name_held_twice_is_pz0125_naming_both_places() -> None:
    blocks, problems = collect_doc_blocks(
        {"docs/b.md": "\n{% docs x %}second{% enddocs %}", "docs/a.md": "{% docs x %}first{% enddocs %}"}
    )
    assert blocks["x"].text == "first"
    assert [(d.code, d.place.file, d.place.line) for d in problems] == [("PZ0125", "docs/b.md", 2)]
    assert "docs/a.md:1 and docs/b.md:2" in problems[0].message


def test_render_replaces_each_literal_doc_call_and_leaves_the_rest() -> None:
    blocks, _ = collect_doc_blocks({"d.md": "{% docs a %}A{% enddocs %}{% docs b %}B{% enddocs %}"})
    assert render_description("x {{ doc('a') }} y {{doc(\"b\")}} {{ env('Z') }}", blocks) == (
        "x A y B {{ env('Z') }}"
    )
    assert render_description("no calls: a document", blocks) == "no calls: a document"


def test_unknown_and_non_literal_doc_calls_are_pz0124() -> None:
    blocks, _ = collect_doc_blocks({"d.md": "{% docs orders_status %}S{% enddocs %}"})
    place = Place("sources/s.yml", 4, 20)
    problems = doc_reference_problems(
        "{{ doc('order_status') }} {{ doc(x) }} {{ doc('a') | upper }} {{ doc('orders_status') }}",
        blocks,
        place,
        "dataset 's.d'",
    )
    assert [(d.code, d.place) for d in problems] == [("PZ0124", place)] * 3
    assert "did you mean 'orders_status'?" in problems[0].message
    assert "{{ doc(x) }}" in problems[1].message and "{{ doc('a') | upper }}" in problems[2].message
    assert doc_reference_problems("a doc about docs(", blocks, place, "x") == []
