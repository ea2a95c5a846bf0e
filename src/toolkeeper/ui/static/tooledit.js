// toolkeeper admin UI: the create / edit tool dialog (issue 11 item 2). A modal <dialog> with
// type-specific wiring (HTTP, function, MCP, retrieval, agent call, artifact), an input schema
// editor, risk, side effect, scopes and confirmation; Save draft (POST /tools, PUT /tools/{id}),
// Publish and New version. The page checks what it can (JSON syntax, secret references, semver)
// and shows the API's reason for everything else. Values are written with textContent only.
"use strict";

window.ToolEdit = (() => {
  const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?$/;
  const SECRETISH = /authorization|token|secret|key|cookie|password|credential/i;
  const REF = /\$\{secret:[^}/]+\/[^}]+\}/;
  const OPERATORS = ["mcp", "artifact"];  // wired only in the operator's configuration
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

  const ToolEdit = {
    tool: null,  // the tool as the API last returned it (null: not saved yet)
    sources: null,
    opener: null,
    wired: false,  // the type-specific inputs were changed (an edit sends them only then)

    async open(tool, opener) {
      this.opener = opener || document.activeElement;
      this.tool = tool || null;
      this.wired = !tool;
      tell("");
      try {
        this.sources = await api("GET", "/tools/sources");
      } catch (e) { say(e.message, true); return; }
      fillPickers(this.sources);
      this.fill(tool);
      $("#tool-dialog").showModal();
      (tool ? $("#te-description") : $("#te-name")).focus();
    },

    fill(t) {
      const impl = (t && t.config_schema && t.config_schema.implementation) || {};
      $("#tooledit-title").textContent = t ? "Edit " + t.name + " " + t.version : "New tool";
      $("#te-name").value = t ? t.name : "";
      $("#te-name").disabled = !!t;
      $("#te-description").value = t ? t.description || "" : "";
      $("#te-type").value = t ? t.implementation_type : "http";
      $("#te-type").disabled = !!t && t.status !== "draft";
      $("#te-http-method").value = impl.method || "POST";
      $("#te-http-url").value = impl.url || "";
      $("#te-http-headers").value = Object.entries(impl.headers || {})
        .map(([k, v]) => k + ": " + v).join("\n");
      $("#te-http-networks").value = (impl.allowed_networks || []).join(", ");
      if (impl.function_name) $("#te-function").value = impl.function_name;
      if (impl.pipeline_id) $("#te-pipeline").value = impl.pipeline_id;
      const mcp = !!t && t.implementation_type === "mcp";  // its server and upstream tool
      if (mcp) { $("#te-mcp-server").value = impl.server; serverTools(); $("#te-mcp-tool").value = impl.tool; }
      if (t && t.artifact_id) { $("#te-artifact").value = t.artifact_id; artifactVersions(); }
      if (t && t.artifact_version) $("#te-artifact-version").value = t.artifact_version;
      // upstream servers and artifacts are the operator's (servers:, artifacts:): the API never
      // publishes a tool wired here to one, so only a tool already of that type shows them
      for (const kind of OPERATORS) {
        $('#te-type option[value="' + kind + '"]').disabled = !t || t.implementation_type !== kind;
      }
      $("#te-type-hint").hidden = !!t;
      // an operator's wiring is read-only: an edit of its governance alone keeps it the
      // operator's (PUT leaves the wiring as it is), so it still publishes
      const operator = ToolEdit.operatorWired(t);
      for (const sel of ["#te-mcp-server", "#te-mcp-tool", "#te-artifact", "#te-artifact-version"]) {
        $(sel).disabled = operator;
      }
      for (const p of document.querySelectorAll("#tooledit .te-operator")) p.hidden = !operator;
      if (operator) $("#te-type").disabled = true;
      $("#te-agent").value = impl.target_agent_slug || impl.target_agent_id || "";
      $("#te-agent-timeout").value = impl.timeout_s || 60;
      $("#te-schema").value = JSON.stringify((t && t.input_schema) ||
                                             { type: "object", properties: {} }, null, 2);
      $("#te-risk").value = t ? t.risk_default : "medium";
      $("#te-side-effect").value = t ? t.side_effect : "irreversible";
      $("#te-scopes").value = t ? (t.scopes_required || []).join(", ") : "";
      $("#te-confirm").checked = !!(t && t.requires_confirmation);
      $("#te-version").value = "";
      this.kind();
      this.buttons();
    },

    buttons() {
      $("#te-publish").disabled = !this.tool;
      $("#te-bump").disabled = !this.tool;
    },

    kind() {
      const kind = $("#te-type").value;
      for (const f of document.querySelectorAll("#tooledit .te-kind")) f.hidden = f.dataset.kind !== kind;
    },

    body() {  // the POST/PUT body, or throws Error(reason) for what the page refuses
      let schema;
      try { schema = JSON.parse($("#te-schema").value); } catch (e) {
        throw new Error("invalid_arguments: the input schema is not JSON: " + e.message);
      }
      const body = {
        description: $("#te-description").value.trim(),
        input_schema: schema,
        risk_default: $("#te-risk").value,
        side_effect: $("#te-side-effect").value,
        scopes_required: $("#te-scopes").value.split(",").map(s => s.trim()).filter(Boolean),
        requires_confirmation: $("#te-confirm").checked,
      };
      if (this.wired) Object.assign(body, wiring($("#te-type").value));
      if (!this.tool) body.name = $("#te-name").value.trim();
      return body;
    },

    async save() {
      let body;
      try { body = this.body(); } catch (e) { tell(e.message, true); return; }
      const id = this.tool && encodeURIComponent(this.tool.id);
      await this.run(id ? api("PUT", "/tools/" + id, body) : api("POST", "/tools", body),
                     t => "Saved " + t.name + " " + t.version + " (" + t.status + ")");
    },

    async publish() {
      await this.run(api("POST", "/tools/" + encodeURIComponent(this.tool.id) + "/publish"),
                     t => "Published " + t.name + " " + t.version);
    },

    async bump() {
      const v = $("#te-version").value.trim();
      const problem = versionProblem(v, this.tool.version);
      if (problem) { tell("invalid_version: " + problem, true); return; }
      const path = "/tools/" + encodeURIComponent(this.tool.id) + "/version?new_version=" +
        encodeURIComponent(v);
      await this.run(api("POST", path), t => "Version " + t.version + " of " + t.name + " published");
    },

    async run(request, done) {
      let t;
      try { t = await request; } catch (e) { tell(e.message, true); return; }
      this.tool = t;
      this.wired = false;
      this.fill(t);
      try {  // the table first: focus returns to its fresh rows
        say(await Registry.load());
      } catch (e) { say(e.message, true); }
      tell(done(t));
    },

    close() {
      const d = $("#tool-dialog");
      if (d.open) d.close();
    },

    restore() {  // focus back on the opener, or on the row's new button after a re-render
      let back = this.opener;
      if (back && !back.isConnected && back.classList.contains("link") && this.tool) back = rowButton(this.tool.name);
      if (back && back.isConnected) back.focus();
      this.opener = null;
    },

    editable(t) {  // a tenant's tools; an operator's MCP or artifact tool for its governance
      return t.scope === "tenant";
    },

    operatorWired(t) {  // an MCP or artifact tool the operator wired (toolkeeper.yaml)
      return !!t && t.origin !== "api" && OPERATORS.includes(t.implementation_type);
    },

    editButton(t) {  // for the registry's drawer
      const b = document.createElement("button");
      b.type = "button";
      b.className = "edit-action";  // not .admin-action: the drawer's lifecycle buttons keep that
      b.textContent = "Edit";
      b.addEventListener("click", () => {
        const opener = rowButton(t.name);
        Registry.close();
        this.open(t, opener);
      });
      return b;
    },
  };

  function rowButton(name) {
    return document.querySelector('#tools tbody tr[data-tool="' + CSS.escape(name) + '"] button.link');
  }

  function tell(text, isError) {
    const p = $("#tooledit-result");
    p.textContent = text;
    p.className = isError ? "error" : "";
  }

  function versionKey(m) { return [+m[1], +m[2], +m[3], m[4] ? 0 : 1, m[4] || ""]; }

  function versionProblem(v, current) {  // as the API's semver_key: X.Y.Z[-pre], increasing
    const m = SEMVER.exec(v), c = SEMVER.exec(current || "");
    if (!m) return JSON.stringify(v) + " is not semver X.Y.Z";
    if (!c) return "";
    const a = versionKey(m), b = versionKey(c);
    for (let i = 0; i < a.length; i++) {
      if (a[i] !== b[i]) return a[i] > b[i] ? "" : v + " must be greater than " + current;
    }
    return v + " must be greater than " + current;
  }

  function headers(text) {
    const out = {};
    for (const line of text.split("\n").map(l => l.trim()).filter(Boolean)) {
      const at = line.indexOf(":");
      if (at < 1) throw new Error("invalid_arguments: header line " + JSON.stringify(line) +
                                  " is not Name: value");
      const name = line.slice(0, at).trim(), value = line.slice(at + 1).trim();
      if (SECRETISH.test(name) && !REF.test(value)) {
        throw new Error("secret_literal_refused: header " + name + " must carry a secret reference " +
                        "${secret:connector/key}, not a literal value");
      }
      out[name] = value;
    }
    return out;
  }

  function wiring(kind) {
    const need = (value, what) => {
      if (!value) throw new Error("invalid_arguments: choose " + what);
      return value;
    };
    const impl = {
      http: () => ({ method: $("#te-http-method").value,
                     url: need($("#te-http-url").value.trim(), "a URL"),
                     headers: headers($("#te-http-headers").value),
                     allowed_networks: $("#te-http-networks").value.split(",")
                       .map((n) => n.trim()).filter((n) => n) }),
      function: () => ({ function_name: need($("#te-function").value, "a registered function") }),
      mcp: () => ({ server: need($("#te-mcp-server").value, "a server"),
                    tool: need($("#te-mcp-tool").value, "an upstream tool") }),
      rag_retrieval: () => ({ pipeline_id: need($("#te-pipeline").value, "a pipeline") }),
      agent_call: () => ({ [targetKey($("#te-agent").value.trim())]:
                             need($("#te-agent").value.trim(), "a target agent"),
                           timeout_s: Number($("#te-agent-timeout").value) || 60 }),
      artifact: () => ({}),
    }[kind]();
    const out = { implementation_type: kind, implementation_config: impl };
    if (kind === "artifact") {
      out.artifact_id = need($("#te-artifact").value, "an artifact");
      out.artifact_version = need($("#te-artifact-version").value, "an artifact version");
    }
    return out;
  }

  function targetKey(target) {  // an agent's name is its slug; otherwise a UUID is its stable id
    const named = ToolEdit.sources && ToolEdit.sources.agents.includes(target);
    return !named && UUID.test(target) ? "target_agent_id" : "target_agent_slug";
  }

  function options(sel, values, empty) {
    const keep = sel.value;
    sel.replaceChildren();
    if (!values.length) sel.appendChild(new Option(empty, ""));
    for (const v of values) sel.appendChild(new Option(v, v));
    if (values.includes(keep)) sel.value = keep;
  }

  function fillPickers(src) {
    options($("#te-function"), src.functions, "(no functions: configure functions:)");
    options($("#te-pipeline"), src.pipelines, "(no retrieval pipelines)");
    options($("#te-mcp-server"), src.servers.map(s => s.name), "(no servers configured)");
    options($("#te-artifact"), src.artifacts.map(a => a.id), "(no artifacts installed)");
    $("#te-agents").replaceChildren(...src.agents.map(a => new Option(a, a)));
    serverTools();
    artifactVersions();
  }

  function serverTools() {
    const s = ToolEdit.sources.servers.find(x => x.name === $("#te-mcp-server").value);
    options($("#te-mcp-tool"), s ? s.tools : [], "(no tools imported)");
  }

  function artifactVersions() {
    const a = ToolEdit.sources.artifacts.find(x => x.id === $("#te-artifact").value);
    options($("#te-artifact-version"), a ? a.versions : [], "(no versions)");
  }

  document.addEventListener("DOMContentLoaded", () => {
    const load = views.tools;
    views.tools = async () => {  // the registry, then New tool for admins
      const status = await load();
      $("#tool-new").hidden = !Registry.isAdmin;
      return status;
    };
    $("#tool-new").addEventListener("click", (ev) => ToolEdit.open(null, ev.currentTarget));
    // Save draft is the form's submit button: Enter in a field saves too (never closes it)
    $("#tooledit").addEventListener("submit", (ev) => { ev.preventDefault(); ToolEdit.save(); });
    $("#tooledit-close").addEventListener("click", () => ToolEdit.close());
    $("#tool-dialog").addEventListener("close", () => ToolEdit.restore());
    $("#te-type").addEventListener("change", () => ToolEdit.kind());
    for (const f of document.querySelectorAll("#tooledit .te-kind, #te-type")) {
      f.addEventListener("input", () => { ToolEdit.wired = true; });
      f.addEventListener("change", () => { ToolEdit.wired = true; });
    }
    $("#te-mcp-server").addEventListener("change", serverTools);
    $("#te-artifact").addEventListener("change", artifactVersions);
    $("#te-publish").addEventListener("click", () => ToolEdit.publish());
    $("#te-bump").addEventListener("click", () => ToolEdit.bump());
  });

  return ToolEdit;
})();
