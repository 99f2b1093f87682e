"""`pz docs generate` / `pz docs serve` and `pz lineage` on real projects: the site's document, its column
docs and lineage, redaction, the folders it refuses, and the commands that must not pay for sqlglot."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pipelinez.api import Project, PzError, init_project
from tests.conftest import SMALL, fresh_pg_database, pz, write_project

DATA = re.compile(r'<script id="pz-data" type="application/json">(.*?)</script>', re.S)


def document(index: Path) -> dict[str, Any]:
    found = DATA.search(index.read_text(encoding="utf-8"))
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1).replace("<\\/", "</"))
    return data


def quickstart(tmp_path: Path) -> Path:
    root = tmp_path / "qs"
    init_project(root)
    return root


def test_lineage_traces_a_column_back_to_the_source_and_forward_to_its_sink(tmp_path: Path) -> None:
    root = quickstart(tmp_path)
    result = pz(root, "lineage", "customer_revenue.revenue")
    assert result.exit_code == 0, result.output
    assert result.lines == [
        "customer_revenue.revenue (DECIMAL(38,2))",
        "  <- orders_enriched.amount",
        "    <- shipped_orders.amount",
        "      <- files.orders.amount  [source]",
        "  -> warehouse.customer_revenue.revenue  [sink]",
    ]
    report = Project(root).lineage("orders_enriched.customer")
    assert report.sources == ("files.customers.name",)
    assert report.sinks == ("lake.orders_enriched.customer",)
    line = json.loads(pz(root, "--log-format", "json", "lineage", "orders_enriched.shipped_at").output)
    assert line["sources"] == ["files.events.at"]


def test_lineage_of_no_such_column_is_pz0539_naming_the_columns(tmp_path: Path) -> None:
    root = quickstart(tmp_path)
    for target, why in [
        ("orders_enriched", "not of the form PIPELINE.COLUMN"),
        ("nope.x", "there is no pipeline 'nope'"),
        ("customer_revenue.lifetime_value", "columns: customer, country, orders, revenue"),
    ]:
        result = pz(root, "lineage", target)
        assert result.exit_code == 2
        assert "PZ0539" in result.output and why in result.output, result.output
        assert "Traceback" not in result.output


def test_docs_generate_writes_one_page_with_the_project_its_runs_and_no_external_reference(
    tmp_path: Path,
) -> None:
    root = quickstart(tmp_path)
    assert pz(root, "run").exit_code == 0
    failed = pz(root, "run", env={"PZ_FAILPOINTS": "sink.write@warehouse.customer_revenue"})
    assert failed.exit_code == 1
    out = tmp_path / "site"
    result = pz(root, "docs", "generate", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["app.css", "app.js", "index.html"]
    doc = document(out / "index.html")
    kinds = {n["id"]: n["kind"] for n in doc["nodes"]}
    assert len(kinds) == 14  # 13 nodes that run, and the ephemeral pipeline
    assert kinds["shipped_orders"] == "pipeline" and kinds["src_files__orders"] == "source"
    assert kinds["warehouse.customer_revenue"] == "sink"
    assert kinds["chk_customer_revenue__row_count"] == "check"
    node = {n["id"]: n for n in doc["nodes"]}
    assert node["orders_enriched"]["deps"][:2] == ["src_files__customers", "shipped_orders"]
    assert node["warehouse.customer_revenue"]["status"] == "failed"  # the newest run's
    assert node["lake.orders_enriched"]["status"] == "success"
    panel = node["orders_enriched"]["panel"]
    assert panel["description"] == "Shipped orders joined to their customer."
    assert [c["name"] for c in panel["columns"]][:2] == ["order_id", "amount"]
    assert panel["lineage"]["customer"] == {
        "upstream": [["source", "files.customers", "name"]],
        "unresolved": None,
    }
    assert '"shipped_orders"' in panel["sql"] and "src_files__customers" in panel["sql"]
    assert node["warehouse.customer_revenue"]["panel"]["strategy"] == "replace"
    assert node["warehouse.customer_revenue"]["panel"]["retry"]["max_attempts"] == 3
    assert [r["status"] for r in doc["runs"]] == ["failed", "success"]
    newest = doc["runs"][0]
    assert newest["previous_run"] == doc["runs"][1]["run_id"]
    assert newest["critical_path"][-1] == "warehouse.customer_revenue"
    history = doc["checks"]["chk_customer_revenue__row_count"]
    assert [h["status"] for h in history] == ["success", "success"]
    # nothing is loaded from anywhere but the folder itself
    page = (out / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'(?:src|href)="([^"]*)"', page) == ["app.css", "app.js"]
    script = (out / "app.js").read_text(encoding="utf-8")
    assert not re.search(r"fetch\(|XMLHttpRequest|import\(|https?://(?!www\.w3\.org/2000/svg)", script)
    assert "connect-src" not in page and "default-src 'none'" in page


def test_docs_show_column_docs_from_contracts_sidecars_and_outputs(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  orders:
                    description: Orders as the shop exports them.
                    format: csv
                    path: orders.csv
                    columns:
                      id: { type: bigint, description: The order's id. }
            """,
            "sinks/lake.yml": """
                connector: localfiles
                connection: { root: out }
                outputs:
                  p: { description: Orders for the lake. }
            """,
            "pipelines/p.yml": """
                description: Every order.
                columns:
                  id: { description: Still the order's id. }
            """,
        },
    )
    assert pz(root, "run").exit_code == 0  # the long form of a contract column is still its type
    out = tmp_path / "site"
    assert pz(root, "docs", "generate", "--out", str(out)).exit_code == 0
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    source = node["src_files__orders"]["panel"]
    assert source["description"] == "Orders as the shop exports them."
    assert source["columns"] == [{"name": "id", "type": "BIGINT", "description": "The order's id."}]
    assert node["p"]["panel"]["columns"][0]["description"] == "Still the order's id."
    assert node["lake.p"]["panel"]["description"] == "Orders for the lake."


