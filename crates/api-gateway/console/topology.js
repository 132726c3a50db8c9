// A stack's resources as a graph: one node per resource, one edge per
// dependency (from the resource depended on to the resource that depends
// on it: `required_by`). Laid out by dagre once per change of the resource
// set or its dependencies; a status change only recolours. A nested
// stack's resources can be shown in place: a box (a dagre compound graph's
// cluster) around the resource that made it, framed with the nested
// stack's name and status.

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
 * createTopology({onSelect, onToggleNested}) → {el, update(resources,
 * nested), select(key)}. `el` is a scrolling container around
 * `svg#topology`. A nested-stack resource's node has an expand control
 * (`.expand-nested`); pressing it calls onToggleNested(key, open), and the
 * caller passes the nested stack's resources back in `nested`.
 */
export function createTopology({ onSelect, onToggleNested, direction } = {}) {
  const svg = s("svg", { id: "topology", class: "topology", role: "group",
    "aria-label": "Resources and their dependencies" });
  const defs = s("defs", {},
    s("marker", { id: "topology-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7",
      markerHeight: "7", orient: "auto-start-reverse" },
    s("path", { d: "M0,0L10,5L0,10z", class: "edge-arrow" })));
  const clusterLayer = s("g", { class: "clusters" });
  const edgeLayer = s("g", { class: "edges" });
  const nodeLayer = s("g", { class: "nodes" });
  svg.append(defs, clusterLayer, edgeLayer, nodeLayer);
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
  const nodes = new Map(); // key → {g, kind, statusText, title, sig, marker}
  const clusterEls = new Map(); // key of the nested resource → {g, text, kind, sig, width}

  function select(key, { notify = true } = {}) {
    if (selected && nodes.has(selected)) {
      nodes.get(selected).g.classList.remove("selected");
      nodes.get(selected).g.setAttribute("aria-pressed", "false");
    }
    selected = key;
    const node = nodes.get(key);
    if (node) {
      node.g.classList.add("selected");
      node.g.setAttribute("aria-pressed", "true");
    }
    if (notify && onSelect) onSelect(key);
  }

  function colour(node, item) {
    const resource = item.resource;
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
        `${item.key}, ${resource.resource_type}, ${resource.resource_status}`);
      node.title.textContent = `${item.key}\n${resource.resource_type}\n${resource.resource_status}` +
        `${resource.resource_status_reason ? `\n${resource.resource_status_reason}` : ""}`;
    }
  }

  /** The nested stack's box: its name and status on the frame, coloured
   *  by the status. */
  function colourCluster(el, stack) {
    const status = (stack && stack.stack_status) || "";
    const kind = statusKind(status);
    if (el.kind !== kind) {
      el.g.classList.remove(`status-${el.kind}`);
      el.g.classList.add(`status-${kind}`);
      el.kind = kind;
    }
    const text = `${(stack && stack.stack_name) || "nested stack"}${status ? ` · ${status}` : ""}`;
    if (el.sig !== text) {
      el.sig = text;
      const room = Math.max(6, Math.floor((el.width - 40) / 6.4));
      el.text.textContent = truncate(text, room);
      el.title.textContent = `${text}${stack && stack.stack_status_reason ? `\n${stack.stack_status_reason}` : ""}`;
      fitLegend(el);
    }
  }

  function fitLegend(el) {
    let width = el.text.textContent.length * 6.4;
    try {
      const measured = el.text.getComputedTextLength();
      if (measured > 0) width = measured;
    } catch {
      // Not laid out yet: the estimate stands.
    }
    el.bg.setAttribute("width", String(Math.ceil(width + 16)));
  }

  function toggle(item) {
    if (onToggleNested) onToggleNested(item.key, !item.expanded);
  }

  function makeNode(item, x, y) {
    const { key, resource } = item;
    const kind = statusKind(resource.resource_status);
    const nested = nestedRef(resource);
    const title = s("title", {}, "");
    const statusText = s("text", { x: "14", y: "50", class: "node-status" }, "");
    const g = s("g", {
      class: `node status-${kind}${nested ? " is-nested" : ""}${item.expanded ? " is-expanded" : ""}` +
        `${item.depth ? " is-inner" : ""}`,
      "data-resource": key,
      transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`,
      tabindex: "0", role: "button", "aria-pressed": "false",
    },
    title,
    s("rect", { class: "node-box", width: String(NODE_W), height: String(NODE_H), rx: "8", ry: "8" }),
    s("rect", { class: "node-stripe", width: "5", height: String(NODE_H - 16), x: "4", y: "8", rx: "2.5" }),
    s("text", { x: "14", y: "19", class: "node-name" }, truncate(resource.resource_name, nested ? 17 : 24)),
    s("text", { x: "14", y: "34", class: "node-type" }, truncate(resource.resource_type, 30)),
    statusText);
    let marker = null;
    if (nested) {
      // Expand: the nested stack's resources drawn here, in a box around
      // this node; the badge beside it opens the nested stack's page.
      const label = item.loading ? `loading the resources of ${key}'s nested stack`
        : `${item.expanded ? "hide" : "show"} the resources of ${key}'s nested stack here`;
      marker = s("g", { class: `expand-nested${item.loading ? " is-loading" : ""}`, "data-resource": key,
        role: "button", tabindex: "0", "aria-expanded": item.expanded ? "true" : "false", "aria-label": label },
      s("title", {}, label),
      s("rect", { x: String(NODE_W - 58), y: "6", width: "24", height: "18", rx: "4", class: "expand-badge" }),
      s("path", { class: "expand-glyph", d: item.loading
        ? `M${NODE_W - 51},15h2v2h-2zM${NODE_W - 47},15h2v2h-2zM${NODE_W - 43},15h2v2h-2z`
        : item.expanded ? `M${NODE_W - 51},14h10v2h-10z`
          : `M${NODE_W - 51},14h4v-4h2v4h4v2h-4v4h-2v-4h-4z` }));
      const act = (event) => {
        event.stopPropagation();
        if (event.type === "keydown") {
          if (event.key !== "Enter" && event.key !== " ") return;
          event.preventDefault();
        }
        if (!item.loading) toggle(item);
      };
      marker.addEventListener("click", act);
      marker.addEventListener("keydown", act);
      g.appendChild(marker);
      const link = s("a", { href: stackRoute(nested.name || nested.id, nested.name ? nested.id : null),
        class: "nested-link", "aria-label": `open the nested stack of ${key}` },
      s("title", {}, "Open the nested stack"),
      s("rect", { x: String(NODE_W - 30), y: "6", width: "24", height: "18", rx: "4", class: "nested-badge" }),
      s("path", { class: "nested-glyph", transform: `translate(${NODE_W - 26},9) scale(0.5)`,
        d: "M4 4h10v2H6v8H4V4zm4 4h12v12H8V8zm2 2v8h8v-8h-8z" }));
      link.addEventListener("click", (event) => event.stopPropagation());
      g.appendChild(link);
    }
    const node = { g, kind, statusText, title, marker };
    g.addEventListener("click", () => select(key));
    g.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); select(key); }
    });
    colour(node, item);
    return node;
  }

  /**
   * The resources as drawn: the stack's own, and after each expanded
   * nested-stack resource, its nested stack's (keys "parent/name", deeper
   * ones "a/b/name"). `nested` maps a key to {stack, resources} (resources
   * null while loading). Edges: each dependency, and from an expanded
   * resource to the first resources of its nested stack ("contains").
   */
  function flatten(resources, nested) {
    const items = [];
    const clusters = [];
    const edges = [];
    function walk(list, prefix, cluster, depth) {
      const names = new Set(list.map((r) => r.resource_name));
      const keyOf = (name) => (prefix ? `${prefix}/${name}` : name);
      for (const r of list) {
        const key = keyOf(r.resource_name);
        const entry = nested && nested.get(key);
        const expandable = Boolean(nestedRef(r));
        const open = Boolean(expandable && entry && entry.resources);
        items.push({ key, resource: r, depth, cluster: open ? key : cluster, expanded: Boolean(expandable && entry),
          loading: Boolean(expandable && entry && !entry.resources) });
        for (const dependent of r.required_by || []) {
          if (names.has(dependent) && dependent !== r.resource_name) edges.push({ from: key, to: keyOf(dependent) });
        }
        if (open) {
          clusters.push({ key, stack: entry.stack, parent: cluster });
          const children = entry.resources;
          const childNames = new Set(children.map((c) => c.resource_name));
          const follows = new Set();
          for (const c of children) {
            for (const d of c.required_by || []) if (childNames.has(d) && d !== c.resource_name) follows.add(d);
          }
          for (const c of children) {
            if (!follows.has(c.resource_name)) edges.push({ from: key, to: `${key}/${c.resource_name}`, contains: true });
          }
          walk(children, key, key, depth + 1);
        }
      }
    }
    walk(resources, "", null, 0);
    return { items, clusters, edges };
  }

  const CLUSTER = "\u0001cluster:";

  function relayout({ items, clusters, edges }) {
    // Keyboard focus survives the redraw (an expand pressed with Enter).
    const active = document.activeElement;
    const refocus = active && svg.contains(active) && active.getAttribute
      ? { key: active.getAttribute("data-resource"), marker: active.classList.contains("expand-nested") } : null;
    clear(clusterLayer);
    clear(edgeLayer);
    clear(nodeLayer);
    nodes.clear();
    clusterEls.clear();
    const linked = new Set(edges.flatMap((e) => [e.from, e.to]));
    const connected = items.filter((i) => linked.has(i.key) || i.cluster);
    const isolated = items.filter((i) => !linked.has(i.key) && !i.cluster);
    const positions = new Map();
    const edgePoints = [];
    const boxes = [];
    let width = 0;
    let height = 0;

    if (connected.length) {
      const graph = new graphlib.Graph({ multigraph: false, compound: clusters.length > 0 });
      graph.setGraph({ rankdir: direction || "LR", nodesep: clusters.length ? GAP_Y + 8 : GAP_Y, ranksep: 56,
        edgesep: 12, marginx: PAD, marginy: PAD });
      graph.setDefaultEdgeLabel(() => ({}));
      for (const i of connected) graph.setNode(i.key, { width: NODE_W, height: NODE_H });
      for (const c of clusters) {
        graph.setNode(CLUSTER + c.key, {});
        if (c.parent) graph.setParent(CLUSTER + c.key, CLUSTER + c.parent);
      }
      for (const i of connected) if (i.cluster) graph.setParent(i.key, CLUSTER + i.cluster);
      for (const e of edges) graph.setEdge(e.from, e.to, { contains: Boolean(e.contains) });
      layout(graph);
      for (const i of connected) {
        const n = graph.node(i.key);
        positions.set(i.key, { x: n.x - NODE_W / 2, y: n.y - NODE_H / 2 });
      }
      for (const c of clusters) {
        const n = graph.node(CLUSTER + c.key);
        if (n && Number.isFinite(n.x)) boxes.push({ cluster: c, x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height });
      }
      for (const e of graph.edges()) {
        const label = graph.edge(e);
        edgePoints.push({ from: e.v, to: e.w, points: label.points || [], contains: label.contains });
      }
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
      isolated.forEach((i, index) => {
        const col = index % perRow;
        const row = Math.floor(index / perRow);
        positions.set(i.key, { x: PAD + col * (NODE_W + GAP_X), y: top + row * (NODE_H + GAP_Y) });
      });
      const rows = Math.ceil(isolated.length / perRow);
      width = Math.max(width, PAD * 2 + Math.min(perRow, isolated.length) * (NODE_W + GAP_X) - GAP_X);
      height = top + rows * (NODE_H + GAP_Y) - GAP_Y + PAD;
    }

    const clusterFragment = document.createDocumentFragment();
    for (const box of boxes) {
      const text = s("text", { x: "8", y: "13", class: "cluster-legend" }, "");
      const bg = s("rect", { class: "cluster-legend-bg", x: "0", y: "0", height: "18", width: "60", rx: "9" });
      const title = s("title", {}, "");
      const g = s("g", { class: "nested-cluster status-muted", "data-cluster": box.cluster.key }, title,
        s("rect", { class: "cluster-box", x: box.x.toFixed(1), y: box.y.toFixed(1), width: box.width.toFixed(1),
          height: box.height.toFixed(1), rx: "12" }),
        s("g", { class: "cluster-label", transform: `translate(${(box.x + 12).toFixed(1)},${(box.y - 9).toFixed(1)})` },
          bg, text));
      const el = { g, text, bg, title, kind: "muted", sig: "", width: box.width };
      clusterEls.set(box.cluster.key, el);
      colourCluster(el, box.cluster.stack);
      clusterFragment.appendChild(g);
    }
    clusterLayer.appendChild(clusterFragment);
    const edgeFragment = document.createDocumentFragment();
    for (const { from, to, points, contains } of edgePoints) {
      edgeFragment.appendChild(contains
        ? s("path", { class: "contains-edge", d: edgePath(points), "data-from": from, "data-to": to })
        : s("path", { class: "edge", d: edgePath(points), "data-from": from, "data-to": to,
          "marker-end": "url(#topology-arrow)" }));
    }
    edgeLayer.appendChild(edgeFragment);
    const nodeFragment = document.createDocumentFragment();
    for (const item of items) {
      const at = positions.get(item.key);
      const node = makeNode(item, at.x, at.y);
      nodes.set(item.key, node);
      nodeFragment.appendChild(node.g);
    }
    nodeLayer.appendChild(nodeFragment);
    for (const el of clusterEls.values()) fitLegend(el);
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
    if (refocus && refocus.key && nodes.has(refocus.key)) {
      const node = nodes.get(refocus.key);
      const target = refocus.marker && node.marker ? node.marker : node.g;
      try { target.focus({ preventScroll: true }); } catch { /* not focusable: fine */ }
    }
  }

  /** Lays out again when the resources, their dependencies or what is
   *  expanded changed; otherwise only recolours what changed.
   *  `nested`: key → {stack, resources} of the expanded nested stacks. */
  function update(resources, nested) {
    const flat = flatten(resources, nested);
    const next = [
      flat.items.map((i) => `${i.key}${nestedRef(i.resource) ? "+n" : ""}${i.expanded ? "+e" : ""}${i.loading ? "+l" : ""}`).sort().join("|"),
      flat.edges.map((e) => `${e.from}>${e.to}${e.contains ? "+c" : ""}`).sort().join("|"),
    ].join("#");
    if (next !== signature) {
      signature = next;
      relayout(flat);
    } else {
      for (const item of flat.items) {
        const node = nodes.get(item.key);
        if (node) colour(node, item);
      }
      for (const c of flat.clusters) {
        const el = clusterEls.get(c.key);
        if (el) colourCluster(el, c.stack);
      }
    }
    el.classList.toggle("is-empty", resources.length === 0);
  }

  return { el, controls, update, select, get selected() { return selected; } };
}
