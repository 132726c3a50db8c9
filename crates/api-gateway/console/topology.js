// A stack's resources as a graph: one node per resource, one edge per
// dependency (from the resource depended on to the resource that depends
// on it: `required_by`). Laid out by dagre once per change of the resource
// set or its dependencies; a status change only recolours.

import { layout, graphlib } from "./vendor/dagre.esm.js";
import { s, h, statusKind, clear } from "./ui.js";
import { stackRefFromHref, stackRoute } from "./api.js";

const NODE_W = 196;
const NODE_H = 60;
const GAP_X = 28;
const GAP_Y = 22;
const PAD = 24;
const MIN_SCALE = 0.55;

function truncate(text, max) {
  const value = String(text || "");
  return value.length > max ? `${value.slice(0, max - 1)}…` : value;
}

/** The nested stack a resource makes, from its `nested` link. */
export function nestedRef(resource) {
  const link = (resource.links || []).find((l) => l.rel === "nested");
  return link ? stackRefFromHref(link.href) : null;
}

/** A path through dagre's points, its corners rounded. */
function edgePath(points) {
  if (!points.length) return "";
  let d = `M${points[0].x.toFixed(1)},${points[0].y.toFixed(1)}`;
  if (points.length === 2) return `${d}L${points[1].x.toFixed(1)},${points[1].y.toFixed(1)}`;
  for (let i = 1; i < points.length - 1; i += 1) {
    const p = points[i];
    const n = points[i + 1];
    const mx = (p.x + n.x) / 2;
    const my = (p.y + n.y) / 2;
    d += `Q${p.x.toFixed(1)},${p.y.toFixed(1)} ${(i === points.length - 2 ? n.x : mx).toFixed(1)},${(i === points.length - 2 ? n.y : my).toFixed(1)}`;
  }
  return d;
}

/**
 * createTopology({onSelect}) → {el, update(resources), select(name)}.
 * `el` is a scrolling container around `svg#topology`.
 */