def test_a_column_doc_of_the_wrong_shape_is_refused_in_tier_1(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "p", {**SMALL, "pipelines/p.yml": "columns:\n  id: { descripton: typo }\n"}
    )
    result = pz(root, "validate")
    assert result.exit_code == 2
    assert "descripton" in result.output and "pipelines/p.yml" in result.output


def test_secrets_never_reach_the_site(tmp_path: Path) -> None:
    secret = "s3cr3t-T0ken-value"
    root = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "project.yml": "name: shop\nenv:\n  API_TOKEN: { required: true, secret: true }\n",
            "pipelines/p.sql": """
                INSERT INTO {{ sink('lake', 'p') }}
                SELECT id, length({{ env('API_TOKEN') }}) AS n FROM {{ source('files', 'orders') }}
            """,
        },
    )
    env = {"API_TOKEN": secret}
    assert pz(root, "run", env=env).exit_code == 0
    failed = pz(root, "run", env={**env, "PZ_FAILPOINTS": "sink.write@lake.p"})
    assert failed.exit_code == 1
    out = tmp_path / "site"
    assert pz(root, "docs", "generate", "--out", str(out), env=env).exit_code == 0
    for path in out.iterdir():
        assert secret not in path.read_text(encoding="utf-8"), path.name
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    assert "***" in node["p"]["panel"]["sql"]


