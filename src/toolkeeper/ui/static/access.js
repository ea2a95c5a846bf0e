// toolkeeper admin UI: access (issue 11 item 3). Tokens (admin): a paged list, create with
// the plaintext shown once (then dropped from the DOM), revoke with a confirm step. Discovery
// tiers (admin, operator): an agent's enabled tools and the unavailable ones with the reason.
// DOM built with createElement/textContent only (strict CSP); uses app.js's helpers.
"use strict";

(() => {
  const PAGE_SIZE = 20;
  const state = { tokens: [], page: 0, agents: [] };

  async function load() {
    const admin = isAdmin();
    $("#token-area").hidden = !admin;
    if (!admin) closeSecret();
    state.agents = await api("GET", "/agents");
    fillAgents($("#tier-agent"), "choose an agent");
    if (!admin) return state.agents.length + " agents";
    fillAgents($("#token-agent"), "(agent role only)");
    await loadTokens();
    return state.tokens.length + " tokens, " + state.agents.length + " agents";
  }

  function fillAgents(select, blank) {
    const keep = select.value;
    select.replaceChildren(new Option(blank, ""));
    for (const a of state.agents) select.appendChild(new Option(a.name, a.name));
    if (state.agents.some(a => a.name === keep)) select.value = keep;
  }

  // tokens -------------------------------------------------------------------------------

  async function loadTokens() {
    const all = await api("GET", "/tokens");
    all.sort((a, b) => (a.revoked_at ? 1 : 0) - (b.revoked_at ? 1 : 0)
      || b.created_at.localeCompare(a.created_at));
    state.tokens = all;
    const last = Math.max(0, Math.ceil(all.length / PAGE_SIZE) - 1);
    state.page = Math.min(state.page, last);
    renderTokens();
  }

  function renderTokens() {
    const body = $("#token-table tbody");
    body.replaceChildren();
    const start = state.page * PAGE_SIZE;
    if (!state.tokens.length) {
      emptyRow(body, 7, "No tokens yet. Create one above: an agent token for each agent that calls "
        + "tools, an approver or operator token for each person.");
    }
    for (const t of state.tokens.slice(start, start + PAGE_SIZE)) {
      const tr = document.createElement("tr");
      tr.dataset.token = t.id;
      cell(tr, t.label || "(no label)");
      cell(tr, t.role);
      cell(tr, t.agent || "");
      cell(tr, fmtTime(t.created_at));
      cell(tr, t.revoked_at ? fmtTime(t.revoked_at) : "");
      cell(tr, shortId(t.id));
      const actions = cell(tr, "");
      if (!t.revoked_at) button(actions, "Revoke…", "", () => askRevoke(actions, t));
      body.appendChild(tr);
    }
    const pages = Math.max(1, Math.ceil(state.tokens.length / PAGE_SIZE));
    $("#token-page").textContent = "page " + (state.page + 1) + " of " + pages;
    $("#token-prev").disabled = state.page === 0;
    $("#token-next").disabled = state.page + 1 >= pages;
  }

  function askRevoke(td, t) {
    td.replaceChildren(el("span", "Revoke " + (t.label || t.id) + "? "));
    button(td, "Confirm revoke", "danger", () => revoke(t));
    button(td, "Cancel", "", () => renderTokens());
  }

  async function revoke(t) {
    try {
      await api("DELETE", "/tokens/" + encodeURIComponent(t.id));
      $("#token-result").textContent = "revoked " + (t.label || t.id);
      await loadTokens();
    } catch (e) {
      $("#token-result").textContent = "revoke failed: " + e.message;
    }
  }

  async function create(ev) {
    ev.preventDefault();
    const role = $("#token-role").value;
    const body = { role, label: $("#token-label").value.trim() };
    if (role === "agent") body.agent = $("#token-agent").value;
    if (role === "agent" && !body.agent) {
      $("#token-result").textContent = "an agent token needs its agent";
      return;
    }
    try {
      const made = await api("POST", "/tokens", body);
      $("#token-label").value = "";
      showSecret(made);
      $("#token-result").textContent = "created " + made.role + " token " + (made.label || made.id);
      await loadTokens();
    } catch (e) {
      $("#token-result").textContent = "create failed: " + e.message;
    }
  }

  function showSecret(made) {  // the plaintext lives only in this panel until it is closed
    const box = $("#token-secret");
    const code = el("code", made.token, "secret");
    code.id = "token-plain";
    const copy = el("button", "Copy");
    copy.type = "button";
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(made.token);
        $("#token-result").textContent = "copied to the clipboard";
      } catch (e) {
        $("#token-result").textContent = "copy failed (" + e.message + "): select the token and copy it";
      }
    });
    const close = el("button", "I have stored it — close");
    close.type = "button";
    close.addEventListener("click", closeSecret);
    box.replaceChildren(
      el("p", "This token is shown once and never again: store it now. Anyone holding it acts as "
        + made.role + (made.agent ? " " + made.agent : "") + " of tenant " + made.tenant_id + ".",
      "warning"),
      code, copy, close);
    box.hidden = false;
    close.focus();
  }

  function closeSecret() {
    const box = $("#token-secret");
    box.replaceChildren();
    box.hidden = true;
  }

  // discovery tiers ----------------------------------------------------------------------

  const tierPages = { enabled: { page: 0 }, unavailable: { page: 0 } };  // paged() in app.js

  function enabledRow(t) {
    const tr = document.createElement("tr");
    cell(tr, t.name);
    cell(tr, t.version);
    cell(tr, t.actions.join(", "));
    cell(tr, Object.values(t.names).join(", "));
    return tr;
  }

  function unavailableRow(t) {
    const tr = document.createElement("tr");
    cell(tr, t.name);
    cell(tr, t.why_unavailable).className = "reason";
    cell(tr, t.message);
    cell(tr, t.missing_scopes.join(", "));
    return tr;
  }

  function tierTable(which, items, row) {  // client-side paging: the API returns a tier whole
    const { rows, nav } = paged(items, tierPages[which], which + " tools", () => tierTable(which, items, row));
    $("#" + which + "-table tbody").replaceChildren(...rows.map(row));
    if (!items.length) {
      emptyRow($("#" + which + "-table tbody"), 4, which === "enabled"
        ? "No tool is enabled for this agent: activate tools in its profile (Agents)."
        : "No tool is held back from this agent.");
    }
    $("#" + which + "-pages").replaceChildren(nav);
  }

  async function tiers() {
    const agent = $("#tier-agent").value;
    tierPages.enabled.page = tierPages.unavailable.page = 0;
    tierTable("enabled", [], enabledRow);
    tierTable("unavailable", [], unavailableRow);
    $("#tier-result").textContent = "";
    if (!agent) return;
    const path = "/discovery/agents/" + encodeURIComponent(agent);
    try {
      const [on, off] = await Promise.all([api("GET", path + "/enabled"),
        api("GET", path + "/unavailable")]);
      tierTable("enabled", on.tools, enabledRow);
      tierTable("unavailable", off.tools, unavailableRow);
      $("#tier-result").textContent = agent + " (profile " + on.profile + "): "
        + on.tools.length + " enabled, " + off.tools.length + " unavailable";
    } catch (e) {
      $("#tier-result").textContent = e.message;
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("#token-form").addEventListener("submit", create);
    $("#token-role").addEventListener("change", () => {
      $("#token-agent").disabled = $("#token-role").value !== "agent";
    });
    $("#token-prev").addEventListener("click", () => { state.page--; renderTokens(); });
    $("#token-next").addEventListener("click", () => { state.page++; renderTokens(); });
    $("#tier-agent").addEventListener("change", tiers);
    $("#logout").addEventListener("click", closeSecret);
    for (const b of document.querySelectorAll("#tabs button")) {
      b.addEventListener("click", closeSecret);  // leaving the tab drops the plaintext too
    }
  });

  views.access = load;
})();
