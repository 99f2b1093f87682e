"""`pz docs generate` and `pz docs serve`: the static site is one index.html holding the docs document
(JSON, inside a `<script type="application/json">`) plus app.js and app.css, copied from the package. The
page loads nothing else: no CDN, no fetch, so it opens from the file system as well as from `pz docs serve`.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pipelinez.compile.lineage import project_lineage, staging_tables
from pipelinez.core.diagnostics import Diagnostic, PzConfigError, error
from pipelinez.core.json_types import JsonObject
from pipelinez.docs_site.model import DocsInputs, docs_document
from pipelinez.engine.run import prepare

ASSETS = ("app.js", "app.css")
GENERATOR = '<meta name="generator" content="pz docs">'  # marks a folder pz docs may overwrite
DATA_MARK = "/*PZ_DOCS_DATA*/"


@dataclass(frozen=True)
class DocsSite:
    """A generated site: its folder, index.html, how many graph nodes and runs it shows."""

    folder: Path
    index: Path
    nodes: int
    runs: int
    warnings: tuple[Diagnostic, ...] = ()  # the project's validation warnings (as `pz plan` prints them)


def _template(name: str) -> str:
    return resources.files("pipelinez.docs_site").joinpath("templates", name).read_text(encoding="utf-8")


def _refuse_foreign(out: Path) -> None:
    """PZ0540: `--out` holds files that are not a site pz docs wrote: never overwrite them."""
    if not out.exists():
        return
    if not out.is_dir():
        raise PzConfigError([_taken(out, "it is a file")])
    entries = {p.name for p in out.iterdir()}
    if not entries:
        return
    index = out / "index.html"
    ours = index.is_file() and GENERATOR in index.read_text(encoding="utf-8", errors="replace")[:2000]
    if not ours or not entries <= {"index.html", *ASSETS}:
        raise PzConfigError([_taken(out, "it holds files pz docs did not write")])


def _taken(out: Path, why: str) -> Diagnostic:
    return error(
        "PZ0540",
        f"pz docs cannot write its site into '{out}': {why}",
        file=str(out),
        next_step="pass --out with an empty or new folder, or the folder of an earlier pz docs generate",
    )


def page(document: JsonObject) -> str:
    """index.html with the document embedded; `</` escaped so no value can close the script element."""
    data = json.dumps(document, separators=(",", ":"), ensure_ascii=False).replace("</", "<\\/")
    return _template("index.html").replace(DATA_MARK, data)


def generate(
    root: Path,
    out: Path,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    runs: int = 20,
) -> DocsSite:
    _refuse_foreign(out)
    plan, described, warnings = prepare.described_plan(root, (), (), overrides, environ, describe=True)
    assert described is not None
    lineage = project_lineage(described, staging_tables(plan.dag.nodes))
    document = docs_document(DocsInputs(plan, described, lineage, runs))
    out.mkdir(parents=True, exist_ok=True)
    (out / "index.html").write_text(page(document), encoding="utf-8")
    for asset in ASSETS:
        (out / asset).write_text(_template(asset), encoding="utf-8")
    return DocsSite(out, out / "index.html", len(document["nodes"]), len(document["runs"]), tuple(warnings))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the base class's name
        pass


@dataclass
class DocsServer:
    """The site served on loopback at `url`: `serve_forever()` blocks, `shutdown()` stops it."""

    server: http.server.ThreadingHTTPServer

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread


def server(folder: Path, port: int = 8080) -> DocsServer:
    handler = functools.partial(_QuietHandler, directory=str(folder))
    return DocsServer(http.server.ThreadingHTTPServer(("127.0.0.1", port), handler))
