// toolkeeper admin UI: the approvals inbox. Loaded after app.js (uses api, say, $, cell, el).
// Each pending approval is a card with the exact call; polling is bounded.
"use strict";

const POLL_MS = 3000;
const POLL_FOR_MS = 10 * 60 * 1000;  // stop polling after 10 minutes; showing the tab resumes
let pollTimer = null;
let pollUntil = 0;
const inboxPage = { page: 0 };  // the inbox's page (paged() in app.js), kept across polls

function field(dl, label, value, pre) {
  const dt = document.createElement("dt");
  dt.textContent = label;
  const dd = document.createElement("dd");
  if (pre) {
    const p = document.createElement("pre");
    p.textContent = value;
    dd.appendChild(p);
  } else if (value instanceof Node) {  // fmtTime, shortId, callLink
    dd.appendChild(value);
  } else {
    dd.textContent = value == null ? "" : String(value);
  }
  dl.append(dt, dd);
  return dd;
}

function changes(before, after) {
  // one line per top-level argument that differs: what the approver changed
  const keys = new Set([...Object.keys(before || {}), ...Object.keys(after)]);
  const out = [];
  for (const k of keys) {
    const a = JSON.stringify((before || {})[k]);
    const b = JSON.stringify(after[k]);
    if (a !== b) out.push(k + ": " + (a === undefined ? "(none)" : a) + " → "
      + (b === undefined ? "(removed)" : b));
  }
  return out;
}

function decided(a, verb) {
  const out = $("#approval-result");
  out.className = "";
  out.textContent = "approval " + a.id + " (" + a.tool + (a.action ? " / " + a.action : "")
    + "): " + verb + " — status " + a.status + (a.note ? ", note: " + a.note : "")
    + (a.decided_by ? ", decided by " + a.decided_by + (a.decided_by_subject
      ? " (" + a.decided_by_subject + ")" : "") : "")
    + (a.edited_arguments ? ", arguments edited" : "")
    + (verb === "denied" ? "" : "; the agent runs it by sending the same call again"
      + (a.edited_arguments ? " with the edited arguments" : " (same tool, action and arguments)")
      + ": the gateway finds this approval from the call itself, or by approval_id " + a.id
      + " if the agent sends it");
}

function failed(e) {
  const out = $("#approval-result");
  out.className = "error";
  out.textContent = e.message;
}

async function post(a, verb, body) {
  const path = "/approvals/" + encodeURIComponent(a.id) + "/" + verb;
  const r = await api("POST", path, body);
  decided(r, verb === "deny" ? "denied" : "approved");
  say(await refreshApprovals());  // the header's count follows the list
}

function denyForm(card, a) {
  const form = el("form", null, "decide");
  const [label, note] = noteField("note ");
  const send = el("button", "Deny with this note", "deny");
  send.type = "submit";
  form.append(label, send);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    post(a, "deny", { note: note.value.trim() || null }).catch(failed);
  });
  card.appendChild(form);
  note.focus();
}

async function actionSchema(a) {
  // the action's input schema, from the tools list (the approval names the tool, not its id)
  const tools = await api("GET", "/tools?limit=500");
  const mine = tools.filter((t) => t.name === a.tool);
  const t = mine.find((x) => x.tenant_id) || mine[0];
  if (!t) return null;
  const acts = t.actions || {};
  const act = acts[a.action] || (Object.keys(acts).length === 1 ? Object.values(acts)[0] : null);
  return (act && act.input_schema) || t.input_schema || null;
}

