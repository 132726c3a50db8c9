// #/stacks: the project's stacks, searchable and filterable, with a form
// to create one from a template file.

import {
  h, icon, badge, timeEl, keyedTable, field, errorBox, showError, busy, parseKeyValues,
  readFileText, statusKind, isInProgress, poll,
} from "../ui.js";
import { api, heat, withQuery, stackRoute, session } from "../api.js";

const PAGE = 1000;

/** Status filter choices: value → predicate over a stack. */
const FILTERS = [
  { value: "", label: "All statuses", test: () => true },
  { value: "progress", label: "In progress", test: (s) => isInProgress(s.stack_status) },
  { value: "ok", label: "Complete", test: (s) => statusKind(s.stack_status) === "ok" },
  { value: "failed", label: "Failed", test: (s) => statusKind(s.stack_status) === "failed" },
  { value: "locked", label: "Locked", test: (s) => Boolean(s.stack_lock) },
  { value: "muted", label: "Suspended / other", test: (s) => statusKind(s.stack_status) === "muted" },
];

/** The list's columns. A new field is one entry here. */
const COLUMNS = [
  {
    label: "Name",
    key: (s) => `${s.stack_name}/${s.id}`,
    cell: (s) => h("a", { href: stackRoute(s.stack_name, s.id), class: "strong-link" }, s.stack_name),
  },
  {
    label: "Status",
    key: (s) => `${s.stack_status}|${s.stack_status_reason}`,
    cell: (s) => badge(s.stack_status, { title: s.stack_status_reason || undefined }),
  },
  { label: "Created", key: (s) => s.creation_time || "", cell: (s) => timeEl(s.creation_time) },
  { label: "Updated", key: (s) => s.updated_time || "", cell: (s) => timeEl(s.updated_time) },
  {
    label: "Lock",
    className: "col-lock",
    key: (s) => (s.stack_lock ? `${s.stack_lock.level}|${s.stack_lock.locked_by_user}|${s.stack_lock.reason}` : ""),
    cell: (s) => (s.stack_lock
      ? h("span", { class: "lock-flag", title: lockTitle(s.stack_lock) },
        icon("lock", "locked"), ` ${s.stack_lock.level || "locked"}`)
      : h("span", { class: "muted", "aria-label": "not locked" }, "—")),
  },
  { label: "Description", className: "col-wide muted", key: (s) => s.description || "", cell: (s) => s.description || "" },
];

function lockTitle(lock) {
  return `Locked (level ${lock.level}) by ${lock.locked_by_user}${lock.locked_by_role ? ` (${lock.locked_by_role})` : ""}` +
    `${lock.locked_at ? ` at ${lock.locked_at}` : ""}${lock.reason ? `: ${lock.reason}` : ""}` +
    `${lock.expires_at ? `; expires ${lock.expires_at}` : ""}`;
}

function nextMarker(body) {
  const link = (body.links || []).find((l) => l.rel === "next");
  if (!link) return null;
  try { return new URL(link.href, location.origin).searchParams.get("marker"); } catch { return null; }
}

export async function render(ctx) {
  const { root, signal } = ctx;
  let stacks = [];
  let marker = null;

  const search = h("input", { id: "stack-search", type: "search", placeholder: "Filter by name",
    autocomplete: "off", spellcheck: "false" });
  const statusFilter = h("select", { id: "stack-status-filter" },
    FILTERS.map((f) => h("option", { value: f.value }, f.label)));
  const count = h("span", { class: "count muted", "aria-live": "polite" });
  const createButton = h("button", { type: "button", id: "create-stack", class: "btn btn-primary",
    "aria-expanded": "false", "aria-controls": "create-stack-form" }, "Create stack");
  const listError = errorBox("", { id: "stacks-error" });
  const more = h("button", { type: "button", id: "stacks-more", class: "btn", hidden: true }, "Load more");
  const table = keyedTable({
    id: "stacks", columns: COLUMNS, rowKey: (s) => s.stack_name, rowAttr: "stack",
    empty: "Loading stacks…", caption: "Stacks",
  });

  const form = createForm(ctx, () => toggleForm(false));
  form.hidden = true;
  function toggleForm(open) {
    form.hidden = !open;
    createButton.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) form.querySelector("#new-stack-name").focus();
  }
  createButton.addEventListener("click", () => toggleForm(form.hidden));

  root.append(
    h("div", { class: "page-header" },
      h("div", {}, h("h1", {}, "Stacks"),
        h("p", { class: "muted" }, "Heat stacks of project ", h("strong", {}, session().project || session().projectId), ".")),
      createButton),
    form,
    h("div", { class: "toolbar" },
      field("Search", search),
      field("Status", statusFilter),
      h("div", { class: "toolbar-spacer" }),
      count),
    listError,
    h("div", { class: "card card-flush" }, table.el),
    h("div", { class: "more" }, more));

  function applyFilter() {
    const text = search.value.trim().toLowerCase();
    const filter = FILTERS.find((f) => f.value === statusFilter.value) || FILTERS[0];
    let shown = 0;
    for (const stack of stacks) {
      const entry = table.rows.get(stack.stack_name);
      if (!entry) continue;
      const visible = (!text || stack.stack_name.toLowerCase().includes(text)) && filter.test(stack);
      if (entry.tr.hidden === visible) entry.tr.hidden = !visible;
      if (visible) shown += 1;
    }
    const total = stacks.length;
    count.textContent = shown === total
      ? `${total} stack${total === 1 ? "" : "s"}${marker ? " loaded" : ""}`
      : `${shown} of ${total} stack${total === 1 ? "" : "s"}`;
    table.setEmpty(total ? "" : "No stacks yet. Create one from a template.");
    noMatch.hidden = !(total && !shown);
    partial.hidden = !(marker && (text || filter.value));
  }
  const noMatch = h("p", { class: "muted no-match", hidden: true }, "No stack matches the filter.");
  const partial = h("p", { class: "muted partial-hint", hidden: true, role: "status" },
    "The filter looks at the stacks loaded so far; “Load more” below brings older ones.");
  table.el.after(noMatch);
  count.after(partial);

  search.addEventListener("input", applyFilter);
  statusFilter.addEventListener("change", applyFilter);

  async function loadPage(from) {
    const body = await api(withQuery(`${heat()}/stacks`, { limit: PAGE, marker: from }), { signal });
    return { list: body.stacks || [], next: nextMarker(body) };
  }

  function show() {
    table.update(stacks);
    more.hidden = !marker;
    applyFilter();
  }

  try {
    const first = await loadPage(null);
    stacks = first.list;
    marker = first.next;
    show();
  } catch (error) {
    if (error.name === "AbortError") return;
    table.setEmpty("Stacks could not be listed.");
    showError(listError, error);
  }

  more.addEventListener("click", () => busy(more, async () => {
    try {
      const page = await loadPage(marker);
      const known = new Set(stacks.map((s) => s.stack_name));
      stacks = stacks.concat(page.list.filter((s) => !known.has(s.stack_name)));
      marker = page.next;
      showError(listError, "");
      show();
    } catch (error) {
      if (error.name !== "AbortError") showError(listError, error);
    }
  }));

  // Keep statuses fresh: quickly while something is in progress, slowly
  // otherwise; only the rows that changed are touched.
  poll(async () => {
    const limit = Math.min(Math.max(stacks.length, PAGE), 1000);
    try {
      const body = await api(withQuery(`${heat()}/stacks`, { limit }), { signal });
      const fresh = body.stacks || [];
      const beyond = stacks.length > limit ? stacks.slice(limit) : [];
      const freshNames = new Set(fresh.map((s) => s.stack_name));
      stacks = fresh.concat(beyond.filter((s) => !freshNames.has(s.stack_name)));
      if (stacks.length <= limit) marker = nextMarker(body);
      showError(listError, "");
      show();
    } catch (error) {
      if (error.name !== "AbortError") showError(listError, error);
    }
  }, () => (stacks.some((s) => isInProgress(s.stack_status)) ? 2000 : 15000), signal);
}

