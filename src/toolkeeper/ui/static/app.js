// toolkeeper admin UI: one page over the REST API. Values are written with textContent only.
"use strict";

const KEY = "toolkeeper.token";
const $ = (sel) => document.querySelector(sel);

function token() { return sessionStorage.getItem(KEY) || ""; }

// single sign-on (GET /auth/session): the signed-in person and the CSRF token every unsafe
// request sends back; null when nobody is signed in (a pasted token is used then)
const Sso = { configured: false, session: null };

function signedIn() { return Boolean(token() || Sso.session); }

async function loadSession() {
  const res = await fetch("/auth/session", { credentials: "same-origin" });
  const data = await res.json().catch(() => ({}));
  Sso.configured = Boolean(data.sso);
  Sso.session = res.ok && data.signed_in ? data : null;
  $("#sso-login").hidden = !Sso.configured || Boolean(Sso.session);
  $("#sso-user").hidden = !Sso.session;
  $("#sso-name").textContent = Sso.session ? Sso.session.name : "";
  $("#login").hidden = Boolean(Sso.session);
}

async function signOut() {
  const res = await fetch("/auth/logout", {
    method: "POST", credentials: "same-origin",
    headers: { "X-CSRF-Token": Sso.session ? Sso.session.csrf_token : "" } });
  const data = await res.json().catch(() => ({}));
  forget();
  Sso.session = null;
  if (res.ok && data.logout_url) { location.assign(data.logout_url); return; }
  await loadSession();
  say(res.ok ? "signed out" : "sign-out failed: " + ((data.error || {}).reason || res.status),
      !res.ok);
}

function say(text, isError) {
  const el = $("#status");
  el.textContent = text;
  el.className = isError ? "error" : "";
}

async function api(method, path, body) {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  else if (Sso.session && method !== "GET" && method !== "HEAD") {
    headers["X-CSRF-Token"] = Sso.session.csrf_token;  // the session cookie goes along
  }
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    // the session ended (idle, absolute, signed out elsewhere): offer sign-in again
    if (res.status === 401 && !token() && Sso.session) await loadSession();
    const err = (data && data.error) || {};
    throw new Error(res.status + " " + (err.reason || "error") + ": " + (err.message || text));
  }
  return data;
}

function el(tag, text, cls) {  // an element with its text (never parsed as HTML) and class
  const e = document.createElement(tag);
  if (text != null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function noteField(text) {  // a labelled note (≤ 2000 characters, the API's bound): [label, textarea]
  const label = el("label", text);
  const note = el("textarea");
  note.maxLength = 2000;
  note.rows = 2;
  label.appendChild(note);
  return [label, note];
}

function cell(row, value, pre) {
  const td = document.createElement("td");
  if (pre) {
    const p = document.createElement("pre");
    p.textContent = value;
    td.appendChild(p);
  } else if (value instanceof Node) {  // fmtTime, shortId, callLink …
    td.appendChild(value);
  } else {
    td.textContent = value == null ? "" : String(value);
  }
  row.appendChild(td);
  return td;
}

function button(td, label, cls, onClick) {
  const b = document.createElement("button");
  b.textContent = label;
  if (cls) b.className = cls;
  b.addEventListener("click", onClick);
  td.appendChild(b);
}

// Contract 3: readable times, durations, ids, call links and empty states for every view
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const EXACT = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400],
               ["hour", 3600], ["minute", 60], ["second", 1]];

function relativeText(date) {  // "3 minutes ago", "in 2 hours", "now": the largest whole unit
  const s = (date.getTime() - Date.now()) / 1000;
  if (Math.abs(s) < 10) return RELATIVE.format(0, "second");
  for (const [unit, size] of UNITS) {
    if (Math.abs(s) >= size) return RELATIVE.format(Math.trunc(s / size), unit);
  }
  return RELATIVE.format(0, "second");
}

function fmtTime(iso) {  // <time datetime=ISO title=exact local time>relative<hidden> (exact)</hidden>
  const t = document.createElement("time");
  const date = iso ? new Date(iso) : null;
  if (!date || Number.isNaN(date.getTime())) { t.textContent = iso ? String(iso) : "—"; return t; }
  t.dateTime = iso;
  t.title = EXACT.format(date);
  t.className = "when";
  t.append(el("span", relativeText(date), "rel"), el("span", " (" + t.title + ")", "sr-only"));
  return t;
}

