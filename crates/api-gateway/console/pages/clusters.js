// #/clusters: the project's clusters (Senlin), and a form to create one
// from a profile.

import { h, icon, badge, timeEl, keyedTable, field, errorBox, showError, poll, statusKind, busy } from "../ui.js";
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
  const createButton = h("button", { type: "button", id: "create-cluster", class: "btn btn-primary",
    "aria-expanded": "false", "aria-controls": "create-cluster-form" }, "Create cluster");
  const form = createForm(ctx, () => toggleForm(false));
  form.el.hidden = true;
  function toggleForm(open) {
    form.el.hidden = !open;
    createButton.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) { form.loadProfiles(); form.el.querySelector("#new-cluster-name").focus(); }
  }
  createButton.addEventListener("click", () => toggleForm(form.el.hidden));
  root.append(
    h("div", { class: "page-header" }, h("div", {}, h("h1", {}, "Clusters"),
      h("p", { class: "muted" }, "Senlin clusters: groups of nodes kept at a size.")), createButton),
    form.el,
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
      table.setEmpty("No clusters yet. Create one with the button above or `ember cluster create`.");
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

/** The create form: a name, a profile (the project's, from Senlin), and
 *  the sizes; Senlin answers 202 with the cluster, whose page follows. */
function createForm(ctx, close) {
  const { signal } = ctx;
  const name = h("input", { id: "new-cluster-name", required: true, autocomplete: "off", spellcheck: "false",
    placeholder: "web" });
  const profile = h("select", { id: "new-cluster-profile", required: true },
    h("option", { value: "" }, "Loading profiles…"));
  const number = (id, value, placeholder) => h("input", { id, type: "number", min: id === "new-cluster-max" ? "-1" : "0",
    step: "1", inputmode: "numeric", value, placeholder });
  const desired = number("new-cluster-desired", "1");
  const min = number("new-cluster-min", "0");
  const max = number("new-cluster-max", "", "no limit");
  const submit = h("button", { type: "submit", id: "new-cluster-submit", class: "btn btn-primary" }, "Create");
  const error = errorBox("", { id: "new-cluster-error" });
  const profileHint = h("span", {}, "The project's cluster profiles.");
  let profilesLoaded = false;

  async function loadProfiles() {
    if (profilesLoaded) return;
    try {
      const body = await api(withQuery(`${SENLIN}/profiles`, { sort: "name" }), { signal });
      const profiles = body.profiles || [];
      profilesLoaded = true;
      const chosen = profile.value;
      profile.replaceChildren(...(profiles.length
        ? [h("option", { value: "" }, "Choose a profile"),
          ...profiles.map((p) => h("option", { value: p.id, selected: p.id === chosen }, `${p.name} (${p.type})`))]
        : [h("option", { value: "" }, "No profiles")]));
      if (profiles.length === 1) profile.value = profiles[0].id;
      profileHint.textContent = profiles.length ? "The project's cluster profiles."
        : "This project has no profile yet: create one with `ember cluster profile-create`.";
    } catch (failure) {
      if (failure.name === "AbortError") return;
      profile.replaceChildren(h("option", { value: "" }, "Profiles could not be listed"));
      showError(error, failure);
    }
  }

  /** A whole number from an input, or undefined when it is empty. */
  function whole(input, label) {
    const text = input.value.trim();
    if (!text) return undefined;
    const value = Number(text);
    if (!Number.isInteger(value)) throw new Error(`${label}: give a whole number.`);
    return value;
  }

  const el = h("form", { id: "create-cluster-form", class: "card form-card", novalidate: true,
    "aria-label": "Create cluster", onsubmit: (event) => {
      event.preventDefault();
      showError(error, "");
      busy(submit, async () => {
        try {
          const clusterName = name.value.trim();
          if (!clusterName) throw new Error("Give the cluster a name.");
          if (!profile.value) throw new Error("Choose a profile.");
          const cluster = { name: clusterName, profile_id: profile.value };
          const sizes = [["desired_capacity", desired, "Desired capacity"], ["min_size", min, "Minimum size"],
            ["max_size", max, "Maximum size"]];
          for (const [key, input, label] of sizes) {
            const value = whole(input, label);
            if (value !== undefined) cluster[key] = value;
          }
          const answer = await api(`${SENLIN}/clusters`, { method: "POST", body: { cluster }, signal });
          const id = answer && answer.cluster && answer.cluster.id;
          ctx.navigate(id ? `#/clusters/${seg(id)}` : "#/clusters");
        } catch (failure) {
          if (failure.name !== "AbortError") showError(error, failure);
        }
      });
    } },
  h("h2", {}, "Create a cluster"),
  h("div", { class: "form-grid" },
    field("Cluster name", name),
    field("Profile", profile, profileHint),
    field("Desired capacity", desired),
    field("Minimum size", min),
    field("Maximum size", max, "Empty or -1: no limit.")),
  error,
  h("div", { class: "form-actions" }, submit,
    h("button", { type: "button", class: "btn btn-quiet", onclick: close }, "Cancel")));
  return { el, loadProfiles };
}
