// toolkeeper admin UI: agents, profiles and the Tool Picker (issue 11 item 3; seed 002 §6).
// Save writes the whole profile with PUT /profiles/{name}: its activations become the
// picker's selection all at once, or nothing is saved. DOM built with textContent only.
// Uses api(), el(), say(), $ from app.js and Registry (registry.js) for the tool drawer.
"use strict";

window.Agents = (() => {
  const PAGE_SIZE = 20;
  const BUCKETS = ["built_in", "mcp", "artifact", "custom"];

  const A = {
    agents: [], profiles: [], tools: [], templates: {}, page: 0, isAdmin: false,
    profilePage: { page: 0 }, groupPages: {},  // paged(): the profiles' page, each picker group's
    editing: null,  // the profile being edited (as read from the API)
    picked: new Map(),  // tool name -> its activation (kept whole: policy, gates, limits …)

    async load() {
      [this.agents, this.profiles] = await Promise.all([api("GET", "/agents"), api("GET", "/profiles")]);
      this.isAdmin = isAdmin();  // app.js: from GET /me
      for (const f of document.querySelectorAll("#agents .admin-only")) f.hidden = !this.isAdmin;
      this.renderProfiles();
      return this.renderAgents();
    },

    renderAgents() {
      const pages = Math.max(1, Math.ceil(this.agents.length / PAGE_SIZE));
      this.page = Math.min(Math.max(this.page, 0), pages - 1);
      const tb = $("#agent-table tbody");
      tb.replaceChildren();
      for (const a of this.agents.slice(this.page * PAGE_SIZE, (this.page + 1) * PAGE_SIZE)) {
        const tr = tb.insertRow();
        tr.dataset.agent = a.name;
        for (const v of [a.name, a.profile]) tr.insertCell().textContent = v;
        const about = tr.insertCell();
        const td = tr.insertCell();
        if (this.isAdmin) {
          const sel = profileSelect("profile for " + a.name, a.profile);
          const text = el("input");
          text.value = a.description;
          text.maxLength = 2000;
          text.setAttribute("aria-label", "description of " + a.name);
          about.appendChild(text);
          td.append(sel, adminButton("Save", () => api("PUT", "/agents/" + enc(a.name),
            { profile: sel.value, description: text.value.trim() }),
            () => "agent " + a.name + " saved: profile " + sel.value));
          td.append(adminButton("Delete", () => api("DELETE", "/agents/" + enc(a.name)), "agent " + a.name + " deleted"));
        } else about.textContent = a.description;
        td.append(graphButton(tr, a));
      }
      if (!this.agents.length) {
        emptyRow(tb, 4, this.isAdmin ? "No agents yet. Add one below: give it a name and a profile, then a token (Access)."
          : "No agents yet. An admin adds them here.");
      }
      $("#agent-page").textContent = "page " + (this.page + 1) + " of " + pages;
      $("#agent-prev").disabled = this.page === 0;
      $("#agent-next").disabled = this.page >= pages - 1;
      $("#agent-new-profile").replaceChildren(...options(this.profiles.map(p => p.name), ""));
      return this.agents.length + " agents, " + this.profiles.length + " profiles";
    },

    renderProfiles() {
      const tb = $("#profile-table tbody");
      tb.replaceChildren();
      const { rows, nav } = paged(this.profiles, this.profilePage, "profiles", () => this.renderProfiles());
      $("#profile-pages").replaceChildren(nav);
      if (!this.profiles.length) {
        emptyRow(tb, 5, this.isAdmin ? "No profiles yet. Add one below: it says which tools its agents may call."
          : "No profiles yet. An admin adds them here.");
      }
      for (const p of rows) {
        const tr = tb.insertRow();
        tr.dataset.profile = p.name;
        for (const v of [p.name, String(p.autonomy), p.scopes.join(", "),
                         p.activations.map(x => x.tool).join(", ")]) tr.insertCell().textContent = v;
        const td = tr.insertCell();
        if (this.isAdmin) {
          const edit = el("button", "Edit", "admin-action");
          edit.type = "button";
          edit.addEventListener("click", () => this.edit(p.name).catch(e => result(e.message, true)));
          td.append(edit, adminButton("Delete", () => api("DELETE", "/profiles/" + enc(p.name)), "profile " + p.name + " deleted"));
        }
      }
    },

    async edit(name) {
      const [profile, tools, tpl] = await Promise.all([
        api("GET", "/profiles/" + enc(name)), this.allTools(), api("GET", "/tools/builtins/templates")]);
      this.editing = profile;
      this.tools = tools;
      this.templates = {};
      for (const t of tpl.installed) this.templates[t.name] = t;
      this.picked = new Map(profile.activations.map(a => [a.tool, a]));
      $("#picker-policies").replaceChildren();
      $("#editor-title").textContent = "Profile " + profile.name;
      $("#edit-autonomy").value = String(profile.autonomy);
      $("#edit-scopes").value = profile.scopes.join(", ");
      $("#edit-description").value = profile.description;
      const subtypes = [...new Set(tools.map(t => Registry.subtype(t)))].sort();
      $("#pick-subtype").replaceChildren(el("option", "any"), ...options(subtypes, ""));
      $("#pick-subtype").firstChild.value = "";
      $("#profile-editor").hidden = false;
      this.groupPages = {};
      this.renderPicker();
      $("#editor-title").scrollIntoView();
    },

    async allTools() {
      const out = [];
      for (let page = 0; page < 20; page++) {
        const got = await api("GET", "/tools?limit=500&skip=" + page * 500);
        out.push(...got);
        if (got.length < 500) break;
      }
      return out;
    },

    renderPicker() {
      const q = $("#pick-search").value.trim().toLowerCase();
      const bucket = $("#pick-bucket").value, sub = $("#pick-subtype").value;
      const shown = this.tools.filter(t => (!bucket || t.tool_type === bucket)
        && (!sub || Registry.subtype(t) === sub)
        && (!q || [t.name, t.slug, t.description].some(v => (v || "").toLowerCase().includes(q))));
      const box = $("#picker-groups");
      box.replaceChildren();
      for (const b of BUCKETS) {
        const group = shown.filter(t => t.tool_type === b);
        if (!group.length) continue;
        const fs = el("fieldset", null, "pick-group");
        fs.dataset.bucket = b;
        fs.appendChild(el("legend", b + " (" + group.length + ")"));
        const at = this.groupPages[b] = this.groupPages[b] || { page: 0 };
        const { rows, nav } = paged(group, at, b + " tools", () => this.renderPicker());
        for (const t of rows) fs.appendChild(this.pickRow(t));
        fs.appendChild(nav);
        box.appendChild(fs);
      }
      if (!box.childElementCount) box.appendChild(el("p", "No tool matches.", "hint"));
      this.renderSummary();
    },

    pickRow(t) {
      const row = el("div", null, "pick-row");
      const label = el("label");
      const box = el("input");
      box.type = "checkbox";
      box.checked = this.picked.has(t.name);
      box.addEventListener("change", () => {
        if (box.checked) this.picked.set(t.name, this.picked.get(t.name) || { tool: t.name });
        else this.picked.delete(t.name);
        this.renderSummary();
      });
      label.append(box, " " + t.name + " ", el("span", t.tool_type + " · " + Registry.subtype(t), "badge"));
      const info = el("button", "Details", "link");
      info.type = "button";
      info.setAttribute("aria-label", "Details of " + t.name);
      info.addEventListener("click", () => Registry.open(t, info));
      row.append(label, info);
      return row;
    },

    renderSummary() {
      const names = [...this.picked.keys()].sort();
      $("#picker-count").textContent = names.length ? names.length + " selected: " + names.join(", ") : "Nothing selected.";
      const box = $("#picker-policies");  // editors kept across re-renders: no edit is lost
      const kept = new Map([...box.children].map(d => [d.dataset.tool, d]));
      box.replaceChildren(...names.map(name => kept.get(name) || this.policyEditor(name)));
    },

    policyEditor(name) {
      const act = this.picked.get(name);
      const tpl = this.templates[name];
      const props = tpl && tpl.policy_schema && tpl.policy_schema.properties;
      const d = el("details", null, "policy");
      d.dataset.tool = name;
      d.appendChild(el("summary", "Policy and gates of " + name));
      if (props) {
        d.appendChild(el("p", "Policy values (the built-in's schema; defaults shown)", "hint"));
        d.appendChild(policyForm(name, props, { ...(tpl.policy_defaults || {}), ...(act.policy || {}) }));
      } else {
        d.append(el("p", "Policy values (JSON)", "hint"), textarea("policy of " + name, act.policy || {}, 4));
      }
      d.append(el("p", "Gate per action (only stricter): {\"action\": \"allow|preview|confirm|approve|deny\"}", "hint"),
               textarea("gates of " + name, act.gates || {}, 2));
      return d;
    },

    activations() {  // the selection as activations, or throws naming the field that is not JSON
      const out = [];
      for (const name of [...this.picked.keys()].sort()) {
        const d = document.querySelector('#picker-policies details[data-tool="' + CSS.escape(name) + '"]');
        const act = { ...this.picked.get(name) };
        const form = d.querySelector(".policy-form");
        act.policy = form ? formPolicy(form, this.templates[name].policy_defaults || {}) : parsed(d, "policy of " + name);
        act.gates = parsed(d, "gates of " + name);
        out.push(act);
      }
      return out;
    },

    async save() {
      const p = this.editing;
      const body = { ...p, autonomy: Number($("#edit-autonomy").value), description: $("#edit-description").value,
                     scopes: $("#edit-scopes").value.split(",").map(s => s.trim()).filter(Boolean),
                     activations: this.activations() };
      delete body.tenant_id; delete body.origin;
      this.editing = await api("PUT", "/profiles/" + enc(p.name), body);
      this.picked = new Map(this.editing.activations.map(a => [a.tool, a]));
      $("#picker-policies").replaceChildren();
      return "profile " + p.name + " saved: " + this.editing.activations.length + " tools";
    },
  };

  const enc = encodeURIComponent;

  function options(values, selected) {
    return values.map(v => { const o = el("option", v); o.value = v; o.selected = v === selected; return o; });
  }

  function profileSelect(label, selected) {
    const sel = el("select");
    sel.setAttribute("aria-label", label);
    sel.append(...options(A.profiles.map(p => p.name), selected));
    return sel;
  }

  function textarea(label, value, rows) {
    const t = el("textarea");
    t.rows = rows;
    t.setAttribute("aria-label", label);
    t.value = JSON.stringify(value, null, 2);
    return t;
  }

  function parsed(d, label) {  // a JSON field's value, or throws naming it
    const text = d.querySelector('[aria-label="' + CSS.escape(label) + '"]').value.trim();
    try { return text ? JSON.parse(text) : {}; } catch (e) { throw new Error("invalid JSON in " + label); }
  }

  function policyForm(tool, props, values) {  // one labelled input per policy property
    const box = el("div", null, "policy-form filters");
    for (const [key, s] of Object.entries(props)) {
      const label = el("label", (s.title || key) + " ");
      const input = el("input");
      input.dataset.key = key;
      input.dataset.kind = s.type === "integer" || s.type === "number" ? "number" : s.type === "boolean" ? "boolean" : "json";
      input.setAttribute("aria-label", tool + " policy " + key);
      const v = values[key];
      if (input.dataset.kind === "boolean") { input.type = "checkbox"; input.checked = Boolean(v); }
      else if (input.dataset.kind === "number") { input.type = "number"; input.value = v == null ? "" : String(v); }
      else input.value = v == null ? "" : JSON.stringify(v);
      label.appendChild(input);
      box.appendChild(label);
    }
    return box;
  }

  function formPolicy(form, defaults) {  // the values that differ from the defaults
    const out = {};
    for (const input of form.querySelectorAll("input")) {
      const key = input.dataset.key, kind = input.dataset.kind, text = input.value.trim();
      let v = null;
      if (kind === "boolean") v = input.checked;
      else if (kind === "number") v = text === "" ? null : Number(text);
      else if (text) {
        try { v = JSON.parse(text); } catch (e) { throw new Error("invalid JSON in " + input.getAttribute("aria-label")); }
      }
      if (JSON.stringify(v) !== JSON.stringify(defaults[key] === undefined ? null : defaults[key])) out[key] = v;
    }
    return out;
  }

  function result(text, isError) {
    const r = $("#agents-result");
    r.textContent = text;
    r.className = isError ? "error" : "";
  }

  function graphButton(tr, a) {  // toggles a row drawing the agent's dependencies (graph.js)
    const b = el("button", "Graph", "link");
    b.type = "button";
    b.setAttribute("aria-label", "Graph of " + a.name);
    b.addEventListener("click", async () => {
      const next = tr.nextElementSibling;
      if (next && next.classList.contains("graph-row")) return next.remove();
      try {
        const cell = el("td");
        cell.colSpan = 4;
        cell.appendChild(await Impact.around("agent:" + a.tenant_id + "/" + a.name));
        const row = el("tr", null, "graph-row");
        row.appendChild(cell);
        tr.after(row);
      } catch (e) { result(e.message, true); }
    });
    return b;
  }

  function adminButton(label, run, done) {
    const b = el("button", label, "admin-action");
    b.type = "button";
    b.addEventListener("click", () => run().then(() => A.load())
      .then(() => result(typeof done === "function" ? done() : done))
      .catch(e => result(e.message, true)));
    return b;
  }

  function submit(form, run) {
    $(form).addEventListener("submit", (ev) => {
      ev.preventDefault();
      run().then(done => A.load().then(() => result(done))).catch(e => result(e.message, true));
    });
  }

  views.agents = () => A.load();
  document.addEventListener("DOMContentLoaded", () => {
    submit("#agent-form", async () => {
      const name = $("#agent-new-name").value.trim();
      await api("POST", "/agents", { name, profile: $("#agent-new-profile").value });
      return "agent " + name + " created";
    });
    submit("#profile-form", async () => {
      const name = $("#profile-new-name").value.trim();
      await api("POST", "/profiles", { name, autonomy: Number($("#profile-new-autonomy").value) });
      return "profile " + name + " created";
    });
    $("#agent-prev").addEventListener("click", () => { A.page--; say(A.renderAgents()); });
    $("#agent-next").addEventListener("click", () => { A.page++; say(A.renderAgents()); });
    const refilter = () => { A.groupPages = {}; A.renderPicker(); };  // a new filter starts at page 1
    for (const id of ["#pick-bucket", "#pick-subtype"]) $(id).addEventListener("change", refilter);
    $("#pick-search").addEventListener("input", refilter);
    $("#pick-clear").addEventListener("click", () => { A.picked.clear(); A.renderPicker(); });
    $("#profile-save").addEventListener("click", () => A.save()
      .then(done => A.load().then(() => { A.renderPicker(); result(done); }))
      .catch(e => result(e.message + " (nothing was saved)", true)));
    $("#profile-cancel").addEventListener("click", () => { $("#profile-editor").hidden = true; A.editing = null; });
  });

  return A;
})();