function schemaInput(name, prop, value) {
  // one control per property: enum → select, boolean → checkbox, number → number,
  // string → text, anything else (objects, arrays) → a JSON textarea
  const type = Array.isArray(prop.type) ? prop.type.find((x) => x !== "null") : prop.type;
  if (Array.isArray(prop.enum)) {
    const sel = el("select");
    sel.appendChild(el("option", "(none)")).value = "";
    for (const v of prop.enum) {
      const o = el("option", typeof v === "string" ? v : JSON.stringify(v));
      o.value = JSON.stringify(v);
      sel.appendChild(o);
    }
    sel.value = value === undefined ? "" : JSON.stringify(value);
    return { input: sel, read: () => (sel.value === "" ? undefined : JSON.parse(sel.value)) };
  }
  if (type === "boolean") {
    const box = el("input");
    box.type = "checkbox";
    box.checked = value === true;
    return { input: box, read: () => box.checked };
  }
  if (type === "integer" || type === "number") {
    const num = el("input");
    num.type = "number";
    num.step = type === "integer" ? "1" : "any";
    num.value = value === undefined ? "" : String(value);
    return { input: num, read: () => {
      if (num.value.trim() === "") return undefined;
      const n = Number(num.value);
      if (!Number.isFinite(n)) throw new Error(name + ": not a number");
      return n;
    } };
  }
  if (type === "string") {
    const text = el("input");
    text.type = "text";
    text.value = value === undefined ? "" : String(value);
    return { input: text, read: () => (text.value === "" ? undefined : text.value) };
  }
  const area = el("textarea");
  area.rows = 3;
  area.value = value === undefined ? "" : JSON.stringify(value, null, 2);
  return { input: area, read: () => {
    if (area.value.trim() === "") return undefined;
    try { return JSON.parse(area.value); } catch (e) { throw new Error(name + ": not JSON"); }
  } };
}

function schemaFields(form, schema, args) {
  // the controls of the form; arguments the schema does not name are kept in a JSON field
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const readers = {};
  for (const [name, prop] of Object.entries(props)) {
    const f = schemaInput(name, prop || {}, args[name]);
    const label = el("label", name + (required.has(name) ? " (required) " : " "));
    if (required.has(name)) f.input.required = true;
    f.input.name = name;
    label.appendChild(f.input);
    if (prop && prop.description) label.appendChild(el("span", prop.description, "hint"));
    form.appendChild(label);
    readers[name] = f;
  }
  const rest = Object.keys(args).filter((k) => !(k in props));
  if (!Object.keys(props).length || rest.length) {
    const extra = {};
    for (const k of rest) extra[k] = args[k];
    const f = schemaInput("arguments", {}, Object.keys(props).length ? extra : args);
    const label = el("label", Object.keys(props).length ? "other arguments (JSON) " : "arguments (JSON) ");
    label.appendChild(f.input);
    form.appendChild(label);
    readers["\u0000rest"] = f;
  }
  return readers;
}

function readArgs(readers) {
  // the edited arguments, or throws Error with what is wrong
  const out = {};
  for (const [name, f] of Object.entries(readers)) {
    const v = f.read();
    if (name === "\u0000rest") {
      if (v === undefined) continue;
      if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("arguments must be a JSON object");
      Object.assign(out, v);
    } else if (v !== undefined) out[name] = v;
  }
  return out;
}

async function editForm(card, a) {
  const form = el("form", null, "decide");
  form.noValidate = true;  // required is marked; the API's check (and reason) decides
  const schema = await actionSchema(a).catch(() => null);
  const readers = schemaFields(form, schema, a.arguments || {});
  const diff = el("pre", "", "diff");
  diff.setAttribute("aria-live", "polite");
  const send = el("button", "Approve edited arguments", "approve");
  send.type = "submit";
  const check = () => {
    let v;
    try { v = readArgs(readers); } catch (e) {
      diff.textContent = e.message; diff.className = "diff error"; send.disabled = true; return null;
    }
    const c = changes(a.arguments, v);
    diff.className = "diff";
    diff.textContent = c.length ? "changed:\n" + c.join("\n") : "no change";
    send.disabled = false;
    return v;
  };
  form.addEventListener("input", check);
  form.addEventListener("change", check);
  form.append(diff, send);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = check();
    if (v !== null) post(a, "approve", { arguments: v }).catch(failed);
  });
  card.appendChild(form);
  check();
  const first = form.querySelector("input, select, textarea");
  if (first) first.focus();
}

// what each kind of approval waits for, in words a person reads at a glance
const NEEDS = {
  approve: "a person's approval",
  confirm: "a person's confirmation",
  preview: "a person to check the preview",
};