export function createTopology({ onSelect, direction } = {}) {
  const svg = s("svg", { id: "topology", class: "topology", role: "group",
    "aria-label": "Resources and their dependencies" });
  const defs = s("defs", {},
    s("marker", { id: "topology-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7",
      markerHeight: "7", orient: "auto-start-reverse" },
    s("path", { d: "M0,0L10,5L0,10z", class: "edge-arrow" })));
  const edgeLayer = s("g", { class: "edges" });
  const nodeLayer = s("g", { class: "nodes" });
  svg.append(defs, edgeLayer, nodeLayer);
  const legend = h("div", { class: "topology-legend", "aria-hidden": "true" },
    ["ok", "progress", "failed", "warn", "muted"].map((kind) =>
      h("span", { class: `legend-item status-${kind}` }, h("span", { class: "legend-swatch" }),
        { ok: "complete", progress: "in progress", failed: "failed", warn: "waiting / check", muted: "init / deleted" }[kind])));
  const scroller = h("div", { class: "topology-scroll", tabindex: "-1" }, svg);
  // Zoom: "fit" (the default) scales the graph down to the card's width,
  // never below MIN_SCALE (then the scrollbars pan); + and − zoom by hand.
  let mode = "fit";
  let scale = 1;
  let natural = { width: 0, height: 0 };
  const zoomLabel = h("span", { class: "zoom-label", "aria-live": "polite" }, "100%");
  const zoomOut = h("button", { type: "button", id: "topology-zoom-out", class: "btn btn-small btn-quiet",
    "aria-label": "Zoom out", onclick: () => zoomBy(1 / 1.25) }, "−");
  const zoomIn = h("button", { type: "button", id: "topology-zoom-in", class: "btn btn-small btn-quiet",
    "aria-label": "Zoom in", onclick: () => zoomBy(1.25) }, "+");
  const fit = h("button", { type: "button", id: "topology-fit", class: "btn btn-small btn-quiet",
    "aria-pressed": "true", onclick: () => { mode = "fit"; applyScale(); } }, "Fit");
  const controls = h("div", { class: "topology-controls", role: "group", "aria-label": "Zoom" },
    zoomOut, zoomLabel, zoomIn, fit);
  const el = h("div", { class: "topology-wrap" }, scroller, legend);

  function applyScale() {
    if (!natural.width) return;
    if (mode === "fit") {
      const room = Math.max(200, scroller.clientWidth - 2);
      scale = Math.max(MIN_SCALE, Math.min(1, room / natural.width));
    }
    svg.setAttribute("width", String(Math.round(natural.width * scale)));
    svg.setAttribute("height", String(Math.round(natural.height * scale)));
    zoomLabel.textContent = `${Math.round(scale * 100)}%`;
    fit.setAttribute("aria-pressed", mode === "fit" ? "true" : "false");
  }
  function zoomBy(factor) {
    mode = "manual";
    scale = Math.max(0.25, Math.min(2, scale * factor));
    applyScale();
  }
  if (typeof ResizeObserver === "function") {
    let lastWidth = 0;
    new ResizeObserver(() => {
      if (scroller.clientWidth !== lastWidth) { lastWidth = scroller.clientWidth; if (mode === "fit") applyScale(); }
    }).observe(scroller);
  }

  let signature = "";
  let firstLayout = true;
  let selected = null;
  const nodes = new Map(); // name → {g, rect, status, stripe}

  function select(name, { notify = true } = {}) {
    if (selected && nodes.has(selected)) {
      nodes.get(selected).g.classList.remove("selected");
      nodes.get(selected).g.setAttribute("aria-pressed", "false");
    }
    selected = name;
    const node = nodes.get(name);
    if (node) {
      node.g.classList.add("selected");
      node.g.setAttribute("aria-pressed", "true");
    }
    if (notify && onSelect) onSelect(name);
  }

  function colour(node, resource) {
    const kind = resource._hook ? "warn" : statusKind(resource.resource_status);
    if (node.kind !== kind) {
      node.g.classList.remove(`status-${node.kind}`);
      node.g.classList.add(`status-${kind}`);
      node.kind = kind;
    }
    const sig = `${resource.resource_status}|${resource.resource_status_reason || ""}|${resource._hook || ""}`;
    if (node.sig !== sig) {
      node.sig = sig;
      node.statusText.textContent = resource._hook ? `paused: ${resource._hook}` : truncate(resource.resource_status, 28);
      node.g.classList.toggle("is-paused", Boolean(resource._hook));
      node.g.setAttribute("aria-label",
        `${resource.resource_name}, ${resource.resource_type}, ${resource.resource_status}`);
      node.title.textContent = `${resource.resource_name}\n${resource.resource_type}\n${resource.resource_status}` +
        `${resource.resource_status_reason ? `\n${resource.resource_status_reason}` : ""}`;
    }
  }

  function makeNode(resource, x, y) {
    const name = resource.resource_name;
    const kind = statusKind(resource.resource_status);
    const nested = nestedRef(resource);
    const title = s("title", {}, "");
    const statusText = s("text", { x: "14", y: "50", class: "node-status" }, "");
    const g = s("g", {
      class: `node status-${kind}${nested ? " is-nested" : ""}`,
      "data-resource": name,
      transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`,
      tabindex: "0", role: "button", "aria-pressed": "false",
    },
    title,
    s("rect", { class: "node-box", width: String(NODE_W), height: String(NODE_H), rx: "8", ry: "8" }),
    s("rect", { class: "node-stripe", width: "5", height: String(NODE_H - 16), x: "4", y: "8", rx: "2.5" }),
    s("text", { x: "14", y: "19", class: "node-name" }, truncate(name, 24)),
    s("text", { x: "14", y: "34", class: "node-type" }, truncate(resource.resource_type, 30)),
    statusText);
    if (nested) {
      const link = s("a", { href: stackRoute(nested.name || nested.id, nested.name ? nested.id : null),
        class: "nested-link", "aria-label": `open the nested stack of ${name}` },
      s("title", {}, "Open the nested stack"),
      s("rect", { x: String(NODE_W - 30), y: "6", width: "24", height: "18", rx: "4", class: "nested-badge" }),
      s("path", { class: "nested-glyph", transform: `translate(${NODE_W - 26},9) scale(0.5)`,
        d: "M4 4h10v2H6v8H4V4zm4 4h12v12H8V8zm2 2v8h8v-8h-8z" }));
      link.addEventListener("click", (event) => event.stopPropagation());
      g.appendChild(link);
    }
    const node = { g, kind, statusText, title };
    g.addEventListener("click", () => select(name));
    g.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); select(name); }
    });
    colour(node, resource);
    return node;
  }

  function relayout(resources) {
    clear(edgeLayer);
    clear(nodeLayer);
    nodes.clear();
    const names = new Set(resources.map((r) => r.resource_name));
    const edges = [];
    for (const r of resources) {
      for (const dependent of r.required_by || []) {
        if (names.has(dependent) && dependent !== r.resource_name) edges.push([r.resource_name, dependent]);
      }
    }
    const linked = new Set(edges.flat());
    const connected = resources.filter((r) => linked.has(r.resource_name));
    const isolated = resources.filter((r) => !linked.has(r.resource_name));
    const positions = new Map();
    const edgePoints = [];
    let width = 0;
    let height = 0;

    if (connected.length) {
      const graph = new graphlib.Graph({ multigraph: false });
      graph.setGraph({ rankdir: direction || "LR", nodesep: GAP_Y, ranksep: 56, edgesep: 12,
        marginx: PAD, marginy: PAD });
      graph.setDefaultEdgeLabel(() => ({}));
      for (const r of connected) graph.setNode(r.resource_name, { width: NODE_W, height: NODE_H });
      for (const [from, to] of edges) graph.setEdge(from, to);
      layout(graph);
      for (const name of graph.nodes()) {
        const n = graph.node(name);
        positions.set(name, { x: n.x - NODE_W / 2, y: n.y - NODE_H / 2 });
      }
      for (const e of graph.edges()) edgePoints.push({ from: e.v, to: e.w, points: graph.edge(e).points || [] });
      const g = graph.graph();
      width = g.width || 0;
      height = g.height || 0;
    }
    if (isolated.length) {
      // Resources with no dependency at all: a grid below the graph rather
      // than one endless row.
      const available = Math.max(width, 1100);
      const perRow = Math.max(1, Math.floor((available - PAD * 2 + GAP_X) / (NODE_W + GAP_X)));
      const top = height ? height : PAD;
      isolated.forEach((r, index) => {
        const col = index % perRow;
        const row = Math.floor(index / perRow);
        positions.set(r.resource_name, { x: PAD + col * (NODE_W + GAP_X), y: top + row * (NODE_H + GAP_Y) });
      });
      const rows = Math.ceil(isolated.length / perRow);
      width = Math.max(width, PAD * 2 + Math.min(perRow, isolated.length) * (NODE_W + GAP_X) - GAP_X);
      height = top + rows * (NODE_H + GAP_Y) - GAP_Y + PAD;
    }

    const edgeFragment = document.createDocumentFragment();
    for (const { from, to, points } of edgePoints) {
      edgeFragment.appendChild(s("path", { class: "edge", d: edgePath(points), "data-from": from, "data-to": to,
        "marker-end": "url(#topology-arrow)" }));
    }
    edgeLayer.appendChild(edgeFragment);
    const nodeFragment = document.createDocumentFragment();
    for (const r of resources) {
      const at = positions.get(r.resource_name);
      const node = makeNode(r, at.x, at.y);
      nodes.set(r.resource_name, node);
      nodeFragment.appendChild(node.g);
    }
    nodeLayer.appendChild(nodeFragment);
    width = Math.ceil(Math.max(width, NODE_W + PAD * 2));
    height = Math.ceil(Math.max(height, NODE_H + PAD * 2));
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    natural = { width, height };
    applyScale();
    if (firstLayout && positions.size) {
      // Start where the graph starts: its first rank's top node in view
      // (dagre centres ranks, so a tall graph's corner may be empty).
      firstLayout = false;
      let start = null;
      for (const at of positions.values()) {
        if (!start || at.x < start.x - 1 || (Math.abs(at.x - start.x) <= 1 && at.y < start.y)) start = at;
      }
      scroller.scrollLeft = Math.max(0, start.x * scale - PAD);
      scroller.scrollTop = Math.max(0, start.y * scale - PAD);
    }
    if (selected && nodes.has(selected)) select(selected, { notify: false });
  }

  /** Lays out again when the resources or their dependencies changed;
   *  otherwise only recolours the nodes whose status changed. */
  function update(resources) {
    const next = resources.map((r) => `${r.resource_name}>${(r.required_by || []).join(",")}` +
      `${nestedRef(r) ? "+n" : ""}`).sort().join("|");
    if (next !== signature) {
      signature = next;
      relayout(resources);
    } else {
      for (const r of resources) {
        const node = nodes.get(r.resource_name);
        if (node) colour(node, r);
      }
    }
    el.classList.toggle("is-empty", resources.length === 0);
  }

  return { el, controls, update, select, get selected() { return selected; } };
}