function refreshTimes() {  // the relative texts move on without asking the server again
  for (const t of document.querySelectorAll("time.when[datetime]")) {
    const rel = t.querySelector(".rel");
    if (rel) rel.textContent = relativeText(new Date(t.dateTime));
  }
}
setInterval(refreshTimes, 30000);

function fmtDuration(ms) {  // "840 ms", "2.4 s", "3 min 5 s", "1 h 2 min"
  if (ms == null || Number.isNaN(Number(ms))) return "—";
  const n = Number(ms);
  if (n < 1000) return (n < 10 ? Math.round(n * 10) / 10 : Math.round(n)) + " ms";
  if (n < 60000) return (Math.round(n / 100) / 10) + " s";
  const s = Math.round(n / 1000);
  if (s < 3600) return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
  const m = Math.round(s / 60);
  return Math.floor(m / 60) + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
}

// both ends of an id: the ids one server makes share their start (a per-process prefix)
// and differ at their end (a counter), so "first 8…" would read the same for every call
function shortText(id) { const s = String(id); return s.length > 14 ? s.slice(0, 6) + "…" + s.slice(-6) : s; }

function copyStatus() {  // one polite live region outside main, made before the first copy
  let region = document.getElementById("copy-status");
  if (!region) {
    region = el("div", "", "sr-only");
    region.id = "copy-status";
    region.setAttribute("role", "status");
    document.body.appendChild(region);
  }
  return region;
}

function copyText(text) {  // navigator.clipboard, or a selected textarea where it is refused
  const fallback = () => {
    const area = el("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "sr-only";
    document.body.appendChild(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    if (!done) throw new Error("copy refused");
  };
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text).catch(fallback);
  }
  return Promise.resolve().then(fallback);
}

function shortId(id) {  // a shortened id (full on hover) and a button copying the whole id
  const wrap = el("span", null, "shortid");
  if (id == null || id === "") { wrap.textContent = "—"; return wrap; }
  wrap.dataset.id = String(id);
  const code = el("code", shortText(id));
  code.title = String(id);
  const copy = el("button", "copy", "copy");
  copy.type = "button";
  copy.setAttribute("aria-label", "copy id " + id);
  copy.title = "copy " + id;
  const region = copyStatus();
  copy.addEventListener("click", () => {
    copyText(String(id)).then(() => { region.textContent = "copied " + id; },
                              () => { region.textContent = "could not copy " + id; });
  });
  wrap.append(code, copy);
  return wrap;
}

function callLink(callId) {  // a link to the call's page (#call/<id>), shortened like shortId
  if (callId == null || callId === "") return el("span", "—");
  const a = el("a", shortText(callId), "call-link");
  a.href = "#call/" + encodeURIComponent(callId);
  a.title = "call " + callId;
  a.dataset.callId = String(callId);
  return a;
}

function emptyState(text, action) {  // what an empty list means and what to do next;
  // action: {label, tab} (a link to that tab) or {label, onClick} (a button)
  const box = el("div", null, "empty");
  box.appendChild(el("p", text));
  if (action && action.tab) {  // another tab: a real link, opened the way the nav opens it
    const a = el("a", action.label);
    a.href = "#" + action.tab;
    a.addEventListener("click", (ev) => { ev.preventDefault(); show(action.tab); });
    box.appendChild(a);
  } else if (action && action.onClick) {
    const b = el("button", action.label);
    b.type = "button";
    b.addEventListener("click", action.onClick);
    box.appendChild(b);
  }
  return box;
}

function emptyRow(tbody, span, text, action) {  // emptyState as the only row of a table
  const tr = document.createElement("tr");
  const td = document.createElement("td");
  td.colSpan = span;
  td.appendChild(emptyState(text, action));
  tr.appendChild(td);
  tbody.appendChild(tr);
  return tr;
}

// client-side paging of a list the API returns whole: the rows of the caller's page (at.page)
// and a Previous / Next nav for it, shown only when there is more than one page of LIST_PAGE
const LIST_PAGE = 20;

function paged(items, at, what, redraw) {
  const pages = Math.max(1, Math.ceil(items.length / LIST_PAGE));
  at.page = Math.min(Math.max(at.page || 0, 0), pages - 1);
  const nav = el("div", null, "pager");
  nav.dataset.pager = what;
  if (pages > 1) {
    const turn = (step, label) => {
      const b = el("button", label);
      b.type = "button";
      b.dataset.step = String(step);
      b.setAttribute("aria-label", label + " page of " + what);
      b.disabled = step < 0 ? at.page === 0 : at.page >= pages - 1;
      b.addEventListener("click", () => {
        at.page += step;
        redraw();  // the nav is rebuilt: keep the keyboard on the same button
        const again = document.querySelector(
          '[data-pager="' + CSS.escape(what) + '"] button[data-step="' + step + '"]');
        if (again) (again.disabled ? again.parentElement.querySelector("button:not([disabled])") || again : again).focus();
      });
      return b;
    };
    nav.append(turn(-1, "Previous"), el("span", "page " + (at.page + 1) + " of " + pages), turn(1, "Next"));
  }
  return { rows: items.slice(at.page * LIST_PAGE, (at.page + 1) * LIST_PAGE), nav };
}