def test_docs_never_overwrite_a_folder_they_did_not_write(tmp_path: Path) -> None:
    root = quickstart(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    result = pz(root, "docs", "generate", "--out", str(mine))
    assert result.exit_code == 2 and "PZ0540" in result.output
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    a_file = tmp_path / "file.html"
    a_file.write_text("x", encoding="utf-8")
    assert pz(root, "docs", "generate", "--out", str(a_file)).exit_code == 2  # click refuses it first
    with pytest.raises(PzError) as info:
        Project(root).docs(a_file)
    assert info.value.diagnostics[0].code == "PZ0540"
    assert a_file.read_text(encoding="utf-8") == "x"
    for _ in range(2):  # its own folder (the default) is rewritten
        assert pz(root, "docs", "generate").exit_code == 0
    assert (root / ".pz" / "target" / "docs" / "index.html").is_file()


def test_docs_serve_serves_the_site_on_loopback(tmp_path: Path) -> None:
    root = quickstart(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelinez.cli.main", "-p", str(root), "docs", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        while line.startswith(("warning:", "  next:")):  # the project's warnings come first
            line = proc.stdout.readline()
        url = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        assert url is not None, line
        with urllib.request.urlopen(url.group(1) + "index.html", timeout=30) as response:
            assert response.status == 200
            assert '<meta name="generator" content="pz docs">' in response.read().decode()
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_validate_and_plan_never_import_sqlglot(tmp_path: Path) -> None:
    root = quickstart(tmp_path)
    code = (
        "import sys\nfrom pipelinez.api import Project\n"
        f"p = Project({str(root)!r})\np.validate()\np.plan()\nprint('sqlglot' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_column_doc_naming_no_result_column_is_warning_pz0123(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "p",
        {**SMALL, "pipelines/p.yml": "columns:\n  ID: { description: fine }\n  idd: { description: typo }\n"},
    )
    result = pz(root, "validate")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.lines if line.startswith("warning:")]
    assert warned == [
        "warning: PZ0123 pipelines/p.yml:3:3: pipeline 'p': columns: documents 'idd', which is not a column "
        "of its result (columns: id)"
    ]


def test_lineage_of_a_pipeline_tier_4_could_not_bind_says_why(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "p",
        {
            **SMALL,
            "sources/api.yml": """
                connector: http
                connection: { base_url: "http://127.0.0.1:9" }
                datasets:
                  items: { path: /items }
            """,
            "pipelines/q.sql": "SELECT * FROM {{ source('api', 'items') }}\n",
        },
    )
    result = pz(root, "lineage", "q.id")
    assert result.exit_code == 2, result.output
    assert "PZ0539" in result.output and "no columns: contract and no cached schema" in result.output
    out = tmp_path / "site"
    generated = pz(root, "docs", "generate", "--out", str(out))
    assert generated.exit_code == 0  # shown, without columns
    assert "warning: PZ0406" in generated.output  # its warnings printed as by pz plan
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    assert node["q"]["panel"]["columns"] == [] and node["p"]["panel"]["columns"][0]["name"] == "id"


def test_a_dataset_without_contract_takes_its_columns_from_the_newest_run_that_staged_it(
    tmp_path: Path,
) -> None:
    setup = "CREATE TABLE customers (id bigint, name text); INSERT INTO customers VALUES (1, 'Ada');"
    with fresh_pg_database(setup) as database:
        root = write_project(
            tmp_path / "p",
            {
                **SMALL,
                "sources/pg.yml": f"""
                    connector: postgres
                    connection: {{ host: 127.0.0.1, port: 5432, user: postgres, database: {database} }}
                    datasets:
                      customers: {{ table: public.customers }}
                """,
                "pipelines/names.sql": """
                    INSERT INTO {{ sink('lake', 'names') }}
                    SELECT upper(name) AS shout FROM {{ source('pg', 'customers') }}
                """,
            },
        )
        before = pz(root, "lineage", "names.shout")
        assert before.exit_code == 2 and "no columns: contract" in before.output  # nothing staged yet
        assert pz(root, "run").exit_code == 0
        after = pz(root, "lineage", "names.shout")
    assert after.exit_code == 0, after.output
    assert after.lines[1] == "  <- pg.customers.name  [source]"
    assert "PZ0406" in pz(root, "validate").output  # validate still does not read old runs
    out = tmp_path / "site"
    assert pz(root, "docs", "generate", "--out", str(out)).exit_code == 0
    node = {n["id"]: n for n in document(out / "index.html")["nodes"]}
    assert [c["name"] for c in node["src_pg__customers"]["panel"]["columns"]] == ["id", "name"]
