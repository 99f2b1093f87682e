"""`{{ doc('name') }}` in descriptions and the `{% docs name %}` blocks of a project's docs/**/*.md: rendered
in every description `pz docs` shows, refused with PZ0124/PZ0125 by `pz validate` (all at once, file:line),
masked like the rest of the site, and never read as anything but docs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import SMALL, pz, write_project
from tests.functional.test_docs import document

DOCS = {
    "docs/orders.md": """
        # Orders

        Prose outside blocks is the file's own.

        {% docs orders_table %}
        Orders as the shop exports them,
        **one row** per order.
        {% enddocs %}

        {%- docs order_id -%}The order's id.{%- enddocs -%}
    """,
    "docs/lake/outputs.md": """
        {% docs lake_orders %}
        Orders for the lake.
        {% enddocs %}
        {% docs every_order %}
        Every order.
        {% enddocs %}
    """,
}


def described_project(root: Path, files: dict[str, str] | None = None) -> Path:
    return write_project(
        root,
        {
            **SMALL,
            **DOCS,
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  orders:
                    description: "{{ doc('orders_table') }}"
                    format: csv
                    path: orders.csv
                    columns:
                      id: { type: bigint, description: "{{ doc(\\"order_id\\") }}" }
            """,
            "sinks/lake.yml": """
                connector: localfiles
                connection: { root: out }
                outputs:
                  p: { description: "Written nightly. {{doc('lake_orders')}}" }
            """,
            "pipelines/p.yml": """
                description: "{{ doc('every_order') }} (see the source)"
                columns:
                  id: { description: "{{ doc('order_id') }}" }
            """,
            **(files or {}),
        },
    )


VALIDATE_PROBE = (
    "import sys\nfrom pipelinez.cli.main import main\nsys.argv = ['pz', '-p', sys.argv[1], 'validate']\n"
    "try:\n    main()\nexcept SystemExit as end:\n    assert end.code in (0, None), end.code\n"
    "print('jinja2' in sys.modules)\n"
)


def test_doc_calls_render_the_blocks_in_every_description_the_site_shows(tmp_path: Path) -> None:
    root = described_project(tmp_path / "p")
    # validate checks every doc() without loading Jinja (descriptions render without it)
    probe = subprocess.run([sys.executable, "-c", VALIDATE_PROBE, str(root)], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert probe.stdout.splitlines()[-1] == "False", probe.stdout
    out = tmp_path / "site"
    result = pz(root, "docs", "generate", "--out", str(out))
    assert result.exit_code == 0, result.output
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    source = node["src_files__orders"]["panel"]
    assert source["description"] == "Orders as the shop exports them,\n**one row** per order."
    assert source["columns"] == [{"name": "id", "type": "BIGINT", "description": "The order's id."}]
    assert node["p"]["panel"]["description"] == "Every order. (see the source)"
    assert node["p"]["panel"]["columns"][0]["description"] == "The order's id."
    assert node["lake.p"]["panel"]["description"] == "Written nightly. Orders for the lake."


def test_validate_reports_every_doc_problem_at_once_with_file_and_line(tmp_path: Path) -> None:
    root = described_project(
        tmp_path / "p",
        {
            "pipelines/p.yml": """
                description: "{{ doc('every_ordr') }}"
                columns:
                  id: { description: "{{ doc(name) }}" }
            """,
            "docs/more.md": """
                intro

                {% docs order_id %}
                Said twice.
                {% enddocs %}
                {% docs bad-name %}x{% enddocs %}
                {% enddocs %}
                {% docs never_closed %}
                no end
            """,
        },
    )
    result = pz(root, "validate")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    out = result.output
    assert "PZ0124" in out and "doc('every_ordr')" in out and "did you mean 'every_order'?" in out
    assert "pipelines/p.yml:1" in out
    assert "{{ doc(name) }} is not a doc() pz renders" in out and "pipelines/p.yml:3" in out
    assert "docs/orders.md:10:1: two blocks are named 'order_id': docs/more.md:3 and docs/orders.md:10" in out
    assert "docs/more.md:6" in out and "'bad-name' is not a block name" in out
    assert "docs/more.md:7" in out and "closes no {% docs name %} block" in out
    assert "docs/more.md:8" in out and "block 'never_closed' has no {% enddocs %}" in out
    assert out.count("PZ0124") == 2 and out.count("PZ0125") == 4, out


def test_a_doc_block_holding_a_secret_is_masked_in_the_site(tmp_path: Path) -> None:
    secret = "s3cr3t-T0ken-value"
    root = described_project(
        tmp_path / "p",
        {
            "project.yml": "name: shop\nenv:\n  API_TOKEN: { required: true, secret: true }\n",
            "docs/orders.md": f"""
                {{% docs orders_table %}}Pasted by mistake: {secret}{{% enddocs %}}
                {{% docs order_id %}}The id.{{% enddocs %}}
            """,
        },
    )
    out = tmp_path / "site"
    result = pz(root, "docs", "generate", "--out", str(out), env={"API_TOKEN": secret})
    assert result.exit_code == 0, result.output
    assert secret not in (out / "index.html").read_text(encoding="utf-8")
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    assert node["src_files__orders"]["panel"]["description"] == "Pasted by mistake: ***"


def test_the_docs_folder_is_read_for_blocks_only(tmp_path: Path) -> None:
    """Markdown, YAML and SQL under docs/ are no project files: no sidecar, source or pipeline comes from
    them, and a doc block's text with Jinja-looking words in it is shown as written."""
    root = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "pipelines/p.yml": "description: \"{{ doc('p') }}\"\n",
            "docs/p.md": "{% docs p %}Uses {{ source('files', 'orders') }}.{% enddocs %}\n",
            "docs/p.yml": "not: [a, sidecar\n",
            "docs/q.sql": "SELECT broken FROM\n",
            "docs/files.yml": "connector: nope\n",
            "docs/.hidden.md": "{% docs p %}hidden files are skipped{% enddocs %}\n",
        },
    )
    result = pz(root, "validate")
    assert result.exit_code == 0, result.output
    out = tmp_path / "site"
    assert pz(root, "docs", "generate", "--out", str(out)).exit_code == 0
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    assert node["p"]["panel"]["description"] == "Uses {{ source('files', 'orders') }}."
    assert set(node) == {"src_files__orders", "p", "lake.p"}