/** The create form: name, template file (sent as its text), optional
 *  environment and other files, parameters as key=value lines. */
function createForm(ctx, close) {
  const name = h("input", { id: "new-stack-name", required: true, autocomplete: "off", spellcheck: "false",
    pattern: "[A-Za-z][A-Za-z0-9_.\\-]*", placeholder: "web" });
  const file = h("input", { id: "new-stack-file", type: "file", accept: ".yaml,.yml,.json,.template,text/*" });
  const env = h("input", { id: "new-stack-env", type: "file", accept: ".yaml,.yml,.json,text/*" });
  const files = h("input", { id: "new-stack-files", type: "file", multiple: true });
  const params = h("textarea", { id: "new-stack-params", rows: "4", spellcheck: "false",
    placeholder: "length=12\nflavor=m1.small" });
  const rollback = h("input", { id: "new-stack-rollback", type: "checkbox" });
  const timeout = h("input", { id: "new-stack-timeout", type: "number", min: "1", inputmode: "numeric",
    placeholder: "engine default" });
  const submit = h("button", { type: "submit", id: "new-stack-submit", class: "btn btn-primary" }, "Create");
  const error = errorBox("", { id: "new-stack-error" });

  const form = h("form", { id: "create-stack-form", class: "card form-card", novalidate: true,
    "aria-label": "Create stack", onsubmit: (event) => {
      event.preventDefault();
      showError(error, "");
      busy(submit, async () => {
        try {
          const stackName = name.value.trim();
          if (!stackName) throw new Error("Give the stack a name.");
          if (!file.files.length) throw new Error("Choose a template file.");
          const body = {
            stack_name: stackName,
            template: await readFileText(file.files[0]),
            parameters: parseKeyValues(params.value),
            disable_rollback: !rollback.checked,
          };
          if (env.files.length) body.environment = await readFileText(env.files[0]);
          if (files.files.length) {
            body.files = {};
            for (const extra of files.files) body.files[extra.name] = await readFileText(extra);
          }
          if (timeout.value) body.timeout_mins = Number(timeout.value);
          const created = await api(`${heat()}/stacks`, { method: "POST", body, signal: ctx.signal });
          const id = created && created.stack && created.stack.id;
          ctx.navigate(stackRoute(stackName, id));
        } catch (failure) {
          if (failure.name !== "AbortError") showError(error, failure);
        }
      });
    } },
  h("h2", {}, "Create a stack"),
  h("div", { class: "form-grid" },
    field("Stack name", name),
    field("Template file", file, "HOT (YAML or JSON); sent as its text."),
    field("Environment file (optional)", env),
    field("Other files (optional)", files, "Nested templates and get_file targets, by file name."),
    field("Parameters", params, "One key=value per line."),
    field("Timeout (minutes)", timeout),
    h("div", { class: "field field-check" }, rollback,
      h("label", { for: "new-stack-rollback" }, "Roll back if the create fails"))),
  error,
  h("div", { class: "form-actions" }, submit,
    h("button", { type: "button", class: "btn btn-quiet", onclick: close }, "Cancel")));
  return form;
}
