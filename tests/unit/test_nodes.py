"""DAG building, work items, content-hash ids and the planner, on small projects compiled in-process."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest

from pipelinez.compile.compiler import compile_project
from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.ids import canonical_text, content_id
from pipelinez.compile.nodes import CheckNode, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.config.loader import load_project
from pipelinez.core.vocabulary import CheckSeverity, NodeKind, Strategy, Tier
from pipelinez.plan.planner import build_plan
from tests.conftest import write_project

SECRET = "hunter2-very-secret"

FILES = {
    "project.yml": """
        name: shop
        vars: { min_amount: { type: int, default: 1 } }
        env: { LAKE_TOKEN: { required: true, secret: true } }
        engine: { retry: { max_attempts: 2 } }
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        max_concurrency: 2
        retry: { max_attempts: 5 }
        datasets:
          orders:
            format: csv
            path: orders.csv
            columns: { id: bigint, amount: "decimal(10,2)" }
            retry: { base_delay: 2s }
            checks:
              - not_null: { columns: [id] }
          customers: { format: csv, path: customers.csv }
    """,
    "sinks/wh.yml": """
        connector: duckdb
        connection: { path: "out/{{ env('LAKE_TOKEN') }}.duckdb" }
        outputs:
          totals: { table: main.totals, strategy: merge, keys: [id] }
    """,
    "sinks/lake.yml": """
        connector: localfiles
        connection: { root: out/lake }
        outputs: {}
    """,
    "data/orders.csv": "id,amount\n1,10.50\n",
    "data/customers.csv": "id,name\n1,ada\n",
    "pipelines/big.sql": """
        SELECT * FROM {{ source('files', 'orders') }} WHERE amount >= {{ var('min_amount') }}
    """,
    "pipelines/big.yml": """
        materialized: ephemeral
    """,
    "pipelines/totals.sql": """
        INSERT INTO {{ sink('wh', 'totals') }}
        INSERT INTO {{ sink('lake', 'copy') }}
        SELECT b.id, sum(b.amount) AS total FROM {{ ref('big') }} AS b
        JOIN {{ source('files', 'customers') }} AS c USING (id) GROUP BY ALL
    """,
    "pipelines/totals.yml": """
        checks:
          - unique: { columns: [id] }
          - not_null: { columns: [total] }
            severity: warn
    """,
}


def _compile(root: Path, files: dict[str, str], token: str = SECRET) -> CompiledDag:
    write_project(root, files)
    project, diags = load_project(root)
    assert project is not None, diags
    result = compile_project(project, {}, {"LAKE_TOKEN": token})
    assert result.ok and result.dag is not None, result.errors
    return result.dag


@pytest.fixture
def dag(tmp_path: Path) -> CompiledDag:
    return _compile(tmp_path / "p", FILES)


def test_dag_has_every_node_once_in_dependency_order(dag: CompiledDag) -> None:
    kinds = {name: node.kind for name, node in dag.nodes.items()}
    assert kinds == {
        "src_files__orders": NodeKind.SOURCE_LOAD,
        "src_files__customers": NodeKind.SOURCE_LOAD,
        "chk_src_files__orders__not_null_id": NodeKind.CHECK,
        "totals": NodeKind.PIPELINE,
        "chk_totals__unique_id": NodeKind.CHECK,
        "chk_totals__not_null_total": NodeKind.CHECK,
        "wh.totals": NodeKind.SINK_WRITE,
        "lake.copy": NodeKind.SINK_WRITE,
    }
    order = list(dag.nodes)
    for name, node in dag.nodes.items():
        assert all(order.index(d) < order.index(name) for d in node.deps), name


def test_ephemeral_is_inlined_and_write_audit_publish_deps_are_added(dag: CompiledDag) -> None:
    totals = dag.nodes["totals"]
    assert isinstance(totals, PipelineNode)
    # reads through the ephemeral: its source becomes a dependency, its query is inlined
    assert set(totals.work.inputs) == {"src_files__orders", "src_files__customers"}
    assert totals.deps == (*totals.work.inputs, "chk_src_files__orders__not_null_id")
    assert "WHERE amount >= 1" in totals.sql and '"big"' not in totals.sql
    # a sink write waits for the pipeline's error checks, not its warn checks
    assert dag.nodes["wh.totals"].deps == ("totals", "chk_totals__unique_id")
    warn = dag.nodes["chk_totals__not_null_total"]
    assert isinstance(warn, CheckNode) and warn.work.severity is CheckSeverity.WARN


def test_source_load_work_is_resolved_once(dag: CompiledDag) -> None:
    node = dag.nodes["src_files__orders"]
    assert isinstance(node, SourceLoadNode)
    work = node.work
    assert (work.endpoint.instance, work.endpoint.connector) == ("files", "localfiles")
    assert work.endpoint.connection == {"root": "data"}
    assert work.request.name == "orders" and work.request.options == {"format": "csv", "path": "orders.csv"}
    assert work.request.columns == {"id": "bigint", "amount": "decimal(10,2)"}
    assert work.request.bounds.unbounded
    assert work.table == "src_files__orders" and work.tier is Tier.NATIVE
    # retry cascade: engine 2 attempts <- instance 5 <- dataset base_delay 2s
    assert (work.retry.max_attempts, work.retry.base_delay, work.declares_retry) == (5, 2.0, True)
    assert work.endpoint.max_concurrency == 2


def test_sink_write_work_carries_strategy_keys_and_the_replace_default(dag: CompiledDag) -> None:
    wh, lake = dag.nodes["wh.totals"], dag.nodes["lake.copy"]
    assert isinstance(wh, SinkWriteNode) and isinstance(lake, SinkWriteNode)
    assert wh.work.strategy is Strategy.MERGE and wh.work.request.keys == ("id",)
    assert wh.work.source_table == "totals" and wh.work.tier is Tier.NATIVE
    assert lake.work.strategy is Strategy.REPLACE  # no entry in sinks/lake.yml
    assert lake.work.retry.max_attempts == 2 and not lake.work.declares_retry


def test_secrets_are_hashed_into_the_id_but_never_printed(tmp_path: Path) -> None:
    dag = _compile(tmp_path / "a", FILES)
    node = dag.nodes["wh.totals"]
    assert SECRET in str(node.work.endpoint.connection)  # what runs holds the real value
    assert SECRET not in repr(node)
    text = canonical_text(node, [])
    assert SECRET not in text and "sha256:" in text
    other = _compile(tmp_path / "b", FILES, token="another-secret-value")
    assert other.nodes["wh.totals"].id != node.id
    assert other.nodes["lake.copy"].id == dag.nodes["lake.copy"].id


def test_id_is_the_hash_of_the_node_itself(dag: CompiledDag) -> None:
    for node in dag.nodes.values():
        assert node.id == content_id(node, [dag.nodes[d].id for d in node.deps])
        assert len(node.id) == 16
    assert len({n.id for n in dag.nodes.values()}) == len(dag.nodes)


def _edited(files: dict[str, str], path: str, old: str, new: str) -> dict[str, str]:
    assert old in files[path]
    return {**files, path: files[path].replace(old, new)}


def test_retry_and_max_concurrency_do_not_change_ids(tmp_path: Path) -> None:
    before = _compile(tmp_path / "a", FILES)
    files = _edited(FILES, "sources/files.yml", "max_concurrency: 2", "")
    files = _edited(files, "sources/files.yml", "retry: { max_attempts: 5 }", "")
    files = _edited(files, "project.yml", "max_attempts: 2", "max_attempts: 9")
    after = _compile(tmp_path / "b", files)
    assert {n: x.id for n, x in after.nodes.items()} == {n: x.id for n, x in before.nodes.items()}
    assert after.nodes["lake.copy"] != before.nodes["lake.copy"]  # ... though the work items differ


def test_what_a_node_does_changes_its_id_and_everything_downstream(tmp_path: Path) -> None:
    before = _compile(tmp_path / "a", FILES)
    after = _compile(tmp_path / "b", _edited(FILES, "sinks/wh.yml", "keys: [id]", "keys: [id, total]"))
    changed = {n for n in before.nodes if before.nodes[n].id != after.nodes[n].id}
    assert changed == {"wh.totals"}
    after = _compile(tmp_path / "c", _edited(FILES, "data/orders.csv", "10.50", "10.60"))
    assert all(before.nodes[n].id == after.nodes[n].id for n in before.nodes)  # data is not the node
    after = _compile(tmp_path / "d", _edited(FILES, "pipelines/big.sql", ">=", ">"))
    changed = {n for n in before.nodes if before.nodes[n].id != after.nodes[n].id}
    assert changed == {
        "totals",
        "chk_totals__unique_id",
        "chk_totals__not_null_total",
        "wh.totals",
        "lake.copy",
    }


def test_every_node_and_work_item_survives_pickle(dag: CompiledDag) -> None:
    for node in dag.nodes.values():
        again = pickle.loads(pickle.dumps(node))
        assert again == node and type(again) is type(node)
        assert again.id == content_id(again, [dag.nodes[d].id for d in again.deps])
        work = node.work  # type: ignore[attr-defined]
        assert pickle.loads(pickle.dumps(work)) == work


def test_work_items_are_frozen(dag: CompiledDag) -> None:
    node = dag.nodes["src_files__orders"]
    assert isinstance(node, SourceLoadNode)
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.work.table = "x"  # type: ignore[misc]


def test_plan_reads_the_nodes(dag: CompiledDag) -> None:
    plan, diags = build_plan(dag)
    assert not diags
    assert plan.names == list(dag.nodes)
    load = plan.get("src_files__orders")
    assert (load.tier, load.connector, load.max_concurrency, load.declares_retry) == (
        Tier.NATIVE,
        "localfiles",
        2,
        True,
    )
    wh = plan.get("wh.totals")
    assert wh.strategy is Strategy.MERGE and wh.guarantee is not None and "upsert on keys" in wh.guarantee
    assert plan.get("lake.copy").guarantee is not None
    assert plan.get("totals").tier is None and plan.get("totals").retry.max_attempts == 2


def test_plan_selection_adds_back_ancestors(dag: CompiledDag) -> None:
    plan, diags = build_plan(dag, select=["lake.copy"])
    assert not diags
    assert plan.names[-1] == "lake.copy"
    assert set(plan.names) == {
        "src_files__orders",
        "src_files__customers",
        "chk_src_files__orders__not_null_id",
        "totals",
        "chk_totals__unique_id",  # the write waits for the pipeline's error checks
        "lake.copy",
    }
    _, diags = build_plan(dag, select=["totls"])
    assert [d.code for d in diags] == ["PZ0250", "PZ0251"] and "totals" in diags[0].message
    assert not any(d.is_error for d in diags)  # as dbt: a warning, nothing runs


def test_force_universal_is_decided_once_into_the_work_item(tmp_path: Path) -> None:
    files = _edited(FILES, "project.yml", "engine: {", "engine: { force_universal: true,")
    files = {
        **files,
        "sources/pq.yml": "connector: localfiles\nconnection: { root: data }\n"
        "datasets:\n  p: { format: parquet, path: p.parquet, columns: { id: bigint } }\n",
        "pipelines/from_pq.sql": "SELECT * FROM {{ source('pq', 'p') }}\n",
    }
    dag = _compile(tmp_path / "p", files)
    csv_load, pq_load = dag.nodes["src_files__orders"], dag.nodes["src_pq__p"]
    assert isinstance(csv_load, SourceLoadNode) and isinstance(pq_load, SourceLoadNode)
    assert csv_load.work.tier is Tier.UNIVERSAL and csv_load.work.request.force_universal
    assert pq_load.work.tier is Tier.NATIVE  # native-only format: refused with PZ0312 when it starts
    plan, diags = build_plan(dag)
    assert not diags
    assert plan.get("src_pq__p").note is not None and "PZ0312" in (plan.get("src_pq__p").note or "")
    wh = dag.nodes["wh.totals"]
    assert (
        isinstance(wh, SinkWriteNode) and wh.work.tier is Tier.UNIVERSAL and wh.work.endpoint.force_universal
    )
    assert [d.code for d in diags] == []


PG_FILES = {
    "project.yml": "name: shop\nenv:\n  PW: { required: true, secret: true }\n",
    "sources/pg.yml": """
        connector: postgres
        connection: { host: db1, port: 5432, database: shop, user: pz, password: "{{ env('PW') }}" }
        datasets:
          orders: { table: public.orders, columns: { id: bigint } }
    """,
    "sinks/s3.yml": """
        connector: s3
        connection:
          endpoint: http://127.0.0.1:9000
          bucket: lake
          access_key_id: AKIA1
          secret_access_key: "{{ env('PW') }}"
    """,
    "sinks/wh.yml": """
        connector: postgres
        connection: { dsn: "postgresql://pz:{{ env('PW') }}@db2:5432/wh?sslmode=require" }
    """,
    "pipelines/copy.sql": """
        INSERT INTO {{ sink('s3', 'copy') }}
        INSERT INTO {{ sink('wh', 'copy') }}
        SELECT id FROM {{ source('pg', 'orders') }}
    """,
}


def _pg_ids(root: Path, files: dict[str, str], password: str = "one") -> dict[str, str]:
    write_project(root, files)
    project, diags = load_project(root)
    assert project is not None, diags
    result = compile_project(project, {}, {"PW": password})
    assert result.ok and result.dag is not None, result.errors
    return {n: x.id for n, x in result.dag.nodes.items()}


def test_credentials_are_not_part_of_a_nodes_identity_where_the_data_is_is(tmp_path: Path) -> None:
    before = _pg_ids(tmp_path / "a", PG_FILES)
    assert _pg_ids(tmp_path / "b", PG_FILES, password="rotated") == before  # password, secret key, dsn's
    signed_in = _edited(PG_FILES, "sources/pg.yml", "user: pz", "user: pz_v2")
    signed_in = _edited(signed_in, "sinks/s3.yml", "AKIA1", "AKIA2")
    signed_in = _edited(signed_in, "sinks/wh.yml", "?sslmode=require", "")
    assert _pg_ids(tmp_path / "c", signed_in) == before  # user, access key, TLS mode
    for path, old, new, changed in [
        ("sources/pg.yml", "host: db1", "host: db9", "src_pg__orders"),
        ("sources/pg.yml", "port: 5432", "port: 5433", "src_pg__orders"),
        ("sources/pg.yml", "database: shop", "database: shop2", "src_pg__orders"),
        ("sinks/s3.yml", "bucket: lake", "bucket: lake2", "s3.copy"),
        ("sinks/wh.yml", "@db2:5432/wh", "@db2:5432/wh2", "wh.copy"),
    ]:
        after = _pg_ids(tmp_path / f"{changed}-{new}", _edited(PG_FILES, path, old, new))
        assert after[changed] != before[changed], (old, new)


def test_a_connection_string_keeps_its_address_and_loses_its_credentials() -> None:
    from pipelinez.compile.connection_identity import strip_credentials

    assert strip_credentials("postgresql://u:p@h:5432/db?sslmode=require&application_name=x") == (
        "postgresql://h:5432/db?application_name=x"
    )
    assert strip_credentials("host=h port=5432 dbname=db user=u password='a b' sslmode=require") == (
        "dbname=db host=h port=5432"
    )
    assert strip_credentials(
        "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=abc==;BlobEndpoint=http://h/acct;"
    ) == ("AccountName=acct;BlobEndpoint=http://h/acct")


def test_loads_of_one_source_share_its_endpoint_and_ids_need_no_memo(dag: CompiledDag) -> None:
    """One Endpoint per instance in a build; an id found through the build's memo is the id without it."""
    orders, customers = dag.nodes["src_files__orders"], dag.nodes["src_files__customers"]
    assert isinstance(orders, SourceLoadNode) and isinstance(customers, SourceLoadNode)
    assert orders.work.endpoint is customers.work.endpoint
    memo: dict[int, tuple[object, object]] = {}
    for node in dag.nodes.values():
        inputs = [dag.nodes[d].id for d in node.deps]
        assert content_id(node, inputs, memo) == content_id(node, inputs) == node.id
    assert any(isinstance(kept, type(orders.work.endpoint)) for kept, _ in memo.values())


def test_a_secret_in_an_inlined_ephemeral_is_masked_in_the_readers_display_sql(tmp_path: Path) -> None:
    """The reader of an ephemeral whose query holds a secret: its SQL holds the value, its display SQL the
    mask (the display text is resolved on its own whenever an inlined query's display text differs)."""
    files = {
        **FILES,
        "pipelines/big.sql": """
            SELECT * FROM {{ source('files', 'orders') }} -- token {{ env('LAKE_TOKEN') }}
        """,
    }
    node = _compile(tmp_path / "p", files).nodes["totals"]
    assert isinstance(node, PipelineNode)
    assert SECRET in node.work.sql
    assert SECRET not in node.display_sql and "-- token " in node.display_sql