// who the token is (GET /me), for every script: Console.roles holds its role names
const Console = { me: null, roles: new Set() };

async function whoami() {
  if (!Console.me) {
    Console.me = await api("GET", "/me");
    Console.roles = new Set(Console.me.roles);
  }
  for (const b of document.querySelectorAll("#tabs button[data-needs]")) {
    b.hidden = !b.dataset.needs.split(" ").some(r => Console.roles.has(r));
  }
  return Console.me;
}

function forget() {
  Console.me = null;
  Console.roles = new Set();
  sessionStorage.removeItem(KEY);
  for (const b of document.querySelectorAll("#tabs button[data-needs]")) b.hidden = true;
  clearViews();
}

function clearViews() {
  // what one token was shown goes with it: after a token is forgotten or refused, no view of
  // the previous one's data (rows, cards, drawers, admin-only areas, results) stays on screen
  for (const s of document.querySelectorAll("main section")) s.hidden = true;
  for (const e of document.querySelectorAll("main tbody, #approval-list, #drawer-body, #call-body")) e.replaceChildren();
  for (const e of document.querySelectorAll("main [role=status], main [role=alert]")) e.textContent = "";
  for (const e of document.querySelectorAll("#token-area, #token-secret, #tool-drawer")) e.hidden = true;
  const dialog = $("#tool-dialog");
  if (dialog && dialog.open) dialog.close();
}

function isAdmin() { return Console.roles.has("admin"); }

const views = {
  approvals: null,  // approvals.js sets it
  tools() { return Registry.load(); },  // registry.js
  calls: null,  // calls.js sets it
  audit: null,  // calls.js sets it
  access: null,  // access.js sets it
  call: null,  // story.js sets it: #call/<call_id>, a call's page
};

function route(hash) {  // "call/<id>" → ["call", id]; a tab's name → [name, null]
  return hash.startsWith("call/") ? ["call", decodeURIComponent(hash.slice(5))] : [hash, null];
}

async function show(name) {
  const [view, arg] = route(name);  // the call page marks no tab as current
  for (const b of document.querySelectorAll("#tabs button")) {
    b.classList.toggle("active", b.dataset.tab === view);
    if (b.dataset.tab === view) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
  for (const s of document.querySelectorAll("main section")) s.hidden = s.id !== view;
  history.replaceState(null, "", "#" + name);  // not location.hash: that would move focus to the section
  if (!signedIn()) {
    say(Sso.configured ? "Sign in with single sign-on, or paste a token (admin, approver or operator)."
      : "Paste a token (admin, approver or operator) to begin.", true);
    return;
  }
  try {
    say("loading…");
    await whoami();
    say(await views[view](arg));
  } catch (e) {
    say(e.message, true);
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  $("#sso-logout").addEventListener("click", () => signOut().catch((e) => say(e.message, true)));
  for (const b of document.querySelectorAll("#tabs button")) {
    b.addEventListener("click", () => show(b.dataset.tab));
  }
  $("#login").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    forget();
    sessionStorage.setItem(KEY, $("#token").value.trim());
    $("#token").value = "";
    try {  // the console is for people: an agent's token is not kept
      const me = await whoami();
      if (!["admin", "operator", "approver"].some(r => Console.roles.has(r))) {
        forget();
        say("token refused: the console is for people (admin, operator, approver); " +
            "this is the token of agent " + (me.agent || me.name), true);
        return;
      }
    } catch (e) {
      forget();
      say("token refused: " + e.message, true);
      return;
    }
    show(location.hash.slice(1) || "overview");
  });
  $("#logout").addEventListener("click", () => { forget(); say("token forgotten"); });
  // after every listener is in place: a token pasted while the session is asked for is
  // taken by its submit handler, not submitted by the browser as a plain form
  try { await loadSession(); } catch (e) { Sso.session = null; }
  const start = location.hash.slice(1);
  show(views[route(start)[0]] ? start : "overview");
});
