// #/clusters: the project's clusters (Senlin).

import { h, icon, badge, timeEl, keyedTable, field, errorBox, showError, poll, statusKind } from "../ui.js";
import { api, SENLIN, withQuery, seg } from "../api.js";

const BUSY = new Set(["INIT", "CREATING", "DELETING", "UPDATING", "RESIZING", "RECOVERING", "CHECKING", "OPERATING"]);

/** The list's columns. A new field is one entry here. */
const COLUMNS = [
  {
    label: "Name", key: (c) => `${c.name}|${c.id}`,
    cell: (c) => h("a", { href: `#/clusters/${seg(c.id)}`, class: "strong-link" }, c.name),
  },
  {
    label: "Status", key: (c) => `${c.status}|${c.status_reason}`,
    cell: (c) => badge(c.status, { title: c.status_reason || undefined }),
  },
  {
    label: "Nodes", className: "num", key: (c) => `${(c.nodes || []).length}`,
    cell: (c) => String((c.nodes || []).length),
  },
  {
    label: "Desired / min / max", className: "num",
    key: (c) => `${c.desired_capacity}/${c.min_size}/${c.max_size}`,
    cell: (c) => h("span", { class: "sizes" }, h("strong", {}, String(c.desired_capacity)),
      ` / ${c.min_size} / ${c.max_size === -1 ? "∞" : c.max_size}`),
  },
  { label: "Profile", key: (c) => c.profile_name || c.profile_id, cell: (c) => c.profile_name || c.profile_id },
  {
    label: "Lock", className: "col-lock",
    key: (c) => JSON.stringify(c.maintenance_lock || null),
    cell: (c) => (c.maintenance_lock
      ? h("span", { class: "lock-flag", title: `${c.maintenance_lock.locked_by_user}: ${c.maintenance_lock.reason || ""}` },
        icon("lock", "locked"), ` ${c.maintenance_lock.level}`)
      : h("span", { class: "muted" }, "—")),
  },
  { label: "Created", key: (c) => c.created_at || "", cell: (c) => timeEl(c.created_at) },
];

export async function render(ctx) {
  const { root, signal } = ctx;
  let clusters = [];
  const search = h("input", { id: "cluster-search", type: "search", placeholder: "Filter by name", autocomplete: "off" });
  const count = h("span", { class: "count muted", "aria-live": "polite" });
  const error = errorBox("", { id: "clusters-error" });
  const table = keyedTable({ id: "clusters", columns: COLUMNS, rowKey: (c) => c.id, rowAttr: "cluster", rowAttrValue: (c) => c.name,
    empty: "Loading clusters…", caption: "Clusters" });
  root.append(
    h("div", { class: "page-header" }, h("div", {}, h("h1", {}, "Clusters"),
      h("p", { class: "muted" }, "Senlin clusters: groups of nodes kept at a size."))),
    h("div", { class: "toolbar" }, field("Search", search), h("div", { class: "toolbar-spacer" }), count),
    error,
    h("div", { class: "card card-flush" }, table.el));

  function applyFilter() {
    const text = search.value.trim().toLowerCase();
    let shown = 0;
    for (const c of clusters) {
      const entry = table.rows.get(c.id);
      if (!entry) continue;
      const visible = !text || c.name.toLowerCase().includes(text);
      entry.tr.hidden = !visible;
      if (visible) shown += 1;
    }
    count.textContent = shown === clusters.length ? `${clusters.length} cluster${clusters.length === 1 ? "" : "s"}`
      : `${shown} of ${clusters.length} clusters`;
  }
  search.addEventListener("input", applyFilter);

  async function load() {
    try {
      const body = await api(withQuery(`${SENLIN}/clusters`, { sort: "name" }), { signal });
      clusters = body.clusters || [];
      table.update(clusters);
      table.setEmpty("No clusters yet. Create one with `ember cluster create`.");
      applyFilter();
      showError(error, "");
    } catch (failure) {
      if (failure.name === "AbortError") throw failure;
      table.setEmpty("Clusters could not be listed.");
      showError(error, failure);
    }
  }
  await load();
  poll(load, () => (clusters.some((c) => BUSY.has(c.status) || statusKind(c.status) === "progress") ? 2000 : 10000), signal);
}
