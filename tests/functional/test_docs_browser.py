"""The docs page in a real headless browser (Debian's chromium, driven by Playwright; never a downloaded
browser): the quickstart's graph, search, a node's panel, a column's lineage, and the timeline of a failed
run and of the retry that finished it. No console error, and no request leaves the site's folder."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelinez.api import init_project
from tests.conftest import pz

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
if not Path(CHROMIUM).exists() and os.environ.get("CI") == "true":  # CI never skips them: .ci/run installs it
    raise RuntimeError("Debian's chromium is missing: .ci/run must install it for the browser tests")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart after a run whose warehouse write failed and the `pz retry` that finished it."""
    root = tmp_path_factory.mktemp("docs") / "qs"
    init_project(root)
    failed = pz(root, "run", env={"PZ_FAILPOINTS": "sink.write@warehouse.customer_revenue"})
    assert failed.exit_code == 1, failed.output
    retried = pz(root, "retry")
    assert retried.exit_code == 0, retried.output
    out = root.parent / "site"
    assert pz(root, "docs", "generate", "--out", str(out)).exit_code == 0
    return out


class Page:
    def __init__(self, page: Any, folder: Path):
        self.page = page
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))
        page.goto((folder / "index.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")

    def texts(self, selector: str, attribute: str) -> list[str]:
        found: list[str] = self.page.locator(selector).evaluate_all(
            f"els => els.map(e => e.getAttribute('{attribute}'))"
        )
        return found


@pytest.fixture
def page(site: Path) -> Iterator[Page]:
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            opened = Page(tab, site)
            yield opened
            assert opened.errors == []
            allowed = {(site / name).as_uri() for name in ("index.html", "app.js", "app.css")}
            assert set(opened.requests) <= allowed, opened.requests
        finally:
            browser.close()


def test_the_graph_shows_every_node_and_search_opens_a_panel_with_columns_and_sql(page: Page) -> None:
    p = page.page
    assert p.locator("#graph .node").count() == 14
    assert p.locator("#graph .node.source").count() == 3 and p.locator("#graph .node.sink").count() == 2
    p.fill("#search", "orders_enr")
    found = page.texts("#search-results li", "data-id")
    assert found[:2] == ["orders_enriched", "lake.orders_enriched"]  # names starting so first
    assert len(found) == 6 and all("orders_enriched" in name for name in found)
    p.locator('#search-results li[data-id="orders_enriched"]').click()
    assert p.get_attribute("#panel", "data-node") == "orders_enriched"
    assert p.locator("#panel h2").inner_text() == "orders_enriched"
    assert page.texts("#panel table.columns tr[data-column]", "data-column") == [
        "order_id",
        "amount",
        "status",
        "ordered_at",
        "shipped_at",
        "customer",
        "country",
    ]
    assert "JOIN" in p.locator("#panel pre.sql").inner_text()
    assert page.texts("#panel pre.sql a.ref", "data-target") == ["shipped_orders", "src_files__customers"]
    p.locator('#panel pre.sql a.ref[data-target="shipped_orders"]').click()  # a ref() is a link
    assert p.get_attribute("#panel", "data-node") == "shipped_orders"
    p.locator('#graph .node[data-id="warehouse.customer_revenue"]').click()  # a click on the graph
    assert p.locator("#panel h2").inner_text() == "warehouse.customer_revenue"
    assert "replace" in p.locator("#panel table.facts").inner_text()


def test_a_columns_lineage_highlights_exactly_its_upstream_columns(page: Page) -> None:
    p = page.page
    p.locator('#graph .node[data-id="customer_revenue"]').click()
    p.locator('button.lin[data-column="revenue"]').click()
    upstream = page.texts("#lineage ul.lineage-up li", "data-column")
    assert sorted(upstream) == ["files.orders.amount", "orders_enriched.amount", "shipped_orders.amount"]
    assert page.texts("#lineage ul.lineage-down li", "data-column") == ["warehouse.customer_revenue.revenue"]
    assert sorted(page.texts("#graph .node.lin-up", "data-id")) == [
        "orders_enriched",
        "shipped_orders",
        "src_files__orders",
    ]
    assert page.texts("#graph .node.lin-self", "data-id") == ["customer_revenue"]
    p.locator('#graph .node[data-id="src_files__orders"]').click()  # and forward from a source column
    p.locator('button.lin[data-column="amount"]').click()
    assert page.texts("#lineage ul.lineage-up li", "data-column") == []
    assert sorted(page.texts("#lineage ul.lineage-down li", "data-column")) == [
        "customer_revenue.revenue",
        "lake.orders_enriched.amount",
        "orders_enriched.amount",
        "shipped_orders.amount",
        "warehouse.customer_revenue.revenue",
    ]


def test_the_graph_zooms(page: Page) -> None:
    p = page.page
    width = float(p.get_attribute("#graph", "width") or 0)
    p.click("#zoom-out")
    assert float(p.get_attribute("#graph", "width") or 0) == round(width * 0.8)
    p.click("#zoom-reset")
    assert float(p.get_attribute("#graph", "width") or 0) == width


def test_the_timelines_show_the_failed_node_then_what_the_retry_reused_and_carried_forward(
    page: Page,
) -> None:
    p = page.page
    p.click("button[data-view=runs]")
    runs = page.texts("#runs-list tr[data-run]", "data-run")
    assert len(runs) == 2
    retry_rows = "#timeline g.row[data-node]"
    p.wait_for_selector(f'#timeline[data-run="{runs[0]}"]')
    reused = page.texts(f'{retry_rows}[data-provenance="reused"]', "data-node")
    assert sorted(reused) == ["src_files__customers", "src_files__events", "src_files__orders"]
    carried = page.texts(f'{retry_rows}[data-provenance="carried_forward"]', "data-node")
    assert carried == ["lake.orders_enriched"]
    assert "carried forward" in p.locator(f'{retry_rows}[data-node="lake.orders_enriched"]').inner_html()
    p.locator(f'#runs-list tr[data-run="{runs[1]}"]').click()
    p.wait_for_selector(f'#timeline[data-run="{runs[1]}"]')
    assert page.texts(f'{retry_rows}[data-status="failed"]', "data-node") == ["warehouse.customer_revenue"]
    assert page.texts(f"{retry_rows}[data-critical]", "data-node")[-1] == "warehouse.customer_revenue"
    p.click("button[data-view=checks]")
    assert p.locator("#checks-table tr[data-check]").count() == 6
