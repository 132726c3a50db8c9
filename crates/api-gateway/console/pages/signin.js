// Sign in: a password through the Keystone front door, or a pasted token.

import { h, field, errorBox, showError, busy, notice } from "../ui.js";
import { signInWithPassword, signInWithToken, setSession, session } from "../api.js";

// Only the project is remembered between sign-ins (a user name left in a
// shared browser tells too much).
const LAST_KEY = "ember.console.project";

function rememberedProject() {
  try { return localStorage.getItem(LAST_KEY) || ""; } catch { return ""; }
}

export async function render(ctx) {
  const { root, query, navigate } = ctx;
  const next = safeNext(query.get("next"));
  if (session()) { navigate(next, { replace: true }); return; }
  const message = ctx.takeMessage();

  const user = h("input", { id: "signin-user", name: "username", autocomplete: "username", required: true,
    spellcheck: "false", autocapitalize: "off" });
  const password = h("input", { id: "signin-password", name: "password", type: "password",
    autocomplete: "current-password", required: true });
  const project = h("input", { id: "signin-project", name: "project", autocomplete: "organization",
    value: rememberedProject(), spellcheck: "false", autocapitalize: "off",
    placeholder: "the user's default project" });
  const submit = h("button", { type: "submit", id: "signin-submit", class: "btn btn-primary btn-block" }, "Sign in");
  const error = errorBox("", { id: "signin-error" });

  const tokenInput = h("textarea", { id: "signin-token", rows: "3", spellcheck: "false",
    autocomplete: "off", placeholder: "gAAAA… or an ember token" });
  const tokenSubmit = h("button", { type: "submit", id: "signin-token-submit", class: "btn btn-block" },
    "Use this token");
  const tokenError = errorBox("", { id: "signin-token-error" });

  async function done(s) {
    setSession(s);
    navigate(next, { replace: true });
  }

  const form = h("form", { class: "signin-form", novalidate: true, onsubmit: (event) => {
    event.preventDefault();
    showError(error, "");
    if (!user.value.trim() || !password.value) {
      showError(error, "Enter a user name and a password.");
      (user.value.trim() ? password : user).focus();
      return;
    }
    busy(submit, async () => {
      try {
        const s = await signInWithPassword({ user: user.value.trim(), password: password.value,
          project: project.value.trim(), signal: ctx.signal });
        try {
          if (project.value.trim()) localStorage.setItem(LAST_KEY, project.value.trim());
        } catch { /* private mode: nothing to remember */ }
        await done(s);
      } catch (failure) {
        if (failure.name === "AbortError") return;
        showError(error, failure);
        password.select();
      }
    });
  } },
  field("User", user),
  field("Password", password),
  field("Project", project, "Leave empty for the user's default project."),
  error,
  submit);

  const tokenForm = h("form", { class: "signin-form", novalidate: true, onsubmit: (event) => {
    event.preventDefault();
    showError(tokenError, "");
    const token = tokenInput.value.trim();
    if (!token) { showError(tokenError, "Paste a token first."); tokenInput.focus(); return; }
    busy(tokenSubmit, async () => {
      try {
        await done(await signInWithToken(token, { signal: ctx.signal }));
      } catch (failure) {
        if (failure.name === "AbortError") return;
        showError(tokenError, failure);
      }
    });
  } }, field("Token", tokenInput, "From `ember token issue` or `openstack token issue`."), tokenError, tokenSubmit);

  root.classList.add("page-signin");
  root.append(h("div", { class: "signin-card card" },
    h("div", { class: "signin-brand" }, h("span", { class: "brand-mark brand-mark-lg", "aria-hidden": "true" }),
      h("div", {}, h("h1", {}, "Sign in to Ember"),
        h("p", { class: "muted" }, "Stacks, clusters and instances of your project."))),
    message ? notice(message, "warn") : null,
    form,
    h("details", { class: "signin-token" }, h("summary", {}, "Sign in with a token instead"), tokenForm)));
  user.focus();
}

/** Only a console route may follow sign-in (never another origin). */
function safeNext(next) {
  if (next && /^#\/[^\s]*$/.test(next) && !next.startsWith("#/signin")) return next;
  return "#/stacks";
}
