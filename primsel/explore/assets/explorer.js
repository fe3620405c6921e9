/* primsel explorer: views of an experiment directory, chosen by the URL's #fragment.
 *   #/                     the experiment: summary, plots, the cells (sortable, filterable), a comparison form
 *   #/cell/ID              one cell: its settings and metrics, its tasks (sortable, filterable)
 *   #/task/CELL/TASK       one task in one cell: query, selection against gold, program, verdict, attribution
 *   #/compare/A/B          the tasks that pass in one cell and fail in the other
 * Data files are scripts that call PRIMSEL.load(kind, key, data); each view loads only what it shows.
 * Text from the run is always inserted as text, never as HTML. */
(function () {
  "use strict";

  var store = { index: {}, tasks: {}, cell: {} };
  var waiting = {};
  var view = document.getElementById("view");
  var crumbs = document.getElementById("crumbs");

  window.PRIMSEL = {
    load: function (kind, key, data) {
      var name = kind + ":" + (key === null ? "" : key);
      store[kind][key === null ? "" : key] = data;
      if (waiting[name]) { waiting[name].resolve(data); }
    }
  };

  function need(kind, key) {
    var slot = key === undefined || key === null ? "" : key;
    var name = kind + ":" + slot;
    if (Object.prototype.hasOwnProperty.call(store[kind], slot)) { return Promise.resolve(store[kind][slot]); }
    if (waiting[name]) { return waiting[name].promise; }
    var entry = {};
    entry.promise = new Promise(function (resolve, reject) { entry.resolve = resolve; entry.reject = reject; });
    waiting[name] = entry;
    var script = document.createElement("script");
    script.src = kind === "cell" ? "data/cells/" + encodeURIComponent(slot) + ".js" : "data/" + kind + ".js";
    script.onerror = function () { delete waiting[name]; entry.reject(new Error("cannot load " + script.src)); };
    document.head.appendChild(script);
    return entry.promise;
  }

  // -- small DOM helpers ------------------------------------------------------------------------
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === "text") { node.textContent = attrs[k]; }
        else if (k === "on") { Object.keys(attrs.on).forEach(function (e) { node.addEventListener(e, attrs.on[e]); }); }
        else if (attrs[k] !== undefined && attrs[k] !== null && attrs[k] !== false) { node.setAttribute(k, attrs[k]); }
      });
    }
    for (var i = 2; i < arguments.length; i++) { append(node, arguments[i]); }
    return node;
  }
  function append(node, child) {
    if (child === null || child === undefined || child === false) { return; }
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function link(href, text) { return el("a", { href: href, text: text }); }
  function fmt(value, digits) {
    if (value === null || value === undefined || value === "") { return ""; }
    if (typeof value === "number") { return Number.isInteger(value) ? String(value) : value.toFixed(digits === undefined ? 3 : digits); }
    return String(value);
  }
  function hashOf() { return Array.prototype.map.call(arguments, encodeURIComponent).join("/"); }
  function short(text, n) { text = text || ""; return text.length > n ? text.slice(0, n - 1) + "\u2026" : text; }
  function uniq(values) { return Array.from(new Set(values)).sort(); }
  function modulesOf(ids) { return uniq(ids.map(function (id) { return id.split(".")[0]; })); }
  function setCrumbs(parts) { crumbs.textContent = ""; parts.forEach(function (p) { append(crumbs, [" / ", p]); }); }
  function done(name) {
    document.body.setAttribute("data-view", name);
    document.body.setAttribute("data-ready", "1");
    window.PRIMSEL.renderedAt = performance.now();
  }
  function fail(error) {
    view.textContent = "";
    append(view, el("div", { "class": "error-box", text: "Cannot show this view: " + (error && error.message || error) }));
    done("error");
  }

  // -- a sortable table -------------------------------------------------------------------------
  // columns: {label, num, value(row) -> sortable value, cell(row) -> node or text}
  function table(id, columns, rows) {
    var state = { key: null, dir: 1, rows: rows };
    var body = el("tbody");
    var heads = columns.map(function (c, i) {
      return el("th", { "class": c.num ? "num" : null, title: "sort", on: { click: function () {
        state.dir = state.key === i ? -state.dir : (c.num ? -1 : 1);
        state.key = i;
        heads.forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        heads[i].classList.add(state.dir > 0 ? "sorted-asc" : "sorted-desc");
        draw();
      } } }, c.label);
    });
    function draw() {
      var shown = state.rows.slice();
      if (state.key !== null) {
        var c = columns[state.key];
        shown.sort(function (a, b) {
          var x = c.value(a), y = c.value(b);
          if (x === y) { return 0; }
          if (x === null || x === undefined) { return 1; }
          if (y === null || y === undefined) { return -1; }
          return (x < y ? -1 : 1) * state.dir;
        });
      }
      var fragment = document.createDocumentFragment();
      shown.forEach(function (row) {
        fragment.appendChild(el("tr", null, columns.map(function (c) {
          return el("td", { "class": c.num ? "num" : null }, c.cell ? c.cell(row) : fmt(c.value(row)));
        })));
      });
      body.textContent = "";
      body.appendChild(fragment);
    }
    draw();
    return {
      node: el("table", { id: id }, el("thead", null, el("tr", null, heads)), body),
      update: function (next) { state.rows = next; draw(); }
    };
  }

  function select(id, label, values, all) {
    return el("label", null, label, el("select", { id: id }, el("option", { value: "", text: all || "all" }),
      values.map(function (v) { return el("option", { value: v, text: v }); })));
  }

  // -- the experiment ---------------------------------------------------------------------------
  function viewIndex() {
    return need("index").then(function (index) {
      setCrumbs([]);
      document.title = index.name + " - primsel explorer";
      var finished = index.cells.filter(function (c) { return c.finished; });
      var data = index.data || {};
      var out = [el("h1", { text: index.name })];
      if (index.description) { out.push(el("p", { text: index.description })); }
      out.push(el("dl", { "class": "facts" },
        el("dt", { text: "data" }), el("dd", { text: (data.source || "?") + " (" + fmt(data.n_tasks) + " tasks)" }),
        el("dt", { text: "cells" }), el("dd", { text: finished.length + " finished of " + index.cells.length }),
        el("dt", { text: "baseline" }), el("dd", { text: index.baseline || "the first cell's retriever" })));
      if (index.plots.length) {
        out.push(el("h2", { text: "Plots" }), el("div", { "class": "plots" }, index.plots.map(function (src) {
          return el("a", { href: src, target: "_blank" }, el("img", { src: src, alt: src.split("/").pop() }));
        })));
      }
      if (index.summary_html) {
        var summary = el("div", { "class": "summary" });
        summary.innerHTML = index.summary_html;  // rendered from report.md at build time, raw HTML escaped
        out.push(el("details", null, el("summary", { text: "Report (report.md)" }), summary));
      }
      // comparison form
      var options = finished.map(function (c) { return el("option", { value: c.id, text: c.label }); });
      var a = el("select", { id: "compare-a" }, options.map(function (o) { return o.cloneNode(true); }));
      var b = el("select", { id: "compare-b" }, options.map(function (o) { return o.cloneNode(true); }));
      if (finished.length > 1) { b.selectedIndex = 1; }
      out.push(el("h2", { text: "Cells" }));
      out.push(el("div", { "class": "filters" }, el("strong", { text: "Compare" }), a, "with", b,
        el("button", { id: "compare-go", on: { click: function () {
          location.hash = "#/compare/" + hashOf(a.value, b.value);
        } } }, "tasks that flip")));
      var retrievers = uniq(index.cells.map(function (c) { return c.retriever; }));
      var ks = uniq(index.cells.map(function (c) { return String(c.k); }));
      var text = el("input", { id: "filter-cells", type: "search", placeholder: "label contains..." });
      var count = el("span", { "class": "count" });
      var filters = el("div", { "class": "filters" }, el("label", null, "filter", text),
        select("filter-retriever", "retriever", retrievers), select("filter-k", "k", ks),
        select("filter-closure", "closure", ["yes", "no"]), count);
      out.push(filters);
      var present = index.columns.filter(function (col) {
        return index.cells.some(function (c) { return c.metrics[col[0]] !== undefined; });
      });
      var generators = index.cells.some(function (c) { return c.generator; });
      var columns = [
        { label: "cell", value: function (c) { return c.label; }, cell: function (c) {
          var name = c.finished ? link("#/cell/" + hashOf(c.id), c.label) : el("span", { "class": "muted", text: c.label + " (not run)" });
          // the colour of the cell's configuration in the report's figures
          return c.colour ? el("span", null, el("span", { "class": "swatch", style: "background:" + c.colour }), name) : name;
        } },
        { label: "retriever", value: function (c) { return c.retriever; } },
        { label: "k", num: true, value: function (c) { return c.k; } },
        { label: "closure", value: function (c) { return c.closure ? "yes" : "no"; } }
      ];
      if (generators) { columns.push({ label: "generator", value: function (c) { return c.generator; } }); }
      present.forEach(function (col) {
        columns.push({ label: col[1], num: true, value: function (c) { var v = c.metrics[col[0]]; return v === undefined ? null : v; },
          cell: function (c) { return fmt(c.metrics[col[0]], col[0] === "docs_tokens" ? 0 : 3); } });
      });
      if (generators) {
        columns.push({ label: "failures", num: true, value: function (c) {
          return Object.keys(c.failures).reduce(function (s, k) { return s + c.failures[k]; }, 0);
        } });
      }
      var cells = table("cells", columns, index.cells);
      function apply() {
        var needle = text.value.toLowerCase();
        var r = document.getElementById("filter-retriever").value, k = document.getElementById("filter-k").value;
        var closure = document.getElementById("filter-closure").value;
        var rows = index.cells.filter(function (c) {
          return (!needle || c.label.toLowerCase().indexOf(needle) >= 0) && (!r || c.retriever === r) &&
            (!k || String(c.k) === k) && (!closure || (c.closure ? "yes" : "no") === closure);
        });
        cells.update(rows);
        count.textContent = rows.length + " of " + index.cells.length + " cells";
      }
      filters.addEventListener("input", apply);
      filters.addEventListener("change", apply);
      out.push(cells.node);
      view.textContent = "";
      append(view, out);
      apply();
      done("index");
    });
  }

  // -- one cell -----------------------------------------------------------------------------------
  function cellEntry(index, id) {
    var found = index.cells.filter(function (c) { return c.id === id; })[0];
    if (!found) { throw new Error("no cell " + id + " in this experiment"); }
    return found;
  }
  function passed(row) { return row.status !== undefined ? row.status === "pass" : row.complete === 1; }

  function viewCell(id) {
    return Promise.all([need("index"), need("cell", id), need("tasks")]).then(function (got) {
      var index = got[0], rows = got[1], texts = got[2], cell = cellEntry(index, id);
      setCrumbs([link("#/cell/" + hashOf(id), cell.label)]);
      document.title = cell.label + " - " + index.name;
      var generated = rows.length > 0 && rows[0].status !== undefined;
      var out = [el("h1", { text: cell.label })];
      var facts = el("dl", { "class": "facts" });
      [["retriever", cell.retriever], ["k", cell.k], ["closure", cell.closure ? "yes" : "no"],
       ["generator", cell.generator || "none (retrieval only)"], ["cell id", cell.id]].forEach(function (f) {
        append(facts, [el("dt", { text: f[0] }), el("dd", { text: fmt(f[1]) })]);
      });
      if (Object.keys(cell.failures).length) {
        append(facts, [el("dt", { text: "failures" }), el("dd", { text: Object.keys(cell.failures).map(function (k) {
          return k + " " + cell.failures[k]; }).join(", ") })]);
      }
      var names = Object.keys(cell.metrics);
      var metrics = el("table", { "class": "metrics", id: "metrics" },
        el("thead", null, el("tr", null, names.map(function (k) { return el("th", { "class": "num", text: k }); }))),
        el("tbody", null, el("tr", null, names.map(function (k) {
          return el("td", { "class": "num", text: fmt(cell.metrics[k], k === "docs_tokens" ? 0 : 3) }); }))));
      out.push(facts, metrics, el("h2", { text: "Tasks" }));
      var statuses = uniq(rows.map(function (r) { return generated ? r.status : (r.complete === 1 ? "complete" : "incomplete"); }));
      var categories = uniq(rows.filter(function (r) { return r.category; }).map(function (r) { return r.category; }));
      var modules = uniq([].concat.apply([], rows.map(function (r) { return modulesOf(r.gold); })));
      var primitives = uniq([].concat.apply([], rows.map(function (r) { return r.gold.concat(r.sel, r.called || []); })));
      var text = el("input", { id: "filter-text", type: "search", placeholder: "id or query contains..." });
      var count = el("span", { "class": "count" });
      var filters = el("div", { "class": "filters" }, el("label", null, "filter", text),
        select("filter-status", generated ? "status" : "complete@k", statuses),
        generated ? select("filter-category", "category", categories) : null,
        select("filter-module", "module", modules), select("filter-primitive", "primitive", primitives), count);
      var columns = [
        { label: "task", value: function (r) { return r.id; }, cell: function (r) { return link("#/task/" + hashOf(id, r.id), r.id); } },
        { label: "query", value: function (r) { return (texts[r.id] || {}).query || ""; },
          cell: function (r) { return short((texts[r.id] || {}).query, 90); } },
        { label: generated ? "status" : "complete@" + cell.k, value: function (r) { return generated ? r.status : r.complete; },
          cell: function (r) {
            var s = generated ? r.status : (r.complete === 1 ? "complete" : "incomplete");
            return el("span", { "class": "status " + (passed(r) ? "pass" : "fail"), text: s });
          } },
        { label: "recall@" + cell.k, num: true, value: function (r) { return r.recall; } },
        { label: "set recall", num: true, value: function (r) { return r.set_recall; } },
        { label: "missed gold", num: true, value: function (r) {
          return r.gold.filter(function (g) { return r.sel.indexOf(g) < 0; }).length; } },
        { label: "doc tokens", num: true, value: function (r) { return r.doc_tokens; } }
      ];
      if (generated) {
        columns.push({ label: "prompt tok", num: true, value: function (r) { return r.prompt_tokens; } },
                     { label: "completion tok", num: true, value: function (r) { return r.completion_tokens; } },
                     { label: "category", value: function (r) { return r.category || ""; } });
      }
      var tasks = table("tasks", columns, rows);
      function apply() {
        var needle = text.value.toLowerCase();
        var s = document.getElementById("filter-status").value;
        var c = generated ? document.getElementById("filter-category").value : "";
        var m = document.getElementById("filter-module").value, p = document.getElementById("filter-primitive").value;
        var shown = rows.filter(function (r) {
          var status = generated ? r.status : (r.complete === 1 ? "complete" : "incomplete");
          var query = ((texts[r.id] || {}).query || "").toLowerCase();
          return (!needle || r.id.toLowerCase().indexOf(needle) >= 0 || query.indexOf(needle) >= 0) &&
            (!s || status === s) && (!c || r.category === c) && (!m || modulesOf(r.gold).indexOf(m) >= 0) &&
            (!p || r.gold.indexOf(p) >= 0 || r.sel.indexOf(p) >= 0 || (r.called || []).indexOf(p) >= 0);
        });
        tasks.update(shown);
        count.textContent = shown.length + " of " + rows.length + " tasks";
      }
      filters.addEventListener("input", apply);
      filters.addEventListener("change", apply);
      out.push(filters, tasks.node);
      view.textContent = "";
      append(view, out);
      apply();
      done("cell");
    });
  }

  // -- one task of one cell -------------------------------------------------------------------------
  function code(id, text, marked) {
    var pre = el("pre", { "class": "code", id: id });
    (text || "").replace(/\n$/, "").split("\n").forEach(function (line, i) {
      var no = i + 1;
      pre.appendChild(el("span", { "class": "line" + (no === marked ? " failing" : ""), "data-line": no },
        el("span", { "class": "no", text: no }), line));
    });
    return pre;
  }

  function viewTask(cellId, taskId) {
    return Promise.all([need("index"), need("cell", cellId), need("tasks")]).then(function (got) {
      var index = got[0], rows = got[1], texts = got[2], cell = cellEntry(index, cellId);
      var position = rows.findIndex(function (r) { return r.id === taskId; });
      if (position < 0) { throw new Error("no task " + taskId + " in cell " + cell.label); }
      var row = rows[position], info = texts[taskId] || {};
      setCrumbs([link("#/cell/" + hashOf(cellId), cell.label), link("#/task/" + hashOf(cellId, taskId), "task " + taskId)]);
      document.title = "task " + taskId + " - " + cell.label;
      var out = [el("h1", null, "Task " + taskId, " ", el("span", { "class": "muted", text: "in " + cell.label }))];
      var nav = el("p");
      if (position > 0) { append(nav, [link("#/task/" + hashOf(cellId, rows[position - 1].id), "\u2190 previous task"), " "]); }
      if (position < rows.length - 1) { append(nav, link("#/task/" + hashOf(cellId, rows[position + 1].id), "next task \u2192")); }
      out.push(nav);
      out.push(el("p", { id: "query", text: info.query || "(the query is not in this site: build it with --data)" }));

      var gold = row.gold, sel = row.sel;
      var chips = el("div", { id: "selection" });
      gold.forEach(function (g) { append(chips, el("span", { "class": "chip " + (sel.indexOf(g) >= 0 ? "hit" : "missed"), text: g,
        title: sel.indexOf(g) >= 0 ? "gold, selected" : "gold, missed" })); });
      sel.filter(function (s) { return gold.indexOf(s) < 0; }).forEach(function (s) {
        append(chips, el("span", { "class": "chip extra", text: s, title: row.closure.indexOf(s) >= 0 ? "extra (type closure)" : "extra pick" }));
      });
      out.push(el("h2", { text: "Selection against the gold set" }),
        el("p", { "class": "legend muted" }, el("span", { "class": "chip hit", text: "gold, selected" }),
          el("span", { "class": "chip missed", text: "gold, missed" }), el("span", { "class": "chip extra", text: "extra pick" }),
          " recall@" + cell.k + " " + fmt(row.recall) + ", set recall " + fmt(row.set_recall) +
          ", set precision " + fmt(row.set_precision) + ", " + fmt(row.doc_tokens, 0) + " doc tokens"),
        chips);

      if (row.status !== undefined) {
        var why = row.attribution || {};
        var marked = why.divergence_line || why.line || null;
        var facts = el("dl", { "class": "facts", id: "verdict" });
        [["status", el("span", { "class": "status " + row.status, text: row.status })], ["error", row.error_type],
         ["message", row.message], ["category", why.category], ["stage", why.stage],
         ["failing line", marked], ["expected call", why.expected_call && el("span", { "class": "call", text: why.expected_call })],
         ["actual call", why.actual_call && el("span", { "class": "call", text: why.actual_call })],
         ["missed gold", (why.missed_gold || []).join(", ")], ["unselected used", (why.unselected || []).join(", ")],
         ["hallucinated", (why.hallucinated || []).join(", ")],
         ["tokens", fmt(row.prompt_tokens) + " prompt, " + fmt(row.completion_tokens) + " completion"]].forEach(function (f) {
          if (f[1] !== null && f[1] !== undefined && f[1] !== "") { append(facts, [el("dt", { text: f[0] }), el("dd", null, f[1])]); }
        });
        out.push(el("h2", { text: "Verdict and attribution" }), facts);
        var left = [el("h2", { text: "Generated program" }),
          row.program ? code("program", row.program, marked) : el("p", { "class": "muted", text: "no program" })];
        var right = [el("h2", { text: "Reference program" }),
          info.reference ? code("reference", info.reference, null) : el("p", { "class": "muted", text: "not in this site" })];
        out.push(el("div", { "class": "grid2" }, el("div", null, left), el("div", null, right)));
      } else if (info.reference) {
        out.push(el("h2", { text: "Reference program" }), code("reference", info.reference, null));
      }
      view.textContent = "";
      append(view, out);
      done("task");
    });
  }

  // -- two cells ----------------------------------------------------------------------------------------
  function viewCompare(a, b) {
    return Promise.all([need("index"), need("cell", a), need("cell", b), need("tasks")]).then(function (got) {
      var index = got[0], rowsA = got[1], rowsB = got[2], texts = got[3];
      var cellA = cellEntry(index, a), cellB = cellEntry(index, b);
      setCrumbs([el("span", { text: "compare" })]);
      var byId = {};
      rowsB.forEach(function (r) { byId[r.id] = r; });
      var generated = rowsA.length && rowsA[0].status !== undefined && rowsB.length && rowsB[0].status !== undefined;
      var word = generated ? "pass" : "complete@k";
      var flips = [], counts = { both: 0, neither: 0 };
      rowsA.forEach(function (r) {
        var other = byId[r.id];
        if (!other) { return; }
        var x = passed(r), y = passed(other);
        if (x && y) { counts.both++; } else if (!x && !y) { counts.neither++; }
        else { flips.push({ id: r.id, a: r, b: other, gained: !x && y }); }
      });
      function label(r) { return generated ? r.status + (r.category ? " (" + r.category + ")" : "") : (r.complete === 1 ? "complete" : "incomplete"); }
      var out = [el("h1", { text: "Tasks that flip" }),
        el("p", null, "A: ", link("#/cell/" + hashOf(a), cellA.label), el("br"), "B: ", link("#/cell/" + hashOf(b), cellB.label)),
        el("p", { "class": "muted", text: (generated ? "" : "Without a generator, a task 'passes' when all its gold primitives are in the top k. ") +
          counts.both + " tasks " + word + " in both, " + counts.neither + " in neither, " +
          flips.filter(function (f) { return f.gained; }).length + " only in B, " +
          flips.filter(function (f) { return !f.gained; }).length + " only in A." })];
      var flipTable = table("flips", [
        { label: "task", value: function (f) { return f.id; }, cell: function (f) {
          return el("span", null, link("#/task/" + hashOf(a, f.id), f.id + " in A"), " \u00b7 ", link("#/task/" + hashOf(b, f.id), "in B")); } },
        { label: "query", value: function (f) { return (texts[f.id] || {}).query || ""; }, cell: function (f) { return short((texts[f.id] || {}).query, 80); } },
        { label: "change", value: function (f) { return f.gained ? "fails in A, passes in B" : "passes in A, fails in B"; },
          cell: function (f) { return el("span", { "class": "status " + (f.gained ? "pass" : "fail"),
            text: f.gained ? "fails in A, " + word + " in B" : word + " in A, fails in B" }); } },
        { label: "A", value: function (f) { return label(f.a); } },
        { label: "B", value: function (f) { return label(f.b); } }
      ], flips);
      out.push(flips.length ? flipTable.node : el("p", { text: "No task flips between these two cells." }));
      view.textContent = "";
      append(view, out);
      done("compare");
    });
  }

  function route() {
    document.body.removeAttribute("data-ready");
    var parts = (location.hash || "#/").replace(/^#\/?/, "").split("/").filter(function (p) { return p !== ""; })
      .map(decodeURIComponent);
    var shown;
    try {
      if (parts[0] === "cell" && parts.length === 2) { shown = viewCell(parts[1]); }
      else if (parts[0] === "task" && parts.length === 3) { shown = viewTask(parts[1], parts[2]); }
      else if (parts[0] === "compare" && parts.length === 3) { shown = viewCompare(parts[1], parts[2]); }
      else { shown = viewIndex(); }
    } catch (error) { fail(error); return; }
    shown.then(function () { window.scrollTo(0, 0); }, fail);
  }
  window.addEventListener("hashchange", route);
  route();
})();
