// toolkeeper admin UI: a call's page (#call/<call_id>, GET /calls/{call_id}/story): its header,
// every pipeline step with its timing, the gate and why, the approvals (who asked, who decided,
// the edits side by side, what they saw), the outcome, side effects and their compensation, and
// links to the agent, the tool, the turn group and related calls. Loaded after app.js (api, el,
// say, show, views, $, fmtTime, fmtDuration, shortId, callLink), registry.js and agents.js.
// Values are written with textContent only.
"use strict";

window.Story = (() => {
  const RELATION = {
    resubmission_of: "re-submission of", resubmitted_as: "re-submitted as",
    compensation_of: "compensation of", compensated_by: "compensated by",
  };
  const state = { id: null, from: null };  // the call shown, the route the page came from

  function link(href, text) {
    const a = el("a", text);
    a.href = href;
    return a;
  }
  function words(code) { return code == null ? "" : String(code).replace(/_/g, " "); }
  function json(v) { return v === undefined ? "(absent)" : JSON.stringify(v); }

  function section(parent, title, key) {
    const s = el("div", null, "st-part");  // not a <section>: show() hides every one but a view's
    s.dataset.part = key;
    s.appendChild(el("h3", title));
    parent.appendChild(s);
    return s;
  }

  function facts(rows) {  // a <dl> of [term, value (text or element)], skipping empty values
    const dl = el("dl", null, "st-facts");
    for (const [term, value, key] of rows) {
      if (value == null || value === "") continue;
      const dt = el("dt", term);
      const dd = el("dd");
      if (key) dd.dataset.key = key;
      if (value instanceof Node) dd.appendChild(value); else dd.textContent = String(value);
      dl.append(dt, dd);
    }
    return dl;
  }

  function toolLink(s) {  // to the Tools tab, searched for this tool, its drawer open
    const a = link("#tools", s.tool + (s.action ? "." + s.action : "")
      + (s.tool_version ? " version " + s.tool_version : ""));
    a.addEventListener("click", async (ev) => {
      ev.preventDefault();
      $("#tool-search").value = s.tool;
      history.pushState(null, "", "#tools");  // a history entry: Back returns to this call
      await show("tools");
      const t = (Registry.all || []).find((x) => x.name === s.tool);
      if (t) await Registry.open(t, $("#tool-table"));
    });
    return a;
  }

  function agentLink(name) {  // to the Agents tab, on the page of that agent, its row marked
    const a = link("#agents", name);
    a.addEventListener("click", async (ev) => {
      ev.preventDefault();
      history.pushState(null, "", "#agents");  // a history entry: Back returns to this call
      await show("agents");
      const at = Agents.agents.findIndex((x) => x.name === name);
      if (at < 0) return;
      Agents.page = Math.floor(at / 20);  // agents.js pages by 20
      say(Agents.renderAgents());
      const row = document.querySelector('#agent-table tr[data-agent="' + CSS.escape(name) + '"]');
      if (row) { row.setAttribute("aria-current", "true"); row.scrollIntoView({ block: "center" }); }
    });
    return a;
  }

  function header(body, s) {
    const status = el("span", words(s.status) + (s.reason && s.reason !== s.status ? " · " + words(s.reason) : ""),
      "st-status st-" + (s.status || "none"));
    // the API lists no calls by turn group yet: the id is shown, not linked to an unfiltered list
    const turn = s.turn_group_id ? shortId(s.turn_group_id) : null;
    body.appendChild(facts([
      ["tool", toolLink(s), "tool"], ["agent", agentLink(s.agent), "agent"],
      ["status", status, "status"], ["when", fmtTime(s.started_at), "when"],
      ["duration", fmtDuration(s.duration_ms), "duration"], ["call id", shortId(s.call_id), "call-id"],
      ["turn group", turn, "turn"], ["trace id", s.trace_id, "trace"],
      ["audit level", s.audit_level === "steps" ? "every step recorded" : "decisions only", "level"],
    ]));
    if (s.truncated) {
      body.appendChild(el("p", "This call has more audit events than a page shows: only the first "
        + s.steps.length + " steps are listed (the Audit tab has them all).", "st-note"));
    }
  }

  function steps(body, s) {
    const part = section(body, "Steps", "steps");
    if (!s.steps.length) { part.appendChild(el("p", "No audit event recorded for this call.", "hint")); return; }
    const ol = el("ol", null, "st-steps");
    for (const st of s.steps) {
      const li = el("li");
      li.dataset.type = st.type;
      const at = el("span", "+" + fmtDuration(st.at_ms), "st-at");
      at.title = "after the first event";
      const kind = el("strong", st.type, "st-type");
      const took = st.duration_ms == null ? null : el("span", "took " + fmtDuration(st.duration_ms), "st-took");
      li.append(at, " ", kind, " ", el("span", st.detail, "st-detail"));
      if (took) li.append(" ", took);
      ol.appendChild(li);
    }
    part.appendChild(ol);
  }

  function gate(body, s) {
    const part = section(body, "Gate", "gate");
    if (!s.gate) { part.appendChild(el("p", "It stopped before any gate.", "hint")); return; }
    part.appendChild(facts([["gate", s.gate.gate, "gate"], ["risk", s.gate.risk, "risk"],
      ["why", s.gate.why, "why"]]));
  }

  function argsTable(caption, columns) {
    const table = el("table", null, "st-diff");
    table.appendChild(el("caption", caption));
    const head = table.createTHead().insertRow();
    for (const t of columns) {
      const th = el("th", t);
      th.scope = "col";
      head.appendChild(th);
    }
    return table;
  }

  function argRow(tb, key, values) {  // a key (row header) and its values as JSON
    const tr = tb.insertRow();
    tr.dataset.key = key;
    const th = el("th", key);
    th.scope = "row";
    tr.appendChild(th);
    for (const v of values) tr.insertCell().appendChild(el("code", json(v)));
    return tr;
  }

  function diff(a) {  // original vs edited arguments, key by key; a changed key says so in words
    const was = a.arguments || {};
    if (!a.edited) {
      const decided = a.status === "approved" || a.status === "consumed";
      const table = argsTable(decided ? "Arguments (approved as asked)" : "Arguments asked for",
        ["key", "value"]);
      const tb = table.createTBody();
      for (const key of Object.keys(was)) argRow(tb, key, [was[key]]);
      return table;
    }
    const now = a.edited_arguments || {};
    const table = argsTable("Arguments: asked for, and as approved (edited)",
      ["key", "asked for", "approved", "changed"]);
    const tb = table.createTBody();
    for (const key of [...new Set([...Object.keys(was), ...Object.keys(now)])]) {
      const changed = json(was[key]) !== json(now[key]);
      const tr = argRow(tb, key, [was[key], now[key]]);
      if (changed) { tr.className = "st-changed"; tr.dataset.changed = "true"; }
      tr.insertCell().textContent = changed ? (key in was ? (key in now ? "edited" : "removed") : "added") : "same";
    }
    return table;
  }


  function approval(part, a) {
    const art = el("article", null, "st-approval");
    art.dataset.approvalId = a.id;
    art.appendChild(el("h4", words(a.kind) + " — " + words(a.status) + (a.edited ? ", with edits" : "")));
    art.appendChild(facts([
      ["approval id", shortId(a.id)], ["asked by", a.requested_by, "requested-by"],
      ["asked", fmtTime(a.requested_at)], ["decided by", a.decided_by || "nobody yet", "decided-by"],
      ["decided", a.decided_at ? fmtTime(a.decided_at) : null],
      ["waited", a.waited_ms == null ? null : fmtDuration(a.waited_ms), "waited"],
      ["note", a.note, "note"],
      ["asked by call", a.call_id ? callLink(a.call_id) : null],
      ["used by call", a.consumed_by ? callLink(a.consumed_by) : null],
    ]));
    if (a.summary || a.preview) {
      art.appendChild(el("p", "What they saw: " + (a.summary || "a preview"), "st-saw"));
      if (a.preview) art.appendChild(el("pre", JSON.stringify(a.preview, null, 2), "st-preview"));
    }
    if (a.arguments) art.appendChild(diff(a));
    part.appendChild(art);
  }

  function approvals(body, s) {
    const part = section(body, "Approvals", "approvals");
    if (!s.approvals.length) part.appendChild(el("p", "No approval was asked for.", "hint"));
    for (const a of s.approvals) approval(part, a);
  }

  function outcome(body, s) {
    const part = section(body, "Outcome", "outcome");
    const o = s.outcome;
    if (!o) { part.appendChild(el("p", "No outcome recorded: the tool did not run for this call.", "hint")); return; }
    part.appendChild(facts([["state", words(o.state), "state"], ["status", words(o.status), "outcome-status"],
      ["reason", words(o.reason)], ["side effect", words(o.side_effect), "side-effect"],
      ["resolved by", o.resolved_by], ["recorded", fmtTime(o.created_at)], ["updated", fmtTime(o.updated_at)]]));
  }

  function effects(body, s) {
    const part = section(body, "Side effects and compensation", "effects");
    if (!s.side_effects.length) { part.appendChild(el("p", "No side effect recorded.", "hint")); return; }
    const ul = el("ul", null, "st-list");
    for (const e of s.side_effects) {
      const li = el("li");
      li.dataset.sideEffect = e.id;
      li.dataset.status = e.status;
      li.append("side effect ", shortId(e.id), " (" + words(e.policy) + "): " + words(e.status));
      if (e.compensation_call_id) {
        li.append(" — compensation call ", callLink(e.compensation_call_id),
          e.compensation_status ? " " + words(e.compensation_status) : "");
      }
      ul.appendChild(li);
    }
    part.appendChild(ul);
  }

  function related(body, s) {
    const part = section(body, "Related calls", "related");
    if (!s.related.length) { part.appendChild(el("p", "No related call.", "hint")); return; }
    const ul = el("ul", null, "st-list");
    for (const r of s.related) {
      const li = el("li");
      li.dataset.relation = r.relation;
      li.append((RELATION[r.relation] || words(r.relation)) + " ", callLink(r.call_id));
      ul.appendChild(li);
    }
    part.appendChild(ul);
  }

  function back() {  // returns to the list the page came from (the browser's Back does the same)
    const b = el("button", state.from ? "Back" : "Back to the calls", "st-back");
    b.type = "button";
    b.addEventListener("click", () => {
      if (state.from) history.back(); else show("calls");
    });
    return b;
  }

  async function load(id) {
    state.id = id;
    const title = $("#call-title"), body = $("#call-body");
    body.replaceChildren();
    delete $("#call").dataset.callId;
    title.textContent = "Call " + id;
    let s;
    try {
      s = await api("GET", "/calls/" + encodeURIComponent(id) + "/story");
    } catch (e) {
      if (!/^404 /.test(e.message)) throw e;
      title.textContent = "No such call";
      body.append(el("p", "No such call (or not visible to this token): " + id, "st-note"), back());
      title.focus();
      return "no such call (or not visible to this token)";
    }
    if (state.id !== id) return "";  // another call was asked for meanwhile
    title.textContent = "Call of " + s.tool + (s.action ? "." + s.action : "") + " by " + s.agent;
    $("#call").dataset.callId = s.call_id;
    body.appendChild(back());
    header(body, s);
    for (const part of [steps, gate, approvals, outcome, effects, related]) part(body, s);
    title.focus();
    return "call " + shortText(s.call_id) + ": " + s.steps.length + " steps";
  }

  // the browser's Back and Forward, and links to #call/<id>: the hash names the view
  window.addEventListener("hashchange", (ev) => {
    const to = location.hash.slice(1);
    const was = new URL(ev.oldURL).hash.slice(1);
    if (to.startsWith("call/")) state.from = was && !was.startsWith("call/") ? was : state.from;
    show(to || "overview");
  });

  views.call = (id) => load(id);
  return { load };
})();
