"""`{% docs name %}` blocks of a project's docs/**/*.md and the `{{ doc('name') }}` calls of descriptions.

A block is dbt's: `{% docs name %}` ... `{% enddocs %}` (`{%-`/`-%}` accepted), its text is what lies between,
stripped of surrounding blank space and shown as written (Markdown; no Jinja is rendered inside it). Text
outside blocks is the file's own and is ignored. Any `description:` (dataset, contract column, output,
sidecar and its columns) may be or contain `{{ doc('name') }}` (one quoted name); it renders as the block's
text. Pure text work, no Jinja: a project with descriptions and no doc() pays nothing here.

Problems are coded: PZ0125 for a block that is malformed (no or a bad name, not closed, nested, an
`enddocs` without its `docs`) or whose name another block holds; PZ0124 for a doc() naming no block or not
written as `{{ doc('name') }}`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pipelinez.config.suggest import did_you_mean
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.sqlnames import is_name

_TAG = re.compile(r"\{%-?\s*(enddocs|docs)(?![\w])(.*?)-?%\}", re.DOTALL)
_LITERAL = r"""'([^'\\\n]*)'|"([^"\\\n]*)\""""
_DOC_CALL = re.compile(rf"\{{\{{-?\s*doc\s*\(\s*(?:{_LITERAL})\s*\)\s*-?\}}\}}")
_EXPRESSION = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_NAMES_DOC = re.compile(r"\bdoc\s*\(")

_MALFORMED_STEP = "write each block as {% docs name %} ... {% enddocs %}, named with letters, digits and _"


@dataclass(frozen=True)
class DocBlock:
    """A `{% docs name %}` block of docs/: its name, Markdown and place."""

    name: str
    text: str  # the block's Markdown, stripped
    place: Place  # file and line of its `{% docs name %}`


def parse_doc_blocks(text: str, file: str) -> tuple[list[DocBlock], list[Diagnostic]]:
    """The blocks of one Markdown file and a PZ0125 for each malformed one (the well-formed are kept)."""
    blocks: list[DocBlock] = []
    problems: list[Diagnostic] = []
    opened: tuple[str, Place, int] | None = None  # name, place, where its text starts

    def place(offset: int) -> Place:
        line = text.count("\n", 0, offset) + 1
        return Place(file, line, offset - (text.rfind("\n", 0, offset) + 1) + 1)

    for match in _TAG.finditer(text):
        tag, rest, here = match.group(1), match.group(2).strip(), place(match.start())
        if tag == "enddocs":
            if opened is None:
                problems.append(_malformed("{% enddocs %} closes no {% docs name %} block", here))
            elif rest:
                problems.append(_malformed(f"{{% enddocs %}} takes nothing, it has '{rest}'", here))
                opened = None
            else:
                name, start_place, start = opened
                if name:
                    blocks.append(DocBlock(name, text[start : match.start()].strip(), start_place))
                opened = None
            continue
        if opened is not None and opened[0]:  # a nameless one is reported already
            problems.append(
                _malformed(
                    f"{{% docs {rest} %}} opens inside block '{opened[0]}' (line {opened[1].line}), "
                    "which has no {% enddocs %} before it",
                    opened[1],
                )
            )
        name = rest if is_name(rest) else ""
        if not name:
            said = f"'{rest}' is not a block name" if rest else "the block has no name"
            problems.append(_malformed(f"{{% docs {rest} %}}: {said}", here))
        opened = (name, here, match.end())
    if opened is not None and opened[0]:  # a nameless one is reported above
        problems.append(_malformed(f"block '{opened[0]}' has no {{% enddocs %}}", opened[1]))
    return blocks, problems


def _malformed(message: str, place: Place) -> Diagnostic:
    return error("PZ0125", message, place=place, next_step=_MALFORMED_STEP)


def collect_doc_blocks(files: Mapping[str, str]) -> tuple[dict[str, DocBlock], list[Diagnostic]]:
    """Every block of the docs files (project-relative path -> text) by name, and every problem: each
    malformed block, and each name held by two blocks (PZ0125, naming both places; the first is kept)."""
    blocks: dict[str, DocBlock] = {}
    problems: list[Diagnostic] = []
    for file, text in sorted(files.items()):
        found, bad = parse_doc_blocks(text, file)
        problems += bad
        for block in found:
            first = blocks.setdefault(block.name, block)
            if first is not block:
                problems.append(
                    error(
                        "PZ0125",
                        f"two blocks are named '{block.name}': "
                        f"{_where(first.place)} and {_where(block.place)}",
                        place=block.place,
                        next_step="rename or remove one of them: a doc() must name exactly one block",
                    )
                )
    return blocks, problems


def _where(place: Place) -> str:
    return f"{place.file}:{place.line}"


def uses_doc(description: str) -> bool:
    """Whether a description calls doc() at all (the cheap test before any other work)."""
    return "doc" in description and _NAMES_DOC.search(description) is not None


def doc_calls(description: str) -> Iterator[tuple[str | None, str]]:
    """(block name, the expression as written) of each `{{ ... }}` of `description` that calls doc();
    the name is None when the expression is anything but `{{ doc('name') }}`."""
    for expression in _EXPRESSION.finditer(description):
        written = expression.group(0)
        if not _NAMES_DOC.search(written):
            continue
        call = _DOC_CALL.fullmatch(written)
        yield (None if call is None else _name(call)), written


def _name(call: re.Match[str]) -> str:
    single, double = call.group(1), call.group(2)
    return single if single is not None else double


def doc_reference_problems(
    description: str, blocks: Mapping[str, DocBlock], place: Place, what: str
) -> list[Diagnostic]:
    """PZ0124 for each doc() of `description` (the `what` at `place`) that names no block or is not
    written as `{{ doc('name') }}`."""
    problems: list[Diagnostic] = []
    if not uses_doc(description):
        return problems
    for name, written in doc_calls(description):
        if name is None:
            problems.append(
                error(
                    "PZ0124",
                    f"{what}: {_short(written)} is not a doc() pz renders (one quoted block name, "
                    "alone in its {{ }})",
                    place=place,
                    next_step="write it as {{ doc('block_name') }}",
                )
            )
        elif name not in blocks:
            known = f"; blocks: {', '.join(sorted(blocks)[:10])}" if blocks else "; the project has none"
            problems.append(
                error(
                    "PZ0124",
                    f"{what}: doc('{name}') names no {{% docs %}} block in docs/**/*.md"
                    f"{did_you_mean(name, blocks)}{known}",
                    place=place,
                )
            )
    return problems


def _short(written: str, limit: int = 60) -> str:
    flat = " ".join(written.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def render_description(description: str, blocks: Mapping[str, DocBlock]) -> str:
    """`description` with each `{{ doc('name') }}` replaced by the block's text (one naming no block, which
    validation refuses, is left as written)."""
    if not uses_doc(description):
        return description

    def block_text(call: re.Match[str]) -> str:
        block = blocks.get(_name(call))
        return call.group(0) if block is None else block.text

    return _DOC_CALL.sub(block_text, description)
