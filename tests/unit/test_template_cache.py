"""Templates compiled once: the literal-call fast path renders exactly what Jinja renders, and graph walks
handle DAGs of any depth."""

from __future__ import annotations

from typing import Any

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.sandbox import SandboxedEnvironment

from pipelinez.compile.graph import find_cycle, topological_order
from pipelinez.compile.template_cache import LiteralCallTemplate, SharedTemplate, TemplateCache, literal_calls


def _env() -> SandboxedEnvironment:
    return SandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )


def _functions(log: list[tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    def make(name: str) -> Any:
        def call(*args: str) -> str:
            log.append((name, args))
            return f"<{name}:{'|'.join(args)}>"

        return call

    return {name: make(name) for name in ("source", "ref", "sink", "var", "env")}


def _outcome(render: Any) -> tuple[str, Any]:
    log: list[tuple[str, tuple[str, ...]]] = []
    try:
        return "ok", (render(_functions(log)), log)
    except Exception as exc:
        return "error", type(exc).__name__


def _same_as_jinja(raw: str) -> None:
    fast = TemplateCache(_env)
    try:
        jinja = _env().from_string(raw)
    except jinja2.TemplateSyntaxError:
        with pytest.raises(jinja2.TemplateSyntaxError):
            fast.get(raw)
        return
    compiled = fast.get(raw)
    assert _outcome(compiled.render) == _outcome(jinja.render)
    assert _outcome(lambda ctx: "".join(compiled.generate(ctx))) == _outcome(jinja.render)


@pytest.mark.parametrize(
    "raw",
    [
        "SELECT 1\n",
        "SELECT * FROM {{ source('files', 'orders') }} JOIN {{ref(\"b\")}} USING (id)\n\n",
        "INSERT INTO {{ sink('lake', 'p') }}\nSELECT {{ var('x') }}, {{ env( 'A' , \"B\" ) }}",
        "{{ ref('a{{b') }} {{ ref('c}}d') }} }} } {",
        "{{ ref('a') }}}} -- trailing braces are data",
        "SELECT '{ not jinja }' {{ ref('a') }}",
    ],
)
def test_literal_call_templates_render_as_jinja_does(raw: str) -> None:
    assert literal_calls(raw) is not None
    _same_as_jinja(raw)


@pytest.mark.parametrize(
    "raw",
    [
        "{% if true %}{{ ref('a') }}{% endif %}",
        "{# a comment #} {{ ref('a') }}",
        "{{ ref('a') | upper }}",
        "{{ ref(name) }}",
        "{{ ref('a\\'b') }}",
        "{{{ ref('a') }}",
        "{{- ref('a') }}",
        "SELECT 1\r\nFROM {{ ref('a') }}\r\n",
        "{{ ref('a') }} {{",
        "{{ 1 + 2 }}",
    ],
)
def test_anything_else_goes_through_jinja_with_the_same_result(raw: str) -> None:
    assert literal_calls(raw) is None
    _same_as_jinja(raw)


def test_an_unknown_function_fails_as_jinja_fails() -> None:
    compiled = TemplateCache(_env).get("SELECT {{ nope('x') }}")
    assert isinstance(compiled, LiteralCallTemplate)
    with pytest.raises(jinja2.UndefinedError, match="nope"):
        compiled.render({"ref": lambda name: name})


def test_each_template_text_is_compiled_once() -> None:
    cache = TemplateCache(_env)
    assert cache.get("{% if 1 %}x{% endif %}") is cache.get("{% if 1 %}x{% endif %}")
    assert cache.get("{{ ref('a') }}") is cache.get("{{ ref('a') }}")


@pytest.mark.parametrize(
    "raw",
    [
        "{% if true %}{{ ref('a') }}{% endif %} {{ source('s', 'd') }}",
        "{% raw %}{{ ref('a') }}{% endraw %}{% if 1 %}{{ ref('b') }}{% endif %}",
        "{# {{ ref('a') }} #}{% if 1 %}{{ ref('b') }}{% endif %}",
        "{{ \"{{ ref('a') }}\" }}{% if 1 %}{{ ref('b') }}{% endif %}",
        "{{ 'x' ~ \"{{ ref('a') }}\" }} {{ ref('b') }} {% set n = 1 %}",
        "{% for m in ['p'] %}{{ ref(m) }} {{ ref('q') }}{% endfor %}",
        "{% set __pz_literal_0 = 'z' %}{{ ref('a') }}",
        "{% if 1 %}{{ ref('a') }}{% endif %}{% endfor %}",
    ],
)
def test_templates_compiled_by_shape_render_as_jinja_does(raw: str) -> None:
    _same_as_jinja(raw)


def test_templates_that_differ_only_in_literal_arguments_share_one_compile() -> None:
    cache = TemplateCache(_env)
    loop = "{% for c in ['x', 'y'] %}{{ c }}, {% endfor %}"
    first, second = (cache.get(f"SELECT {loop} FROM {{{{ ref('{name}') }}}}") for name in ("a", "b"))
    assert isinstance(first, SharedTemplate) and isinstance(second, SharedTemplate)
    assert first._jinja is second._jinja
    assert first.render(_functions([])) == "SELECT x, y,  FROM <ref:a>"
    assert second.render(_functions([])) == "SELECT x, y,  FROM <ref:b>"
    # a call inside a string is not one: compiled as written
    assert not isinstance(cache.get("{{ \"{{ ref('a') }}\" }}{% if 1 %}{% endif %}"), SharedTemplate)


@pytest.mark.parametrize(
    "texts",
    [
        [
            "{{ \"{{ ref('a') }}\" }}{% if 1 %}{{ ref('b') }}{% endif %}",
            "{{ \"{{ ref('c') }}\" }}{% if 1 %}{{ ref('d') }}{% endif %}",
        ],
        ["{# {{ ref('a') }} #}{% if 1 %}{% endif %}", "{# {{ ref('a#}x') }} #}{% if 1 %}{% endif %}"],
        [
            "{% raw %}{{ ref('a') }}{% endraw %}{% if 1 %}{% endif %}",
            "{% raw %}{{ ref('{% endraw %}') }}{% endraw %}{% if 1 %}{% endif %}",
        ],
        [
            "{% if 1 %}{{ ref('a') }}{% endif %}",
            "{% if 1 %}{{ ref('b}}') }}{% endif %}",
            '{% if 1 %}{{ ref("c") }}{% endif %}',
        ],
    ],
)
def test_one_cache_renders_every_text_of_a_shape_as_jinja_does(texts: list[str]) -> None:
    """The lexer's verdict is kept per shape only for arguments that cannot move a token's bounds."""
    cache = TemplateCache(_env)
    for raw in texts:
        try:
            jinja = _env().from_string(raw)
        except jinja2.TemplateSyntaxError:
            with pytest.raises(jinja2.TemplateSyntaxError):
                cache.get(raw)
            continue
        assert _outcome(cache.get(raw).render) == _outcome(jinja.render), raw


_PIECES = st.sampled_from(
    [
        "SELECT ",
        "\n",
        " ",
        "{",
        "}",
        "'",
        '"',
        "%",
        "#",
        "-",
        "x",
        "{{ ref('a') }}",
        "{{ source('s', \"d\") }}",
        "{{ var('v') }}",
        "{{ env('E', 'dflt') }}",
        "{{ sink('k','o') }}",
        "{{ ref('') }}",
        "{{ other('z') }}",
        "{% raw %}",
        "{% endraw %}",
        "{% if true %}",
        "{% endif %}",
        "{% for m in ['p', 'q'] %}",
        "{% endfor %}",
        "{{ ref(m) }}",
        "{{- ref('b') }}",
        "{{ ref('c') -}}",
        "{{ 'x' ~ \"",
        '" }}',
        "#}",
        "%}",
        "{%",
        "{#",
        "}}",
        "{{",
        "|",
        "(",
        ")",
        ",",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12))
def test_any_mix_of_data_and_calls_renders_as_jinja_does(pieces: list[str]) -> None:
    _same_as_jinja("".join(pieces))


def test_cycle_search_and_order_walk_a_chain_of_any_depth() -> None:
    depth = 20_000  # deeper than Python's recursion limit; names in reverse dependency order
    edges = {f"p{i:05d}": [f"p{i + 1:05d}"] if i + 1 < depth else [] for i in range(depth)}
    assert find_cycle(edges) is None
    order = topological_order(edges)
    assert order[0] == f"p{depth - 1:05d}" and order[-1] == "p00000" and len(order) == depth
    edges[f"p{depth - 1:05d}"] = ["p19990"]
    assert find_cycle(edges) == [f"p{i:05d}" for i in range(19990, depth)] + ["p19990"]


def test_topological_order_breaks_ties_by_name() -> None:
    edges = {"c": [], "a": ["c"], "b": [], "d": ["b", "a"]}
    assert topological_order(edges) == ["b", "c", "a", "d"]


def test_a_project_of_literal_calls_never_imports_jinja(tmp_path: Any) -> None:
    """`pz validate` of pipelines whose only Jinja is `{{ f('literal') }}` calls never loads Jinja (the
    sandbox is made for the first template that needs it)."""
    import subprocess
    import sys

    from tests.conftest import SMALL, write_project

    write_project(tmp_path, SMALL)
    probe = (
        "import sys\nfrom pipelinez.cli.main import main\nsys.argv = ['pz', '-p', sys.argv[1], 'validate']\n"
        "try:\n    main()\nexcept SystemExit as end:\n    assert end.code in (0, None), end.code\n"
        "print('jinja2' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "False", out.stdout
    write_project(
        tmp_path, {"pipelines/p.sql": SMALL["pipelines/p.sql"] + "{% if true %}WHERE id > 0{% endif %}\n"}
    )
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True)
    assert out.stdout.splitlines()[-1] == "True", out.stdout + out.stderr


def test_a_call_of_a_macro_name_is_compiled_by_jinja() -> None:
    """A macro's loops and nesting are bounded by the sandbox of the render under way: a template that calls
    one is never rendered on the literal-call fast path, whatever its shape."""
    plain = TemplateCache(_env)
    with_macros = TemplateCache(_env, frozenset({"cents"}))
    raw = "SELECT {{ cents('amount') }} FROM {{ ref('x') }}"
    assert isinstance(plain.get(raw), LiteralCallTemplate)
    assert isinstance(with_macros.get(raw), jinja2.Template | SharedTemplate)  # Jinja renders it
    assert isinstance(with_macros.get("SELECT {{ ref('x') }}"), LiteralCallTemplate)
