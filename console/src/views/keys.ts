import { api, post } from "../api";
import { clear, h } from "../dom";
import type { Session } from "../main";
import { confirmAction, ErrorSlot, field, money, Scope, since, status } from "../ui";

interface Key { id: string; name: string | null; admin: boolean; dailyLimitMicros: number | null; createdAt: string; revokedAt: string | null; secret?: string }

export function keysView(main: HTMLElement, scope: Scope, _s: Session): void {
  const errors = new ErrorSlot();
  const note = status();
  const secret = h("div");
  const name = h("input", { type: "text", autocomplete: "off" });
  const limit = h("input", { type: "number", min: 0, step: "0.01", placeholder: "none" });
  const admin = h("input", { type: "checkbox", id: "key-admin" });
  const form = h("form", { class: "inline-form", "aria-label": "Create a key" },
    field("Key name", name), field("Daily limit (USD)", limit, "empty: no limit"),
    h("div", { class: "field check" }, admin, h("label", { for: "key-admin" }, "Admin key")),
    h("button", { type: "submit" }, "Create key"));
  const tbody = h("tbody");
  main.append(h("h1", { tabindex: "-1" }, "Keys"), form, secret, note, errors.el,
    h("div", { class: "table-wrap", role: "region", "aria-label": "Keys table", tabindex: "0" },
      h("table", { class: "grid keys" }, h("thead", null, h("tr", null, ["Key", "Name", "Admin", "Daily limit", "Created", "Revoked", "Actions"]
        .map((c) => h("th", { scope: "col" }, c)))), tbody)));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const body: Record<string, unknown> = { admin: admin.checked };
      if (name.value.trim()) body.name = name.value.trim();
      if (limit.value) body.dailyLimitMicros = Math.round(Number(limit.value) * 1e6);
      const k = await post<Key>("/v1/keys", body);
      clear(secret);
      const out = h("output", { class: "secret mono", "aria-label": "New key's secret" }, k.secret || "");
      secret.append(h("div", { class: "secret-box", role: "status" },
        h("p", null, `Key ${k.id} created. Copy its secret now: it is shown only once.`), out,
        h("button", { type: "button", onclick: () => void navigator.clipboard?.writeText(k.secret || "") }, "Copy secret"),
        h("button", { type: "button", onclick: () => clear(secret) }, "I have kept it: hide the secret")));
      name.value = ""; limit.value = ""; admin.checked = false;
      p.now();
    } catch (e) { errors.show(e); }
  });
  const p = scope.poll(10000, async () => {
    try {
      const r = await api<{ data: Key[] }>("/v1/keys", { signal: scope.signal });
      errors.clear();
      clear(tbody);
      for (const k of r.data) {
        const revoke = k.revokedAt ? "" : h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${k.name || k.id}`, onclick: async () => {
          if (!(await confirmAction(`Revoke key ${k.name || k.id}?`, "Every call with it is refused from now on; this cannot be undone.", "Revoke key"))) return;
          try { await post(`/v1/keys/${encodeURIComponent(k.id)}:revoke`, {}); note.textContent = `Revoked ${k.id}.`; p.now(); } catch (e) { errors.show(e); }
        } }, "Revoke");
        tbody.append(h("tr", { "data-id": k.id }, h("th", { scope: "row", class: "mono" }, k.id), h("td", null, k.name || "—"),
          h("td", null, k.admin ? "yes" : "no"), h("td", null, k.dailyLimitMicros === null ? "none" : money(k.dailyLimitMicros)),
          h("td", null, since(k.createdAt)), h("td", null, k.revokedAt ? `${since(k.revokedAt)} ago` : "—"), h("td", null, revoke)));
      }
    } catch (e) {
      if (!scope.dead) errors.show(e, () => p.now());
    }
  });
}
