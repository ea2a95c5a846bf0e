// toolkeeper admin UI: the tools registry (SPEC §6; seed 002 §6). Summary cards per bucket,
// search, filters, a paginated table and a detail drawer. DOM built with createElement and
// textContent only (strict CSP). Uses api() and say() from app.js at call time.
"use strict";

// one name in the page's global scope: the other scripts' helpers stay theirs
window.Registry = (() => {
  const BUCKETS = ["built_in", "mcp", "artifact", "custom"];
  const PAGE_SIZE = 20;
  const MAX_PAGES = 20;  // at most 20 × 500 tools read for the counts

  const Registry = {
    all: [],
    page: 0,
    isAdmin: false,
    opener: null,

    subtype(t) { return t.tool_type === "built_in" && t.builtin_key ? t.builtin_key : t.implementation_type; },

    async load() {
      const tools = [];
      for (let page = 0; page < MAX_PAGES; page++) {
        const got = await api("GET", "/tools?limit=500&skip=" + page * 500);
        tools.push(...got);
        if (got.length < 500) break;
      }
      this.all = tools;
      this.isAdmin = isAdmin();  // app.js: from GET /me
      this.cards();
      this.subtypes();
      return this.render();
    },

    cards() {
      const box = $("#tool-cards");
      box.replaceChildren();
      for (const bucket of BUCKETS) {
        const n = this.all.filter(t => t.tool_type === bucket).length;
        const card = el("button", "card", "");
        card.type = "button";
        card.dataset.bucket = bucket;
        card.setAttribute("aria-pressed", String($("#tool-bucket").value === bucket));
        card.append(el("span", "card-count", String(n)), el("span", "card-label", bucket));
        card.addEventListener("click", () => {
          const sel = $("#tool-bucket");
          sel.value = sel.value === bucket ? "" : bucket;
          this.refilter();
        });
        box.appendChild(card);
      }
    },

    subtypes() {
      const sel = $("#tool-subtype");
      const keep = sel.value;
      const names = [...new Set(this.all.map(t => this.subtype(t)))].sort();
      sel.replaceChildren(option("", "any"), ...names.map(n => option(n, n)));
      sel.value = names.includes(keep) ? keep : "";
    },

    filtered() {
      const q = $("#tool-search").value.trim().toLowerCase();
      const status = $("#tool-status").value, bucket = $("#tool-bucket").value;
      const sub = $("#tool-subtype").value;
      return this.all.filter(t => (!status || t.status === status)
        && (!bucket || t.tool_type === bucket) && (!sub || this.subtype(t) === sub)
        && (!q || [t.name, t.slug, t.description].some(s => (s || "").toLowerCase().includes(q))));
    },

    refilter() { this.page = 0; this.cards(); say(this.render()); },

    render() {
      const items = this.filtered();
      const pages = Math.max(1, Math.ceil(items.length / PAGE_SIZE));
      this.page = Math.min(this.page, pages - 1);
      const body = $("#tools tbody");
      body.replaceChildren();
      for (const t of items.slice(this.page * PAGE_SIZE, (this.page + 1) * PAGE_SIZE)) {
        const tr = body.insertRow();
        tr.dataset.tool = t.name;
        const name = el("button", "link", t.name);
        name.type = "button";
        name.addEventListener("click", () => this.open(t, name));
        tr.insertCell().appendChild(name);
        const kind = tr.insertCell();
        kind.append(el("span", "badge bucket-" + t.tool_type, t.tool_type), " ",
                    el("span", "badge subtype", this.subtype(t)));
        tr.insertCell().appendChild(el("span", "status status-" + t.status,
                                       t.status + (t.is_active ? "" : " · inactive")));
        tr.insertCell().textContent = t.version;
        tr.insertCell().textContent = t.side_effect;
        tr.insertCell().textContent = t.risk_default;
      }
      if (!items.length) {
        emptyRow(body, 6, this.all.length ? "No tool matches these filters. Clear the search or a filter."
          : "No tools yet. " + (isAdmin() ? "Add one with New tool, or import an MCP server's tools."
            : "An admin adds them (New tool, or an MCP server's tools)."));
      }
      $("#tool-page").textContent = "page " + (this.page + 1) + " of " + pages;
      $("#tool-prev").disabled = this.page === 0;
      $("#tool-next").disabled = this.page >= pages - 1;
      return items.length + " of " + this.all.length + " tools";
    },

    turn(step) { this.page += step; say(this.render()); },

    async open(t, opener) {
      this.opener = opener || null;
      const drawer = $("#tool-drawer");
      $("#drawer-title").textContent = t.name;
      const body = $("#drawer-body");
      body.replaceChildren(summary(t, this.subtype(t)));
      drawer.hidden = false;
      drawer.focus();
      body.append(section("Input schema", schemaTable(t.input_schema)),
                  section("Output schema", schemaTable(t.output_schema)),
                  section("Actions", actionsTable(t.actions)),
                  section("Implementation (redacted)", json(t.config_schema.implementation)),
                  section("Execution", json(t.config_schema.execution)));
      const id = encodeURIComponent(t.id);
      if (this.isAdmin && window.ToolEdit && ToolEdit.operatorWired(t)) {
        body.append(el("p", "hint", "Wired by the operator (servers:, artifacts: in toolkeeper.yaml): "
                                    + "its wiring changes there; Edit changes its governance."));
      }
      if (this.isAdmin && window.ToolEdit && ToolEdit.editable(t)) body.append(ToolEdit.editButton(t));
      if (t.status === "draft" && t.scope === "tenant" && this.isAdmin) {
        body.append(action("Publish", () => api("POST", "/tools/" + id + "/publish"), "republish", id));
      }
      try {
        if (t.status === "quarantined") body.append(await this.quarantine(id));
        body.append(section("Versions", versionsTable(await api("GET", "/tools/" + id + "/versions"))));
        body.append(section("Dependencies", await Impact.drawing(t.name)));
      } catch (e) { say(e.message, true); }
    },

    async quarantine(id) {
      const q = await api("GET", "/tools/" + id + "/quarantine");
      const box = section("Quarantine: pinned vs new upstream definition", null);
      box.classList.add("quarantine");
      const table = el("table", "diff", "");
      const head = table.createTHead().insertRow();
      for (const h of ["field", "pinned " + (q.pinned ? q.pinned.version : "(none)"),
                       "new " + q.current.version]) head.appendChild(el("th", "", h));
      const tb = table.createTBody();
      for (const d of q.diff) {
        const tr = tb.insertRow();
        tr.insertCell().textContent = d.field;
        tr.insertCell().appendChild(json(d.pinned));
        tr.insertCell().appendChild(json(d.current));
      }
      box.appendChild(q.diff.length ? table : el("p", "hint", "The definition is unchanged."));
      if (this.isAdmin) {
        box.appendChild(action("Re-publish", () => api("POST", "/tools/" + id + "/publish"),
                               "republish", id));
      }
      return box;
    },

    close() {
      if ($("#tool-drawer").hidden) return;
      $("#tool-drawer").hidden = true;
      if (this.opener && this.opener.isConnected) this.opener.focus();
      this.opener = null;
    },
  };

  function trapFocus(ev, box) {  // Tab and Shift+Tab cycle within the open drawer
    const all = [...box.querySelectorAll("button, input, select, textarea, a[href], [tabindex]")]
      .filter((e) => !e.disabled && e.tabIndex >= 0 && e.getClientRects().length);
    if (!all.length) { ev.preventDefault(); return; }
    const first = all[0], last = all[all.length - 1], at = document.activeElement;
    if (ev.shiftKey && (at === first || at === box)) { ev.preventDefault(); last.focus(); }
    else if (!ev.shiftKey && at === last) { ev.preventDefault(); first.focus(); }
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  }

  function option(value, label) {
    const o = el("option", "", label);
    o.value = value;
    return o;
  }

  function json(value) { return el("pre", "json", JSON.stringify(value, null, 2)); }

  function section(title, content) {
    const s = el("div", "drawer-part", "");
    s.appendChild(el("h3", "", title));
    if (content) s.appendChild(content);
    return s;
  }

  function action(label, run, change, id) {  // with `change`: its impact first (graph.js)
    const b = el("button", "admin-action", label);
    b.type = "button";
    b.addEventListener("click", async () => {
      try {
        if (change && !(await Impact.confirm(b, id, change, label))) return;
        await run();
        say(label + ": done");
        Registry.close();
        await show("tools");
      } catch (e) { say(e.message, true); }
    });
    return b;
  }

  function summary(t, subtype) {
    const dl = el("dl", "summary", "");
    const rows = [["bucket", t.tool_type], ["subtype", subtype], ["status", t.status],
                  ["version", t.version], ["scope", t.scope], ["side effect", t.side_effect],
                  ["risk", t.risk_default], ["published", t.published_at ? fmtTime(t.published_at) : "never"],
                  ["definition hash", t.definition_hash ? shortId(t.definition_hash) : ""],
                  ["description", t.description]];
    for (const [k, v] of rows) {
      const dd = el("dd", "", v instanceof Node ? "" : v == null ? "" : String(v));
      if (v instanceof Node) dd.appendChild(v);
      dl.append(el("dt", "", k), dd);
    }
    return dl;
  }

  function typeOf(s) {
    if (!s || typeof s !== "object") return "any";
    if (s.enum) return "enum: " + s.enum.map(v => JSON.stringify(v)).join(", ");
    const alts = s.anyOf || s.oneOf;
    if (alts) return alts.map(typeOf).join(" | ");
    const type = Array.isArray(s.type) ? s.type.join(" | ") : (s.type || "any");
    return type === "array" && s.items ? "array of " + typeOf(s.items) : type;
  }

  function schemaRows(schema, prefix, depth, out) {
    const props = (schema && schema.properties) || {};
    const required = new Set((schema && schema.required) || []);
    for (const [name, s] of Object.entries(props)) {
      out.push([prefix + name, typeOf(s), required.has(name) ? "yes" : "no",
                (s && (s.description || s.title)) || ""]);
      if (depth < 3 && s && s.properties) schemaRows(s, prefix + name + ".", depth + 1, out);
    }
    return out;
  }

  function schemaTable(schema) {
    if (!schema) return el("p", "hint", "No schema.");
    const wrap = el("div", "", "");
    const rows = schemaRows(schema, "", 0, []);
    if (rows.length) {
      const table = el("table", "schema", "");
      const head = table.createTHead().insertRow();
      for (const h of ["name", "type", "required", "description"]) head.appendChild(el("th", "", h));
      const tb = table.createTBody();
      for (const r of rows) { const tr = tb.insertRow(); for (const v of r) tr.insertCell().textContent = v; }
      wrap.appendChild(table);
    } else {
      wrap.appendChild(el("p", "hint", "Type " + typeOf(schema) + ", no named properties."));
    }
    const raw = el("details", "", "");
    raw.append(el("summary", "", "JSON Schema"), json(schema));
    wrap.appendChild(raw);
    return wrap;
  }

  function actionsTable(actions) {
    const names = Object.keys(actions || {});
    if (!names.length) return el("p", "hint", "One action.");
    const table = el("table", "", "");
    const head = table.createTHead().insertRow();
    for (const h of ["action", "side effect", "risk"]) head.appendChild(el("th", "", h));
    const tb = table.createTBody();
    for (const n of names) {
      const tr = tb.insertRow();
      for (const v of [n, actions[n].side_effect, actions[n].risk]) tr.insertCell().textContent = v;
    }
    return table;
  }

  function versionsTable(versions) {  // client-side paging: GET /tools/{id}/versions returns all
    if (!versions.length) return el("p", "hint", "Never published.");
    const table = el("table", "versions", "");
    const head = table.createTHead().insertRow();
    for (const h of ["version", "snapshot at", "definition hash", "snapshot"]) head.appendChild(el("th", "", h));
    const tb = table.createTBody();
    const box = el("div", "", "");
    const at = { page: 0 };
    const draw = () => {
      const { rows, nav } = paged(versions, at, "versions", draw);
      tb.replaceChildren();
      for (const v of rows) {
        const tr = tb.insertRow();
        tr.insertCell().textContent = v.version;
        tr.insertCell().appendChild(fmtTime(v.snapshot_at));
        tr.insertCell().appendChild(v.definition_hash ? shortId(v.definition_hash) : el("span", "", ""));
        const d = el("details", "", "");
        d.append(el("summary", "", "show"), json(v.tool));
        tr.insertCell().appendChild(d);
      }
      box.replaceChildren(table, nav);
    };
    draw();
    return box;
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const id of ["#tool-status", "#tool-bucket", "#tool-subtype"]) {
      $(id).addEventListener("change", () => Registry.refilter());
    }
    $("#tool-search").addEventListener("input", () => Registry.refilter());
    $("#tool-prev").addEventListener("click", () => Registry.turn(-1));
    $("#tool-next").addEventListener("click", () => Registry.turn(1));
    $("#drawer-close").addEventListener("click", () => Registry.close());
    for (const b of document.querySelectorAll("#tabs button")) {
      b.addEventListener("click", () => Registry.close());
    }
    $("#tool-drawer").addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") { ev.preventDefault(); Registry.close(); }
      if (ev.key === "Tab") trapFocus(ev, $("#tool-drawer"));
    });
  });

  return Registry;
})();
