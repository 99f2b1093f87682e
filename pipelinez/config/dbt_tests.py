"""Every check of a sidecar or source dataset, in all its spellings, as CheckSpecs.

pz's own `checks:` list comes first (its names and numbering are unchanged), then the dbt spellings:
a pipeline's `data_tests:` (dbt's model-level tests), then each column's `tests:`/`data_tests:`, where a
test may be a bare name (`- unique`) and its column is implied. The `expression` index of a default name
(`expression_<n>`) runs on across the lists, so two lists never both make `expression_1`. The dbt spellings
follow dbt's NULL semantics for `expression` (`dbt_utils.expression_is_true`: a NULL is not a failure).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pipelinez.config.checks import build_check, check_type_of, default_check_name
from pipelinez.config.model import CheckSpec
from pipelinez.config.positions import JsonPath
from pipelinez.config.regions import column_test_lists
from pipelinez.config.yaml_doc import YamlDoc

_ONE_COLUMN = ("accepted_values", "relationships", "freshness")
_COLUMN_LIST = ("not_null", "unique")


def build_all_checks(doc: YamlDoc, base: JsonPath, block: Any) -> tuple[CheckSpec, ...]:
    """The checks of the sidecar (`base` ()) or dataset (`base` ("datasets", name)) whose mapping is
    `block`: `checks:`, then `data_tests:`, then the column tests."""
    block = block if isinstance(block, dict) else {}
    found: list[CheckSpec] = []
    for key, dbt in (("checks", False), ("data_tests", True)):
        items = block.get(key)
        for index, item in enumerate(items if isinstance(items, list) else []):
            path = (*base, key, index)
            found.append(build_check(item, len(found) + 1, doc.positions.place(path), path, dbt=dbt))
    for list_path, items in column_test_lists(base, block.get("columns")):
        column = str(list_path[-2])
        for index, item in enumerate(items if isinstance(items, list) else []):
            path = (*list_path, index)
            found.append(build_column_test(item, column, len(found) + 1, doc, path))
    return tuple(found)


def build_column_test(item: Any, column: str, index: int, doc: YamlDoc, path: JsonPath) -> CheckSpec:
    """A shape-valid column test (`- unique` or `- <type>: {options}`) as a check of `column`."""
    if isinstance(item, str):
        item = {item: None}
    check_type = check_type_of(item)
    options = dict(item[check_type] or {})
    if check_type in _COLUMN_LIST:
        options = {"columns": [column], **options}
    elif check_type in _ONE_COLUMN:
        options = {"column": column, **options}
    name = item.get("name") or default_check_name(
        check_type, {k: v for k, v in options.items() if k != "config"}, index
    )
    place = doc.positions.place(path)
    spec = build_check({**item, check_type: options, "name": name}, index, place, path, dbt=True)
    return replace(spec, column=column)
