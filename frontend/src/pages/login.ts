// Sign-in: name and password (POST /api/login). A one-time sign-in link
// (GET /signin?token=, printed by `sluice --serve` on its first start or
// by `sluice user signin-link`) starts a session and lands on "/"; pasting
// such a link here follows it.

import * as api from "../api";
import { h } from "../dom";
import { notice, type Page } from "../ui";

export function loginPage(q: URLSearchParams, done: (me: api.Me, next: string) => void): Page {
  const next = q.get("next") ?? "/";
  const note = notice();
  const name = h("input", { id: "login-name", name: "username", autocomplete: "username", required: true });
  const pw = h("input", { id: "login-password", name: "password", type: "password", autocomplete: "current-password", required: true });
  const btn = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h(
    "form",
    {
      class: "card login",
      method: "post",
      "aria-labelledby": "login-title",
      onsubmit: async (e: Event) => {
        e.preventDefault();
        note.clear();
        btn.disabled = true;
        try {
          done(await api.login(name.value.trim(), pw.value), next);
        } catch (err) {
          note.error(err);
          pw.select();
        } finally {
          btn.disabled = false;
        }
      },
    },
    h("h1", { id: "login-title" }, "Sign in to Sluice"),
    h("label", { for: "login-name" }, "Name"),
    name,
    h("label", { for: "login-password" }, "Password"),
    pw,
    note.el,
    btn,
  );

  const linkInput = h("input", { id: "login-link", type: "url", placeholder: "http://…/signin?token=slc_…" });
  const linkNote = notice();
  const linkForm = h(
    "form",
    {
      class: "card login",
      "aria-labelledby": "link-title",
      onsubmit: (e: Event) => {
        e.preventDefault();
        const token = tokenOf(linkInput.value);
        if (!token) {
          linkNote.error("That is not a sign-in link: it should contain /signin?token=slc_…");
          return;
        }
        location.assign("/signin?token=" + encodeURIComponent(token));
      },
    },
    h("h2", { id: "link-title" }, "Have a sign-in link?"),
    h(
      "p",
      { class: "muted" },
      "On its first start, sluice --serve prints a one-time link that signs in the local admin (no password needed). Open it, or paste it here. ",
      "A new one: ",
      h("code", null, "sluice user signin-link"),
      ".",
    ),
    h("label", { for: "login-link" }, "Sign-in link"),
    linkInput,
    linkNote.el,
    h("button", { type: "submit" }, "Use the link"),
  );
  if (q.get("error")) note.error(q.get("error"));
  queueMicrotask(() => name.focus());
  return { title: "Sign in", el: h("section", { class: "page login-page" }, form, linkForm) };
}

// tokenOf finds the token in a pasted link (or a bare token).
export function tokenOf(s: string): string {
  s = s.trim();
  if (s.startsWith("slc_")) return s;
  try {
    return new URL(s, location.origin).searchParams.get("token") ?? "";
  } catch {
    return "";
  }
}
