// toolkeeper admin UI: the approvals inbox. Loaded after app.js (uses api, say, $, cell, el).
// Each pending approval is a card with the exact call; polling is bounded.
"use strict";

const POLL_MS = 3000;
const POLL_FOR_MS = 10 * 60 * 1000;  // stop polling after 10 minutes; showing the tab resumes
let pollTimer = null;
let pollUntil = 0;

function field(dl, label, value, pre) {
  const dt = document.createElement("dt");
  dt.textContent = label;
  const dd = document.createElement("dd");
  if (pre) {
    const p = document.createElement("pre");
    p.textContent = value;
    dd.appendChild(p);
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
    + (a.edited_arguments ? ", arguments edited" : "")
    + "; the agent re-submits the call with this approval id to run it";
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
  await refreshApprovals();
}

function denyForm(card, a) {
  const form = el("form", null, "decide");
  const label = el("label", "note ");
  const note = el("textarea");
  note.maxLength = 2000;
  note.rows = 2;
  label.appendChild(note);
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

function editForm(card, a) {
  const form = el("form", null, "decide");
  const label = el("label", "arguments (JSON) ");
  const text = el("textarea");
  text.rows = 6;
  text.value = JSON.stringify(a.arguments, null, 2);
  label.appendChild(text);
  const diff = el("pre", "", "diff");
  diff.setAttribute("aria-live", "polite");
  const send = el("button", "Approve edited arguments", "approve");
  send.type = "submit";
  const parse = () => {
    let v;
    try { v = JSON.parse(text.value); } catch (e) { return "not JSON: " + e.message; }
    if (v === null || typeof v !== "object" || Array.isArray(v)) return "arguments must be a JSON object";
    return v;
  };
  const check = () => {
    const v = parse();
    if (typeof v === "string") { diff.textContent = v; diff.className = "diff error"; send.disabled = true; return; }
    const c = changes(a.arguments, v);
    diff.className = "diff";
    diff.textContent = c.length ? "changed:\n" + c.join("\n") : "no change";
    send.disabled = false;
  };
  text.addEventListener("input", check);
  form.append(label, diff, send);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = parse();
    if (typeof v === "string") return;
    post(a, "approve", { arguments: v }).catch(failed);
  });
  card.appendChild(form);
  check();
  text.focus();
}

function approvalCard(a) {
  const card = el("article", null, "approval");
  card.dataset.id = a.id;
  card.appendChild(el("h3", a.tool + (a.action ? " / " + a.action : "") + " @" + a.tool_version));
  const dl = document.createElement("dl");
  field(dl, "agent", a.agent);
  field(dl, "tool", a.tool);
  field(dl, "action", a.action || "—");
  field(dl, "version", a.tool_version);
  field(dl, "risk", a.risk);
  field(dl, "gate", a.gate + (a.kind !== "approve" ? " (" + a.kind + ")" : ""));
  field(dl, "arguments", JSON.stringify(a.arguments, null, 2), true);
  if (a.summary) field(dl, "preview", a.summary, true);
  field(dl, "requested", a.created_at);
  field(dl, "expires", a.expires_at);
  field(dl, "call id", a.call_id || "—");
  card.appendChild(dl);
  const actions = el("div", null, "actions");
  const open = (make) => () => {
    for (const f of card.querySelectorAll("form.decide")) f.remove();
    make(card, a);
  };
  button(actions, "Approve", "approve", () => post(a, "approve", {}).catch(failed));
  button(actions, "Approve with edits…", "", open(editForm));
  button(actions, "Deny…", "deny", open(denyForm));
  card.appendChild(actions);
  return card;
}

async function refreshApprovals() {
  const items = await api("GET", "/approvals?status=pending");
  const list = $("#approval-list");
  list.replaceChildren(...items.map(approvalCard));
  if (!items.length) list.appendChild(el("p", "Nothing is waiting for a decision.", "hint"));
  return items.length + " pending";
}

function polling() {
  // bounded: only while the tab is shown and the page visible, and for POLL_FOR_MS at most
  const shown = !$("#approvals").hidden && document.visibilityState === "visible";
  const busy = document.querySelector("#approval-list form.decide") !== null;
  if (!shown || Date.now() > pollUntil) { clearInterval(pollTimer); pollTimer = null; return; }
  if (!busy && token()) refreshApprovals().catch((e) => say(e.message, true));
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