function argumentsLine(args) {
  // the arguments on one line, long values shortened: what the call will do, at a glance
  const entries = Object.entries(args || {});
  if (!entries.length) return "no arguments";
  const parts = entries.slice(0, 6).map(([k, v]) => {
    const text = typeof v === "string" ? v : JSON.stringify(v);
    return k + " " + (text.length > 60 ? text.slice(0, 59) + "…" : text);
  });
  return parts.join(", ") + (entries.length > 6 ? ", … (" + entries.length + " arguments)" : "");
}

function approvalCard(a) {
  const card = el("article", null, "approval");
  card.dataset.id = a.id;
  card.appendChild(el("h3", a.tool + (a.action ? " / " + a.action : "") + " @" + a.tool_version));
  card.appendChild(el("p", a.agent + " asks to run " + a.tool
    + (a.action && a.action !== "run" ? " (" + a.action + ")" : "")
    + " with " + argumentsLine(a.arguments) + ". It needs " + (NEEDS[a.kind] || a.kind)
    + " (" + a.risk + " risk).", "asks"));
  const dl = document.createElement("dl");
  field(dl, "agent", a.agent);
  field(dl, "tool", a.tool);
  field(dl, "action", a.action || "—");
  field(dl, "version", a.tool_version);
  field(dl, "risk", a.risk);
  field(dl, "needs", (NEEDS[a.kind] || a.kind) + " (gate " + a.gate + ")");
  field(dl, "arguments", JSON.stringify(a.arguments, null, 2), true);
  if (a.preview) {
    field(dl, "preview", a.preview.summary || "", true);
    if (a.preview.data != null) field(dl, "preview data", JSON.stringify(a.preview.data, null, 2), true);
  } else if (a.summary && a.summary !== a.tool + "." + a.action) {
    field(dl, "what it does", a.summary, true);  // the tool's confirmation prompt
  }
  field(dl, "requested", fmtTime(a.created_at));
  field(dl, "expires", fmtTime(a.expires_at));
  field(dl, "call", callLink(a.call_id));  // the call that asked: its page
  field(dl, "approval id", shortId(a.id));
  card.appendChild(dl);
  const actions = el("div", null, "actions");
  const open = (make) => () => {
    for (const f of card.querySelectorAll("form.decide")) f.remove();
    Promise.resolve(make(card, a)).catch(failed);
  };
  button(actions, "Approve", "approve", () => post(a, "approve", {}).catch(failed));
  button(actions, "Approve with edits…", "", open(editForm));
  button(actions, "Deny…", "deny", open(denyForm));
  card.appendChild(actions);
  return card;
}

function showInbox(items) {  // client-side paging: GET /approvals returns every pending one
  const list = $("#approval-list");
  const { rows, nav } = paged(items, inboxPage, "pending approvals", () => showInbox(items));
  list.replaceChildren(...rows.map(approvalCard), nav);
  if (!items.length) {
    list.appendChild(emptyState("Nothing is waiting for a decision. New requests appear here by "
      + "themselves while this tab is open; the Overview shows what was decided.",
    { label: "Open the Overview", tab: "overview" }));
  }
}

const INBOX_MAX = 1000;  // the API's largest page: GET /approvals answers at most this many

async function refreshApprovals() {
  const items = await api("GET", "/approvals?status=pending&limit=" + INBOX_MAX);
  showInbox(items);
  return items.length >= INBOX_MAX
    ? "the newest " + INBOX_MAX + " pending (more wait: decide these first)" : items.length + " pending";
}

function polling() {
  // bounded: only while the tab is shown and the page visible, and for POLL_FOR_MS at most
  const shown = !$("#approvals").hidden && document.visibilityState === "visible";
  const busy = document.querySelector("#approval-list form.decide") !== null;
  if (!shown || Date.now() > pollUntil) { clearInterval(pollTimer); pollTimer = null; return; }
  if (!busy && signedIn()) refreshApprovals().then(say, (e) => say(e.message, true));
}

function startPolling() {
  pollUntil = Date.now() + POLL_FOR_MS;
  if (pollTimer === null) pollTimer = setInterval(polling, POLL_MS);
}

views.approvals = async () => {
  startPolling();
  return refreshApprovals();
};

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && !$("#approvals").hidden) startPolling();
});
