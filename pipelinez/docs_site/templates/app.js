/* pz docs: a viewer of the document embedded in index.html. No network, no libraries. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("pz-data").textContent);
  var NODE_W = 190, NODE_H = 26, GAP_X = 44, GAP_Y = 10, PAD = 16;
  var byId = {}, byLabel = {}, selected = null;
  DATA.nodes.forEach(function (n) { byId[n.id] = n; byLabel[n.label] = n; });
  var pipelineLineage = {};  // pipeline -> column -> {upstream, unresolved}
  DATA.nodes.forEach(function (n) { if (n.kind === "pipeline") pipelineLineage[n.id] = n.panel.lineage || {}; });

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function x(n) { return PAD + n.layer * (NODE_W + GAP_X); }
  function y(n) { return PAD + n.row * (NODE_H + GAP_Y); }
  function short(s) { return s.length > 30 ? s.slice(0, 28) + "\u2026" : s; }

  /* ---------------- graph ---------------- */
  function drawGraph() {
    var svg = document.getElementById("graph");
    var maxX = 0, maxY = 0, parts = [], edges = [];
    DATA.nodes.forEach(function (n) {
      var nx = x(n), ny = y(n);
      maxX = Math.max(maxX, nx + NODE_W); maxY = Math.max(maxY, ny + NODE_H);
      var status = n.status ? '<rect class="status st-' + esc(n.status) + '" x="' + (nx + NODE_W - 8) + '" y="' + ny +
        '" width="8" height="' + NODE_H + '"></rect>' : "";
      parts.push('<g class="node ' + esc(n.kind) + '" data-id="' + esc(n.id) + '" data-status="' + esc(n.status || "") +
        '"><rect x="' + nx + '" y="' + ny + '" width="' + NODE_W + '" height="' + NODE_H + '"></rect>' + status +
        '<text x="' + (nx + 6) + '" y="' + (ny + 17) + '">' + esc(short(n.label)) + "</text><title>" + esc(n.kind + ": " + n.label) +
        "</title></g>");
      n.deps.forEach(function (d) {
        var m = byId[d]; if (!m) return;
        var x1 = x(m) + NODE_W, y1 = y(m) + NODE_H / 2, x2 = nx, y2 = ny + NODE_H / 2, cx = (x1 + x2) / 2;
        edges.push("M" + x1 + " " + y1 + "C" + cx + " " + y1 + " " + cx + " " + y2 + " " + x2 + " " + y2);
      });
    });
    graphSize = [maxX + PAD, maxY + PAD];
    svg.setAttribute("viewBox", "0 0 " + graphSize[0] + " " + graphSize[1]);
    zoom(1);
    svg.innerHTML = '<path class="edges" d="' + edges.join("") + '"></path><path class="edges hl" id="edges-hl" d=""></path>' + parts.join("");
    svg.addEventListener("click", function (ev) {
      var g = ev.target.closest && ev.target.closest(".node");
      if (g) select(g.getAttribute("data-id"), false);
    });
  }
  var nodeEls = null;  // id -> its <g>, built once after the graph is drawn
  var graphSize = [0, 0], scale = 1;
  function zoom(factor) {
    var svg = document.getElementById("graph");
    scale = factor === 1 ? 1 : Math.min(2, Math.max(0.05, scale * factor));
    svg.setAttribute("width", Math.round(graphSize[0] * scale)); svg.setAttribute("height", Math.round(graphSize[1] * scale));
    svg.setAttribute("data-scale", scale.toFixed(2));
  }
  function fit() {
    var wrap = document.getElementById("graph-wrap");
    scale = 1; zoom(Math.min(1, wrap.clientWidth / graphSize[0], wrap.clientHeight / graphSize[1]) / 1);
  }
  function nodeEl(id) {
    if (nodeEls === null) {
      nodeEls = {};
      document.querySelectorAll("#graph .node").forEach(function (g) { nodeEls[g.getAttribute("data-id")] = g; });
    }
    return nodeEls[id];
  }
  function clearClass(cls) { document.querySelectorAll("." + cls).forEach(function (e) { e.classList.remove(cls); }); }
  function highlightEdges(id) {
    var n = byId[id], d = [];
    function edge(a, b) {
      var x1 = x(a) + NODE_W, y1 = y(a) + NODE_H / 2, x2 = x(b), y2 = y(b) + NODE_H / 2, cx = (x1 + x2) / 2;
      d.push("M" + x1 + " " + y1 + "C" + cx + " " + y1 + " " + cx + " " + y2 + " " + x2 + " " + y2);
    }
    if (n) {
      n.deps.forEach(function (dep) { if (byId[dep]) edge(byId[dep], n); });
      DATA.nodes.forEach(function (m) { if (m.deps.indexOf(id) >= 0) edge(n, m); });
    }
    document.getElementById("edges-hl").setAttribute("d", d.join(""));
  }
  function select(id, scroll) {
    var n = byId[id]; if (!n) return;
    selected = id;
    clearClass("selected"); clearClass("lin-up"); clearClass("lin-down"); clearClass("lin-self");
    var g = nodeEl(id);
    if (g) {
      g.classList.add("selected");
      if (scroll) {
        var wrap = document.getElementById("graph-wrap");
        wrap.scrollLeft = Math.max(0, x(n) * scale - wrap.clientWidth / 2);
        wrap.scrollTop = Math.max(0, y(n) * scale - wrap.clientHeight / 2);
      }
    }
    highlightEdges(id);
    showPanel(n);
  }

  /* ---------------- search ---------------- */
  function setupSearch() {
    var input = document.getElementById("search"), list = document.getElementById("search-results");
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      clearClass("match"); list.innerHTML = "";
      if (!q) { list.hidden = true; return; }
      var rank = function (n) { var l = n.label.toLowerCase(); return l === q ? 0 : l.indexOf(q) === 0 ? 1 : l.indexOf(q) >= 0 ? 2 : 3; };
      var hits = DATA.nodes.filter(function (n) { return n.label.toLowerCase().indexOf(q) >= 0 || n.id.toLowerCase().indexOf(q) >= 0; });
      hits.sort(function (a, b) { return rank(a) - rank(b) || a.label.length - b.label.length || (a.label < b.label ? -1 : 1); });
      hits.slice(0, 50).forEach(function (n) {
        var li = el("li", { "data-id": n.id }, n.label);
        li.appendChild(el("span", { "class": "badge" }, n.kind));
        li.addEventListener("click", function () { list.hidden = true; clearClass("match"); showView("graph"); select(n.id, true); });
        list.appendChild(li);
      });
      hits.forEach(function (n) { var g = nodeEl(n.id); if (g) g.classList.add("match"); });
      list.hidden = hits.length === 0;
    });
    input.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter") { var first = list.querySelector("li"); if (first) first.click(); }
      if (ev.key === "Escape") { list.hidden = true; }
    });
  }

  /* ---------------- panel ---------------- */
  function kv(table, key, value) {
    if (value === null || value === undefined || value === "" || (Array.isArray(value) && !value.length)) return;
    var tr = el("tr"); tr.appendChild(el("th", null, key));
    tr.appendChild(el("td", null, typeof value === "object" ? JSON.stringify(value) : value));
    table.appendChild(tr);
  }
  function statusBadge(status) { return el("span", { "class": "badge st-" + status }, status); }
  function checksOf(n) {
    var table = n.kind === "source" ? n.panel.staging_table : n.id;
    return DATA.nodes.filter(function (c) { return c.kind === "check" && c.panel.target === table; });
  }
  function sqlWithLinks(sql) {
    var pre = el("pre", { "class": "sql" }), re = /"?([A-Za-z_][A-Za-z0-9_]*)"?/g, last = 0, m;
    var tables = {};
    DATA.nodes.forEach(function (n) {
      if (n.kind === "pipeline") tables[n.id] = n.id;
      if (n.kind === "source") tables[n.panel.staging_table] = n.id;
    });
    while ((m = re.exec(sql)) !== null) {
      var target = tables[m[1]];
      if (!target) continue;
      pre.appendChild(document.createTextNode(sql.slice(last, m.index)));
      var n = byId[target];
      var a = el("a", { "class": "ref", "data-target": target, title: n.kind === "source" ? "source('" + n.label.replace(".", "', '") + "')" : "ref('" + n.id + "')" }, m[0]);
      a.addEventListener("click", function (ev) { select(ev.target.getAttribute("data-target"), true); });
      pre.appendChild(a); last = m.index + m[0].length;
    }
    pre.appendChild(document.createTextNode(sql.slice(last)));
    return pre;
  }
  function columnsTable(n, withLineage) {
    var table = el("table", { "class": "columns" }), head = el("tr");
    ["column", "type", "description", ""].forEach(function (h) { head.appendChild(el("th", null, h)); });
    table.appendChild(head);
    (n.panel.columns || []).forEach(function (c) {
      var tr = el("tr", { "data-column": c.name });
      tr.appendChild(el("td", null, c.name)); tr.appendChild(el("td", { "class": "muted" }, c.type));
      var desc = el("td", null, c.description || "");
      var lin = (pipelineLineage[n.id] || {})[c.name];
      if (lin && lin.unresolved) desc.appendChild(el("div", { "class": "unresolved" }, "lineage unresolved: " + lin.unresolved));
      tr.appendChild(desc);
      var td = el("td");
      if (withLineage) {
        var b = el("button", { "class": "lin", "data-column": c.name }, "lineage");
        b.addEventListener("click", function () { showLineage(n, c.name); });
        td.appendChild(b);
      }
      tr.appendChild(td); table.appendChild(tr);
    });
    return table;
  }
  function showPanel(n) {
    var p = document.getElementById("panel"), P = n.panel;
    p.hidden = false; p.innerHTML = ""; p.setAttribute("data-node", n.id);
    var h = el("h2", null, P.title || n.label); p.appendChild(h);
    var meta = el("div"); meta.appendChild(el("span", { "class": "badge" }, n.kind));
    if (n.status) meta.appendChild(statusBadge(n.status));
    (n.tags || []).forEach(function (t) { meta.appendChild(el("span", { "class": "badge tag" }, "#" + t)); });
    p.appendChild(meta);
    if (P.description) p.appendChild(el("p", { "class": "description" }, P.description));
    var facts = el("table", { "class": "facts" });
    kv(facts, "file", P.file); kv(facts, "connector", P.connector); kv(facts, "materialized", P.materialized);
    kv(facts, "strategy", P.strategy); kv(facts, "keys", P.keys); kv(facts, "duplicates", P.duplicates);
    kv(facts, "guarantee", P.guarantee); kv(facts, "tier", P.tier); kv(facts, "options", P.options && Object.keys(P.options).length ? P.options : null);
    if (P.incremental) { kv(facts, "cursor", P.incremental.cursor); kv(facts, "watermark", P.incremental.watermark || "(none committed)"); kv(facts, "reads", P.incremental.reads); }
    if (P.retry) kv(facts, "retry", ["max_attempts", "base_delay", "max_delay"].map(function (k) { return k + "=" + JSON.stringify(P.retry[k]); }).join(", "));
    if (n.kind === "check") {
      kv(facts, "type", P.type); kv(facts, "severity", P.severity); kv(facts, "checks", P.target); kv(facts, "column", P.column); kv(facts, "check options", P.options);
      kv(facts, "where", P.where);
      if (P.warn_if && P.warn_if !== "!=0") kv(facts, "warn_if", P.warn_if);
      if (P.error_if && P.error_if !== "!=0") kv(facts, "error_if", P.error_if);
    }
    if (n.kind === "source" && !P.contract) kv(facts, "columns from", "no columns: contract: the schema cache, the file, or the newest run that staged it");
    p.appendChild(facts);
    if (P.sinks && P.sinks.length) {
      p.appendChild(el("h3", null, "Writes to"));
      P.sinks.forEach(function (s) {
        var a = el("a", { "class": "ref", "data-target": byLabel[s] ? byLabel[s].id : "" }, "sink('" + s.replace(".", "', '") + "')");
        a.addEventListener("click", function () { if (byLabel[s]) select(byLabel[s].id, true); });
        p.appendChild(a); p.appendChild(el("br"));
      });
    }
    if (n.kind === "sink" && P.pipeline) {
      p.appendChild(el("h3", null, "Written from"));
      var a = el("a", { "class": "ref" }, P.pipeline); a.addEventListener("click", function () { select(P.pipeline, true); }); p.appendChild(a);
    }
    if (P.columns && P.columns.length) { p.appendChild(el("h3", null, "Columns")); p.appendChild(columnsTable(n, n.kind !== "check")); }
    p.appendChild(el("div", { id: "lineage" }));
    if (P.sql) { p.appendChild(el("h3", null, "SQL")); p.appendChild(sqlWithLinks(P.sql)); }
    var checks = n.kind === "check" ? [n] : checksOf(n);
    if (checks.length) {
      p.appendChild(el("h3", null, n.kind === "check" ? "Outcomes" : "Checks"));
      var t = el("table", { "class": "checks" });
      checks.forEach(function (c) {
        var tr = el("tr"); tr.appendChild(el("td", null, c.label));
        var hist = DATA.checks[c.id] || [], td = el("td");
        hist.slice(-10).forEach(function (h) { td.appendChild(el("span", { "class": "cell " + h.status, title: h.run_id + ": " + h.status + (h.message ? " \u2014 " + h.message : "") })); td.appendChild(document.createTextNode(" ")); });
        if (!hist.length) td.appendChild(el("span", { "class": "muted" }, "not run yet"));
        tr.appendChild(td); t.appendChild(tr);
      });
      p.appendChild(t);
    }
  }

  /* ---------------- lineage ---------------- */
  function refNode(kind, table) { return kind === "source" ? byLabel[table] : byId[table]; }
  function upstream(pipeline, column, out, seen) {
    var lin = (pipelineLineage[pipeline] || {})[column];
    if (!lin) return;
    lin.upstream.forEach(function (r) {
      var key = r[1] + "." + r[2];
      if (seen[key]) return; seen[key] = true;
      out.push({ kind: r[0], table: r[1], column: r[2], unresolved: r[0] === "pipeline" && (pipelineLineage[r[1]] || {})[r[2]] ? pipelineLineage[r[1]][r[2]].unresolved : null });
      if (r[0] === "pipeline") upstream(r[1], r[2], out, seen);
    });
  }
  var readers = null;  // "kind|table|column" -> the pipeline columns computed from it (built once)
  function downstream(kind, table, column, out, seen) {
    if (readers === null) {
      readers = {};
      Object.keys(pipelineLineage).forEach(function (p) {
        var cols = pipelineLineage[p];
        Object.keys(cols).forEach(function (c) {
          cols[c].upstream.forEach(function (r) { (readers[r.join("|")] = readers[r.join("|")] || []).push([p, c]); });
        });
      });
    }
    (readers[[kind, table, column].join("|")] || []).forEach(function (pc) {
      var key = pc[0] + "." + pc[1]; if (seen[key]) return; seen[key] = true;
      out.push({ kind: "pipeline", table: pc[0], column: pc[1] });
      downstream("pipeline", pc[0], pc[1], out, seen);
    });
  }
  function sinksOf(pipeline, column) {
    return DATA.nodes.filter(function (n) { return n.kind === "sink" && n.panel.pipeline === pipeline; })
      .map(function (n) { return { kind: "sink", table: n.label, column: column, id: n.id }; });
  }
  function showLineage(n, column) {
    var source = n.kind === "source";
    var pipeline = n.kind === "sink" ? n.panel.pipeline : n.id;
    var up = [], down = [];
    if (!source) upstream(pipeline, column, up, {});
    downstream(source ? "source" : "pipeline", source ? n.label : pipeline, column, down, {});
    var sinks = source ? [] : sinksOf(pipeline, column);
    down.forEach(function (d) { sinks = sinks.concat(sinksOf(d.table, d.column)); });
    clearClass("lin-up"); clearClass("lin-down"); clearClass("lin-self");
    var self = nodeEl(source ? n.id : pipeline); if (self) self.classList.add("lin-self");
    up.forEach(function (u) { var m = refNode(u.kind, u.table); var g = m && nodeEl(m.id); if (g) g.classList.add("lin-up"); });
    down.forEach(function (d) { var g = nodeEl(d.table); if (g) g.classList.add("lin-down"); });
    sinks.forEach(function (s) { var g = nodeEl(s.id); if (g) g.classList.add("lin-down"); });
    var box = document.getElementById("lineage"); box.innerHTML = "";
    var div = el("div", { "class": "lineage-box", "data-column": (source ? n.label : pipeline) + "." + column });
    div.appendChild(el("strong", null, "Lineage of " + (source ? n.label : pipeline) + "." + column));
    var own = (pipelineLineage[pipeline] || {})[column];
    if (own && own.unresolved) div.appendChild(el("div", { "class": "unresolved" }, "unresolved: " + own.unresolved));
    function list(title, items, cls) {
      div.appendChild(el("div", { "class": "muted" }, title + " (" + items.length + ")"));
      var ul = el("ul", { "class": cls });
      items.forEach(function (i) {
        var li = el("li", { "data-column": i.table + "." + i.column, "data-kind": i.kind }, i.table + "." + i.column + (i.kind === "source" ? "  [source]" : i.kind === "sink" ? "  [sink]" : ""));
        if (i.unresolved) li.appendChild(el("span", { "class": "unresolved" }, " \u2014 unresolved: " + i.unresolved));
        ul.appendChild(li);
      });
      div.appendChild(ul);
    }
    list("Upstream columns", up, "lineage-up");
    list("Downstream columns", down.concat(sinks), "lineage-down");
    if (own && !own.unresolved && !own.upstream.length) div.appendChild(el("div", { "class": "muted" }, "computed from no column (a constant or count(*))"));
    box.appendChild(div);
  }

  /* ---------------- runs and timeline ---------------- */
  function fmtMs(ms) { return ms === null || ms === undefined ? "-" : ms >= 1000 ? (ms / 1000).toFixed(1) + "s" : Math.round(ms) + "ms"; }
  function drawRuns() {
    var box = document.getElementById("runs-list");
    if (!DATA.runs.length) { box.appendChild(el("p", { "class": "muted" }, "No runs yet: pz run, then pz docs generate again.")); return; }
    var t = el("table"), head = el("tr");
    ["run", "command", "status", "started", "duration", "nodes"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    t.appendChild(head);
    DATA.runs.forEach(function (r, i) {
      var tr = el("tr", { "data-run": r.run_id });
      tr.appendChild(el("td", null, r.run_id + (r.retry_of ? " (retry of " + r.retry_of + ")" : "")));
      tr.appendChild(el("td", null, r.command));
      var st = el("td"); st.appendChild(statusBadge(r.status)); tr.appendChild(st);
      tr.appendChild(el("td", null, r.started_at)); tr.appendChild(el("td", null, fmtMs(r.duration_ms)));
      tr.appendChild(el("td", null, r.nodes.length));
      tr.addEventListener("click", function () { showRun(i); });
      t.appendChild(tr);
    });
    box.appendChild(t);
    showRun(0);
  }
  function showRun(i) {
    var run = DATA.runs[i];
    currentRun = i;
    document.querySelectorAll("#runs-list tr").forEach(function (tr) { tr.classList.toggle("active", tr.getAttribute("data-run") === run.run_id); });
    var box = document.getElementById("timeline"); box.innerHTML = "";
    box.setAttribute("data-run", run.run_id);
    var title = el("h3", null, "Run " + run.run_id + " \u2014 " + run.status + ", " + fmtMs(run.duration_ms));
    box.appendChild(title);
    if (run.previous_run) box.appendChild(el("div", { "class": "muted" }, "compared with the previous run " + run.previous_run + " (\u25b2 = slower)"));
    var LABEL = 300, NUM = 230, W = Math.max(400, box.clientWidth - LABEL - NUM - 40), RH = 20;
    var end = Math.max(run.duration_ms || 0, 1);
    run.nodes.forEach(function (n) { if (n.end) end = Math.max(end, n.end); });
    run.breakers.forEach(function (b) { end = Math.max(end, b.end); });
    var sx = function (ms) { return LABEL + (Math.max(0, ms) / end) * W; };
    var rows = run.nodes.length + run.breakers.length, parts = [];
    var crit = {}; run.critical_path.forEach(function (c) { crit[c] = true; });
    parts.push('<text x="' + (LABEL + W + 10) + '" y="12" class="muted">rows \u00b7 rows/s \u00b7 duration</text>');
    run.nodes.forEach(function (n, k) {
      var top = 20 + k * RH, cls = "row" + (crit[n.name] ? " crit" : "");
      parts.push('<g class="' + cls + '" data-node="' + esc(n.name) + '" data-status="' + esc(n.status) + '"' +
        (n.provenance ? ' data-provenance="' + esc(n.provenance) + '"' : "") + (crit[n.name] ? ' data-critical="1"' : "") + ">");
      parts.push('<text class="label" x="4" y="' + (top + 14) + '">' + esc(short(n.name)) + "</text>");
      if (n.queued_from !== null && n.start !== null) parts.push('<rect class="bar queued" x="' + sx(n.queued_from) + '" y="' + (top + 6) + '" width="' + Math.max(1, sx(n.start) - sx(n.queued_from)) + '" height="6"><title>queued</title></rect>');
      n.spans.forEach(function (s) {
        var cls2 = s.kind === "backoff" ? "backoff" : s.kind === "carried" ? "carried" : s.ok ? "ok" : "failed";
        var label = s.kind === "backoff" ? "retry back-off" : s.kind === "carried" ? "carried forward" : "attempt " + s.attempt + (s.ok ? "" : " failed");
        parts.push('<rect class="bar ' + cls2 + '" data-kind="' + s.kind + '" x="' + sx(s.start) + '" y="' + (top + 3) + '" width="' + Math.max(2, sx(s.end) - sx(s.start)) + '" height="12"><title>' + esc(label + ", " + fmtMs(s.end - s.start)) + "</title></rect>");
      });
      var mark = n.provenance === "reused" ? "reused from " + (n.reused_from || "") : n.provenance === "carried_forward" || n.status === "carried_forward" ? "carried forward" : n.status === "skipped" ? "skipped" : n.status === "cancelled" ? "cancelled" : n.status === "failed" ? "failed" : "";
      if (mark) parts.push('<text class="mark" x="' + (n.end !== null ? sx(n.end) + 4 : LABEL + 4) + '" y="' + (top + 13) + '">' + esc(mark) + "</text>");
      var num = (n.rows || 0) + " \u00b7 " + (n.rows_per_s === null ? "-" : n.rows_per_s) + " \u00b7 " + fmtMs(n.duration_ms);
      parts.push('<text x="' + (LABEL + W + 10) + '" y="' + (top + 14) + '">' + esc(num) + "</text>");
      if (n.slower) parts.push('<text class="slower" x="' + (LABEL + W + NUM - 10) + '" y="' + (top + 14) + '">\u25b2 was ' + esc(fmtMs(n.previous_ms)) + "</text>");
      if (n.error) parts.push("<title>" + esc(n.error) + "</title>");
      parts.push("</g>");
    });
    run.breakers.forEach(function (b, k) {
      var top = 20 + (run.nodes.length + k) * RH;
      parts.push('<g class="row breaker"><text class="label" x="4" y="' + (top + 14) + '">breaker open: ' + esc(b.instance) + '</text><rect class="bar breaker" x="' + sx(b.start) + '" y="' + (top + 2) + '" width="' + Math.max(2, sx(b.end) - sx(b.start)) + '" height="14"></rect></g>');
    });
    var svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", "gantt"); svg.setAttribute("width", LABEL + W + NUM + 20); svg.setAttribute("height", 30 + rows * RH);
    svg.innerHTML = parts.join("");
    box.appendChild(svg);
    if (run.critical_path.length) box.appendChild(el("div", { "class": "muted" }, "critical path: " + run.critical_path.join(" \u2192 ")));
  }

  /* ---------------- checks over time ---------------- */
  function drawChecks() {
    var box = document.getElementById("checks-table"), names = DATA.nodes.filter(function (n) { return n.kind === "check"; });
    var runs = DATA.runs.slice().reverse(), t = el("table"), head = el("tr");
    head.appendChild(el("th", null, "check"));
    runs.forEach(function (r) { head.appendChild(el("th", { title: r.run_id }, r.started_at.slice(5, 16).replace("T", " "))); });
    t.appendChild(head);
    names.forEach(function (c) {
      var tr = el("tr", { "data-check": c.id }), hist = {};
      (DATA.checks[c.id] || []).forEach(function (h) { hist[h.run_id] = h; });
      tr.appendChild(el("td", null, c.label));
      runs.forEach(function (r) {
        var h = hist[r.run_id], td = el("td");
        td.appendChild(el("span", { "class": "cell " + (h ? h.status : "none"), "data-run": r.run_id, title: h ? h.status + (h.message ? ": " + h.message : "") : "not in this run" }));
        tr.appendChild(td);
      });
      t.appendChild(tr);
    });
    box.appendChild(t);
  }

  var currentRun = 0;
  function showView(name) {
    if (name === "runs" && DATA.runs.length) setTimeout(function () { showRun(currentRun); }, 0);
    document.querySelectorAll(".view").forEach(function (v) { v.hidden = v.id !== "view-" + name; });
    document.querySelectorAll("nav .tab").forEach(function (b) { b.classList.toggle("active", b.getAttribute("data-view") === name); });
  }
  function legend() {
    var box = document.getElementById("legend");
    [["source", "source dataset"], ["pipeline", "pipeline"], ["check", "check"], ["sink", "sink output"]].forEach(function (k) {
      var s = el("span"), i = el("i"); i.style.background = "var(--" + k[0] + ")"; s.appendChild(i); s.appendChild(document.createTextNode(k[1])); box.appendChild(s);
    });
    box.appendChild(el("span", { "class": "muted" }, DATA.nodes.length + " nodes; right edge = last run status"));
    [["zoom-out", "\u2212", function () { zoom(0.8); }], ["zoom-in", "+", function () { zoom(1.25); }], ["zoom-fit", "fit", fit], ["zoom-reset", "100%", function () { zoom(1); }]].forEach(function (b) {
      var button = el("button", { id: b[0], "class": "zoom" }, b[1]); button.addEventListener("click", b[2]); box.appendChild(button);
    });
  }

  document.getElementById("project-name").textContent = DATA.project.name;
  document.title = "pz docs \u2014 " + DATA.project.name;
  document.querySelectorAll("nav .tab").forEach(function (b) { b.addEventListener("click", function () { showView(b.getAttribute("data-view")); }); });
  legend(); drawGraph(); setupSearch(); drawRuns(); drawChecks();
  window.pzDocs = { select: select, showLineage: function (id, column) { showLineage(byId[id], column); }, ready: true };
  document.body.setAttribute("data-ready", "1");
})();
