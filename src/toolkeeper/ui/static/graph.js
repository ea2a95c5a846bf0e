// toolkeeper admin UI: the tool dependency graph (issue 31). Impact.confirm lists, before a
// tool is (re-)published, who loses or is affected by what (GET /tools/{id}/impact) and
// resolves only when the admin confirms. Impact.drawing draws the tool's neighbourhood
// (GET /graph?around=) as SVG built here: a few dozen nodes in columns by their distance
// from the tool need no layout library; nothing external, no inline style (strict CSP).
"use strict";

window.Impact = (() => {
  const SVG = "http://www.w3.org/2000/svg";

  function item(list, text) { list.appendChild(el("li", text)); }

  function describe(out) {  // the impact body as a list of sentences
    const list = el("ul", null, "impact-list");
    const verb = out.effect === "affected" ? "follows the new version for" : "loses";
    for (const a of out.agents) {
      item(list, "agent " + a.agent + " (profile " + a.profile + ") " + verb + " "
                 + out.tool + ": " + (a.actions.join(", ") || "no action"));
    }
    for (const p of out.profiles.filter(p => !out.agents.some(a => a.profile === p.profile))) {
      item(list, "profile " + p.profile + " (no agent) " + verb + " " + out.tool + ": "
                 + (p.actions.join(", ") || "no action"));
    }
    for (const c of out.compensations_broken) {
      item(list, "the undo of " + c.action + " (" + c.compensation + ") breaks");
    }
    for (const a of out.agents_unreachable || []) item(list, "agent " + a + " is no longer reached");
    if (!list.children.length) item(list, "nothing depends on it");
    return list;
  }

  // Shows the impact of `change` after `anchor`; resolves true on Confirm, false on Cancel.
  async function confirm(anchor, toolId, change, label) {
    const out = await api("GET", "/tools/" + toolId + "/impact?change=" + change);
    const box = el("div", null, "impact");
    box.setAttribute("role", "alertdialog");
    box.setAttribute("aria-label", "Impact of " + label);
    box.append(el("h3", "Before " + label.toLowerCase() + " " + out.tool), describe(out));
    anchor.after(box);
    return new Promise(resolve => {
      for (const [text, ok, cls] of [["Confirm " + label.toLowerCase(), true, "danger"],
                                     ["Cancel", false, ""]]) {
        const b = el("button", text, cls);
        b.type = "button";
        b.addEventListener("click", () => { box.remove(); resolve(ok); });
        box.appendChild(b);
      }
      box.querySelector("button").focus();
    });
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text != null) e.textContent = text;
    return e;
  }

  function columns(g, center) {  // node id -> [column, row], column = distance from center
    const dist = new Map([[center, 0]]);
    for (let frontier = [center]; frontier.length;) {
      const next = [];
      for (const e of g.edges) {
        for (const [a, b] of [[e.source, e.target], [e.target, e.source]]) {
          if (frontier.includes(a) && !dist.has(b)) { dist.set(b, dist.get(a) + 1); next.push(b); }
        }
      }
      frontier = next;
    }
    const rows = new Map();
    const at = new Map();
    for (const n of g.nodes) {
      const c = dist.get(n.id) || 0;
      rows.set(c, (rows.get(c) || 0) + 1);
      at.set(n.id, [c, rows.get(c) - 1]);
    }
    return [at, Math.max(...rows.values())];
  }

  // The neighbourhood of the node `center` as an <svg> (columns 190 px apart, rows 28 px).
  function draw(g, center) {
    const [at, tallest] = columns(g, center);
    const width = 190 * (Math.max(...[...at.values()].map(p => p[0])) + 1);
    const pic = svg("svg", { viewBox: "0 0 " + width + " " + (28 * tallest + 8),
                             role: "img", class: "graph-drawing",
                             "aria-label": "Dependencies of " + center });
    const xy = id => [10 + 190 * at.get(id)[0], 18 + 28 * at.get(id)[1]];
    for (const e of g.edges) {
      const [x1, y1] = xy(e.source);
      const [x2, y2] = xy(e.target);
      const line = svg("line", { x1, y1, x2, y2, class: "graph-edge" });
      line.appendChild(svg("title", {}, e.kind));
      pic.appendChild(line);
    }
    for (const n of g.nodes) {
      const [x, y] = xy(n.id);
      const cls = "graph-node graph-" + n.kind + (n.missing ? " graph-missing" : "")
                  + (n.id === center ? " graph-center" : "");
      pic.appendChild(svg("text", { x, y, class: cls, "data-node": n.id },
                          n.kind + ": " + n.name));
    }
    return pic;
  }

  // The drawing around the node `id` (e.g. agent:default/bot), two edges deep.
  async function around(id) {
    return draw(await api("GET", "/graph?depth=2&around=" + encodeURIComponent(id)), id);
  }

  // The drawing around the tool named `name` (the tenant's own before a global one).
  async function drawing(name) {
    const all = await api("GET", "/graph");
    const tools = all.nodes.filter(n => n.kind === "tool" && n.name === name);
    const node = tools.find(n => n.tenant !== "*") || tools[0];
    return node ? around(node.id) : el("p", "not in the graph", "hint");
  }

  return { around, confirm, describe, draw, drawing };
})();
