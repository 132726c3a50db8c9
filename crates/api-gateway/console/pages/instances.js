// #/instances: the project's compute instances.

import { h, icon, badge, timeEl, keyedTable, field, errorBox, showError, poll, statusKind, busy } from "../ui.js";
import { api, COMPUTE, withQuery, seg } from "../api.js";

const PAGE = 500;

/** How an instance's lock reads: who holds it, since when, why. */
export function lockText(i) {
  if (!i.locked) return "";
  return `Locked by ${i.locked_by_user || "?"} (${i.locked_by || "owner"})` +
    `${i.locked_at ? ` at ${i.locked_at}` : ""}${i.locked_reason ? `: ${i.locked_reason}` : ""}` +
    `${i.lock_expires_at ? `; expires ${i.lock_expires_at}` : ""}`;
}

/** The list's columns. A new field is one entry here. */
const COLUMNS = [
  {
    label: "Name", key: (i) => `${i.name}|${i.uuid}`,
    cell: (i) => h("a", { href: `#/instances/${seg(i.uuid)}`, class: "strong-link" }, i.name),
  },
  { label: "Status", key: (i) => `${i.status}|${i.status_reason}`, cell: (i) => badge(i.status, { title: i.status_reason || undefined }) },
  {
    label: "Power", key: (i) => i.power_state || "",
    cell: (i) => h("span", { class: `power power-${statusKind(String(i.power_state).toUpperCase())}` },
      h("span", { class: "dot", "aria-hidden": "true" }), i.power_state || "—"),
  },
  {
    label: "Lock", className: "col-lock", key: (i) => lockText(i),
    cell: (i) => (i.locked
      ? h("span", { class: `lock-flag lock-${i.locked_by || "owner"}`, title: lockText(i) }, icon("lock", "locked"),
        ` ${i.locked_by || "locked"}`)
      : h("span", { class: "muted" }, "—")),
  },
  { label: "Flavor", cell: (i) => i.flavor || "" },
  { label: "Image", cell: (i) => i.image || "" },
  { label: "Created", key: (i) => i.created_at || "", cell: (i) => timeEl(i.created_at) },
];

export async function render(ctx) {
  const { root, signal } = ctx;
  let instances = [];
  let nextMarker = null;
  const search = h("input", { id: "instance-search", type: "search", placeholder: "Filter by name", autocomplete: "off" });
  const count = h("span", { class: "count muted", "aria-live": "polite" });
  const error = errorBox("", { id: "instances-error" });
  const more = h("button", { type: "button", id: "instances-more", class: "btn", hidden: true }, "Load more");
  const table = keyedTable({ id: "instances", columns: COLUMNS, rowKey: (i) => i.uuid, rowAttr: "instance",
    rowAttrValue: (i) => i.name, empty: "Loading instances…", caption: "Instances" });
  root.append(
    h("div", { class: "page-header" }, h("div", {}, h("h1", {}, "Instances"),
      h("p", { class: "muted" }, "Compute instances of this project."))),
    h("div", { class: "toolbar" }, field("Search", search), h("div", { class: "toolbar-spacer" }), count),
    error,
    h("div", { class: "card card-flush" }, table.el),
    h("div", { class: "more" }, more));

  function applyFilter() {
    const text = search.value.trim().toLowerCase();
    let shown = 0;
    for (const i of instances) {
      const entry = table.rows.get(i.uuid);
      if (!entry) continue;
      const visible = !text || String(i.name).toLowerCase().includes(text);
      entry.tr.hidden = !visible;
      if (visible) shown += 1;
    }
    count.textContent = shown === instances.length
      ? `${instances.length} instance${instances.length === 1 ? "" : "s"}${nextMarker ? " loaded" : ""}`
      : `${shown} of ${instances.length} instances`;
  }
  search.addEventListener("input", applyFilter);

  function markerOf(body) {
    const link = (body.instances_links || []).find((l) => l.rel === "next");
    if (!link) return null;
    try { return new URL(link.href, location.origin).searchParams.get("marker"); } catch { return null; }
  }

  /** Refreshes what is loaded (up to 1000 in one call); pages beyond stay. */
  async function load() {
    try {
      const limit = Math.min(Math.max(PAGE, instances.length), 1000);
      const body = await api(withQuery(`${COMPUTE}/instances`, { limit }), { signal });
      const fresh = body.instances || [];
      const known = new Set(fresh.map((i) => i.uuid));
      const beyond = instances.length > limit ? instances.slice(limit).filter((i) => !known.has(i.uuid)) : [];
      instances = fresh.concat(beyond);
      if (!beyond.length) nextMarker = markerOf(body);
      table.update(instances);
      table.setEmpty("No instances.");
      more.hidden = !nextMarker;
      applyFilter();
      showError(error, "");
    } catch (failure) {
      if (failure.name === "AbortError") throw failure;
      table.setEmpty("Instances could not be listed.");
      showError(error, failure);
    }
  }
  more.addEventListener("click", () => busy(more, async () => {
    try {
      const body = await api(withQuery(`${COMPUTE}/instances`, { limit: PAGE, marker: nextMarker }), { signal });
      const known = new Set(instances.map((i) => i.uuid));
      instances = instances.concat((body.instances || []).filter((i) => !known.has(i.uuid)));
      nextMarker = markerOf(body);
      table.update(instances);
      more.hidden = !nextMarker;
      applyFilter();
    } catch (failure) {
      if (failure.name !== "AbortError") showError(error, failure);
    }
  }));
  await load();
  poll(load, () => (instances.some((i) => statusKind(i.status) === "progress") ? 2000 : 10000), signal);
}
