// toolkeeper admin UI: every recent call (denied, gated, pure, recorded: GET /calls/recent),
// recorded calls (unknown outcomes first, Resolve, Compensate) and the
// audit trail (search, cursor paging, chain verification, tools' health). Loaded after
// app.js (uses api, say, $, cell, button, el at call time). DOM via createElement/textContent.
"use strict";

// one name in the page's global scope: the other scripts' helpers stay theirs
window.CallsAudit = (() => {
  const PAGE_SIZE = 20;

  function report(sel, text, isError) {
    const out = $(sel);
    out.className = isError ? "error" : "";
    out.textContent = text;
  }

  const Calls = {
    all: [],
    page: 0,

    async load() {
      const status = $("#call-status").value;
      const items = await api("GET", "/calls?limit=1000" + (status ? "&status=" + encodeURIComponent(status) : ""));
      // the newest 1000 can leave older unknown outcomes out: those are asked for on their own
      const lost = status ? [] : await api("GET", "/calls?limit=1000&status=unknown");
      const asked = new Set(lost.map((c) => c.call_id));
      const both = [...lost, ...items.filter((c) => !asked.has(c.call_id))];
      const unknown = (c) => (c.state === "unknown" || c.status === "unknown" ? 0 : 1);
      this.all = both.map((c, i) => [c, i]).sort((a, b) => unknown(a[0]) - unknown(b[0]) || a[1] - b[1])
        .map(([c]) => c);  // unknown outcomes first, newest first within each group
      this.page = 0;
      return this.render();
    },

    render() {
      const pages = Math.max(1, Math.ceil(this.all.length / PAGE_SIZE));
      this.page = Math.min(this.page, pages - 1);
      const body = $("#call-table tbody");
      body.replaceChildren();
      for (const c of this.all.slice(this.page * PAGE_SIZE, (this.page + 1) * PAGE_SIZE)) {
        const tr = body.insertRow();
        tr.dataset.callId = c.call_id;
        cell(tr, fmtTime(c.updated_at));
        cell(tr, c.agent);
        cell(tr, c.tool + (c.action ? " / " + c.action : ""));
        cell(tr, c.state);
        cell(tr, (c.status || "") + (c.reason ? " · " + c.reason : ""));
        cell(tr, callLink(c.call_id));
        const td = cell(tr, "");
        if (c.state === "unknown" || c.state === "in_progress") {
          button(td, "Resolve…", "", () => this.resolveForm(c));
        }
        if (c.side_effect === "compensatable" && c.state === "succeeded") {  // the API compensates these
          button(td, "Side effects…", "", () => this.effects(c).catch((e) => report("#call-result", e.message, true)));
        }
      }
      if (!this.all.length) {
        emptyRow(body, 7, $("#call-status").value
          ? "No recorded call with this status. Choose another status, or all of them."
          : "No recorded calls yet. Calls to tools that record outcomes appear here once an agent makes them.");
      }
      $("#call-page").textContent = "page " + (this.page + 1) + " of " + pages;
      $("#call-prev").disabled = this.page === 0;
      $("#call-next").disabled = this.page >= pages - 1;
      return this.all.length + " calls";
    },

    resolveForm(c) {
      const box = $("#call-detail");
      box.replaceChildren(el("h3", "Resolve " + c.tool + " call " + c.call_id));
      const form = el("form", null, "decide");
      const label = el("label", "real outcome ");
      const pick = el("select");
      for (const s of ["succeeded", "failed"]) pick.appendChild(el("option", s));
      label.appendChild(pick);
      const [noteLabel, note] = noteField("resolution note ");
      const send = el("button", "Record this outcome", "approve");
      send.type = "submit";
      form.append(label, noteLabel, send);
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        const path = "/calls/" + encodeURIComponent(c.call_id) + "/resolve";
        api("POST", path, { status: pick.value, note: note.value.trim() || null }).then(async (r) => {
          box.replaceChildren();
          report("#call-result", "call " + r.call_id + " resolved as " + r.state + " by " + r.resolved_by);
          say(await this.load());
        }, (e) => report("#call-result", e.message, true));
      });
      box.appendChild(form);
      pick.focus();
    },

    async effects(c) {
      const q = "/audit?limit=100&type=side_effect.recorded&call_id=" + encodeURIComponent(c.call_id);
      const page = await api("GET", q);
      const box = $("#call-detail");
      box.replaceChildren(el("h3", "Side effects of " + c.tool + " call " + c.call_id));
      if (!page.events.length) box.appendChild(el("p", "No side effect recorded for this call.", "hint"));
      for (const e of page.events) {
        const p = el("p", "side effect " + e.data.side_effect_id + " (" + (e.data.policy || "") + ") ");
        button(p, "Compensate", "deny", () => {
          api("POST", "/side-effects/" + encodeURIComponent(e.data.side_effect_id) + "/compensate").then(
            (r) => report("#call-result", "compensation " + r.call_id + ": " + r.status
              + (r.reason ? " · " + r.reason : "") + (r.message ? " — " + r.message : ""), r.status !== "succeeded"),
            (err) => report("#call-result", err.message, true));
        });
        box.appendChild(p);
      }
    },
  };

  // every call of the recent-calls log (GET /calls/recent), paged by its ``before`` cursor
  const Recent = {
    cursors: [null],  // the cursor of each page shown so far: Newer pops
    older: null,

    async search() {
      this.cursors = [null];
      return this.show();
    },

    async show() {
      const q = new URLSearchParams({ limit: String(PAGE_SIZE + 1) });
      const status = $("#recent-status").value;
      if (status) q.set("status", status);
      const before = this.cursors[this.cursors.length - 1];
      if (before != null) q.set("before", String(before));
      const rows = await api("GET", "/calls/recent?" + q.toString());
      const shown = rows.slice(0, PAGE_SIZE);
      this.older = rows.length > PAGE_SIZE ? shown[shown.length - 1].id : null;
      const body = $("#recent-table tbody");
      body.replaceChildren();
      for (const c of shown) {
        const tr = body.insertRow();
        tr.dataset.callId = c.call_id;
        cell(tr, fmtTime(c.ts));
        cell(tr, c.agent || "—");
        cell(tr, c.tool + (c.action ? " / " + c.action : ""));
        cell(tr, c.status + (c.reason ? " · " + c.reason : ""));
        cell(tr, fmtDuration(c.duration_ms));
        cell(tr, callLink(c.call_id));
      }
      if (!shown.length) {
        emptyRow(body, 6, status ? "No recent call with this status. Choose another status, or all of them."
          : "No calls yet. Give an agent a token (Access) and let it call a tool: every call shows here.",
        status ? undefined : { label: "Make an agent token", tab: "access" });
      }
      $("#recent-page").textContent = "page " + this.cursors.length + " · " + shown.length + " calls";
      $("#recent-newer").disabled = this.cursors.length === 1;
      $("#recent-older").disabled = this.older == null;
      return shown.length + " recent calls";
    },
  };

  const Audit = {
    cursors: [0],  // the cursor of each page shown so far: Previous pops
    next: null,

    query(cursor) {
      const q = new URLSearchParams({ limit: $("#audit-limit").value, cursor: String(cursor) });
      for (const [id, key] of [["#audit-call", "call_id"], ["#audit-agent", "agent"], ["#audit-tool", "tool"]]) {
        const v = $(id).value.trim();
        if (v) q.set(key, v);
      }
      for (const t of $("#audit-type").value.split(",").map((s) => s.trim()).filter(Boolean)) q.append("type", t);
      const times = {};
      for (const [id, key] of [["#audit-since", "since"], ["#audit-until", "until"]]) {
        const v = $(id).value;
        if (!v) continue;
        const d = new Date(v);
        if (Number.isNaN(d.getTime())) throw new Error("invalid_arguments: " + key + " is not a time");
        times[key] = d;
        q.set(key, d.toISOString());
      }
      if (times.since && times.until && times.since > times.until) {
        throw new Error("invalid_arguments: the time range ends before it starts");
      }
      return "/audit?" + q.toString();
    },

    async search() {
      this.cursors = [0];
      return this.show();
    },

    async show() {
      const page = await api("GET", this.query(this.cursors[this.cursors.length - 1]));
      this.next = page.next_cursor;
      const body = $("#audit-table tbody");
      body.replaceChildren();
      for (const e of page.events) {
        const tr = body.insertRow();
        cell(tr, e.seq);
        cell(tr, fmtTime(e.ts));
        cell(tr, e.type);
        cell(tr, e.agent_id);
        cell(tr, e.tool);
        cell(tr, e.call_id ? callLink(e.call_id) : "—");
        cell(tr, e.reason);
      }
      if (!page.events.length) {
        emptyRow(body, 7, "No audit event matches. Clear a filter or widen the time range, then search again.");
      }
      $("#audit-page").textContent = "page " + this.cursors.length + " · " + page.events.length + " events";
      $("#audit-prev").disabled = this.cursors.length === 1;
      $("#audit-next").disabled = this.next == null;
      await this.health();
      return page.events.length + " events on this page";
    },

    async health() {
      const body = $("#health-table tbody");
      body.replaceChildren();
      for (const h of await api("GET", "/tools/health")) {
        const tr = body.insertRow();
        cell(tr, h.name);
        cell(tr, h.health).className = "health-" + h.health;
        cell(tr, h.consecutive_errors);
        cell(tr, h.last_error || "—");
        cell(tr, h.last_success_at ? fmtTime(new Date(h.last_success_at * 1000).toISOString()) : "—");
      }
      if (!body.rows.length) emptyRow(body, 5, "No tool has been called yet: health shows once tools run.");
    },

    async verify() {
      const r = await api("GET", "/audit/verify");
      report("#verify-result", (r.ok ? "intact: " : "BROKEN: ") + r.events + " events"
        + (r.problems.length ? " — " + r.problems.join("; ") : ""), !r.ok);
    },
  };

  const guard = (sel, run) => () => run().then((text) => { if (text) say(text); },
    (e) => report(sel, e.message, true));

  document.addEventListener("DOMContentLoaded", () => {
    $("#call-status").addEventListener("change", guard("#call-result", () => Calls.load()));
    $("#recent-status").addEventListener("change", guard("#recent-result", () => Recent.search()));
    $("#recent-newer").addEventListener("click", guard("#recent-result", () => { Recent.cursors.pop(); return Recent.show(); }));
    $("#recent-older").addEventListener("click", guard("#recent-result", () => {
      Recent.cursors.push(Recent.older);
      return Recent.show();
    }));
    $("#call-prev").addEventListener("click", () => { Calls.page--; say(Calls.render()); });
    $("#call-next").addEventListener("click", () => { Calls.page++; say(Calls.render()); });
    $("#audit-filter").addEventListener("submit", (ev) => {
      ev.preventDefault();
      guard("#audit-error", async () => { report("#audit-error", ""); return Audit.search(); })();
    });
    $("#audit-prev").addEventListener("click", guard("#audit-error", () => { Audit.cursors.pop(); return Audit.show(); }));
    $("#audit-next").addEventListener("click", guard("#audit-error", () => {
      Audit.cursors.push(Audit.next);
      return Audit.show();
    }));
    $("#verify").addEventListener("click", guard("#verify-result", () => Audit.verify()));
  });

  views.calls = async () => {
    report("#recent-result", "");
    await Recent.search().catch((e) => report("#recent-result", e.message, true));
    return Calls.load();
  };
  views.audit = () => Audit.search();
  return { Calls, Recent, Audit };
})();
