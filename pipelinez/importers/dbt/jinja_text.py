"""Text-level rewrites of dbt Jinja: config() blocks out, package helpers to pz's built-ins, and the names a
model calls that pz has no equivalent for (with their lines)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from jinja2 import Environment, TemplateSyntaxError, meta

from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.profiles import to_pz_env

# pz's template names (dbt_syntax.md items 1-2) and Jinja's own globals
PZ_NAMES = frozenset(
    [
        "source",
        "ref",
        "var",
        "env",
        "env_var",
        "sink",
        "watermark",
        "doc",
        "generate_surrogate_key",
        "date_trunc",
        "dateadd",
        "datediff",
        "star",
        "safe_cast",
        "range",
        "dict",
        "lipsum",
        "cycler",
        "joiner",
        "namespace",
        "loop",
    ]
)
HELPERS = ("generate_surrogate_key", "date_trunc", "dateadd", "datediff", "star", "safe_cast")
_HELPER_CALL = re.compile(r"\b(?:dbt_utils|dbt)\s*\.\s*(" + "|".join(HELPERS) + r")\s*\(")
_CONFIG_OPEN = re.compile(r"\{\{-?\s*config\s*\(")
_TWO_ARG_REF = re.compile(r"\bref\(\s*['\"]\w+['\"]\s*,")
_DOTTED = re.compile(r"\b([A-Za-z_]\w*)\s*\.\s*([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Unresolved:
    line: int
    macro: str


def blank(text: str) -> str:
    """The text replaced by its own newlines, so later lines keep their numbers."""
    return "\n" * text.count("\n")


def _closing(text: str, start: int) -> int | None:
    """Index just past the `}}` closing the call whose `(` is at text[start - 1]."""
    depth, index, quote = 1, start, ""
    while index < len(text):
        char = text[index]
        if quote:
            quote = "" if char == quote and text[index - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                close = re.compile(r"\s*-?\}\}").match(text, index + 1)
                return close.end() if close else None
        index += 1
    return None


class ConfigError(ValueError):
    pass


class _Literals(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        names = {"true": True, "false": False, "none": None, "True": True, "False": False, "None": None}
        if node.id in names:
            return ast.copy_location(ast.Constant(names[node.id]), node)
        raise ConfigError(f"'{node.id}' is not a literal")


def parse_config_args(args: str) -> JsonObject:
    try:
        tree = ast.parse(f"f({args})", mode="eval")
    except SyntaxError as exc:
        raise ConfigError(f"not a call's arguments ({exc.msg})") from None
    call = tree.body
    if not isinstance(call, ast.Call) or call.args:
        raise ConfigError("config() takes keyword arguments only")
    config: JsonObject = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ConfigError("**kwargs cannot be read")
        try:
            config[keyword.arg] = ast.literal_eval(_Literals().visit(keyword.value))
        except (ValueError, ConfigError) as exc:
            raise ConfigError(f"{keyword.arg}= is not a literal value ({exc})") from None
    return config


def extract_configs(text: str) -> tuple[str, JsonObject, list[tuple[int, str]]]:
    """The text without its `{{ config(...) }}` blocks (blanked), their merged keys, and (line, reason)
    for each block that could not be read."""
    config: JsonObject = {}
    problems: list[tuple[int, str]] = []
    while (match := _CONFIG_OPEN.search(text)) is not None:
        end = _closing(text, match.end())
        line = text.count("\n", 0, match.start()) + 1
        if end is None:
            problems.append((line, "the config( call is not closed by )}}"))
            break
        args = text[match.end() : end].rstrip().removesuffix("}}").rstrip("- ").rstrip()[:-1]
        try:
            config.update(parse_config_args(args))
        except ConfigError as exc:
            problems.append((line, str(exc)))
        text = text[: match.start()] + blank(text[match.start() : end]) + text[end:]
    return text, config, problems


def rewrite(text: str) -> str:
    """env_var() → env(), dbt_utils./dbt. helpers that pz ships → the bare helper."""
    return _HELPER_CALL.sub(lambda m: f"{m.group(1)}(", to_pz_env(text))


def _line_of(text: str, pattern: str) -> int:
    match = re.search(pattern, text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def unresolved(text: str, known: frozenset[str]) -> list[Unresolved]:
    """Names the template uses that are neither pz's, Jinja's, set in the template nor a project macro,
    each at its first line: `dbt_utils.pivot`, `adapter.dispatch`, `this`, `run_query`, ..."""
    env = Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
    try:
        names = meta.find_undeclared_variables(env.parse(text))
    except TemplateSyntaxError as exc:
        return [Unresolved(exc.lineno or 1, f"Jinja pz cannot parse ({exc.message})")]
    found: list[Unresolved] = []
    for name in sorted(names - known - PZ_NAMES):
        dotted = [m for m in _DOTTED.finditer(text) if m.group(1) == name]
        if dotted:
            for attr in sorted({m.group(2) for m in dotted}):
                line = _line_of(text, rf"\b{re.escape(name)}\s*\.\s*{re.escape(attr)}\b")
                found.append(Unresolved(line, f"{name}.{attr}"))
        else:
            found.append(Unresolved(_line_of(text, rf"\b{re.escape(name)}\b"), name))
    for match in _TWO_ARG_REF.finditer(text):  # ref('package', 'model') or ref('model', v=2)
        found.append(
            Unresolved(text.count("\n", 0, match.start()) + 1, "ref() of a package or a model version")
        )
    return sorted(found, key=lambda u: (u.line, u.macro))


def macro_names(text: str) -> list[str]:
    return re.findall(r"\{%-?\s*macro\s+(\w+)\s*\(", text)
