import { api, post } from "../api";
import { clear, h } from "../dom";
import type { Session } from "../main";
import { bytes, confirmAction, duration, ErrorSlot, mib, Scope, since, status } from "../ui";
import type { Image } from "./images";

interface Snapshot {
  id: string; name: string | null; mode: string; state: string; sourceSandboxId: string | null;
  shape: { vcpu: number; memoryMiB: number; diskMiB: number }; sizeBytes: number; createdAt: string; expiresAt: string;
  pool?: { size: number; ready: number; memoryBytes: number } | null;
}

export function snapshotsView(main: HTMLElement, scope: Scope, _s: Session): void {
  const errors = new ErrorSlot();
  const note = status();
  const tbody = h("tbody");
  const pools = h("tbody");
  main.append(h("h1", { tabindex: "-1" }, "Snapshots and pools"), errors.el, note,
    h("section", { "aria-labelledby": "snaps-title" }, h("h2", { id: "snaps-title" }, "Snapshots"),
      h("div", { class: "table-wrap", role: "region", "aria-label": "Snapshots table", tabindex: "0" },
        h("table", { class: "grid snapshots" },
          h("thead", null, h("tr", null, ["Snapshot", "Mode", "From sandbox", "Shape", "Size", "Age", "Expires in", "Pool", "Actions"]
            .map((c) => h("th", { scope: "col" }, c)))), tbody))),
    h("section", { "aria-labelledby": "pools-title" }, h("h2", { id: "pools-title" }, "Image pools"),
      h("div", { class: "table-wrap", role: "region", "aria-label": "Image pools table", tabindex: "0" },
        h("table", { class: "grid" }, h("thead", null, h("tr", null, ["Image", "Pool size", "Ready"].map((c) => h("th", { scope: "col" }, c)))), pools))));

  const poolEdits = new Map<string, string>(); // a size being typed survives polls
  const p = scope.poll(5000, async () => {
    try {
      const [snaps, images] = await Promise.all([
        api<{ data: Snapshot[] }>("/v1/snapshots", { signal: scope.signal }),
        api<{ data: Image[] }>("/v1/images", { query: { limit: 100 }, signal: scope.signal }),
      ]);
      errors.clear();
      const focusedId = (document.activeElement as HTMLElement | null)?.id;
      clear(tbody);
      for (const s of snaps.data) {
        const inputId = `pool-${s.id}`;
        const size = h("input", { type: "number", min: 0, max: 64, id: inputId, class: "narrow", value: poolEdits.get(s.id) ?? String(s.pool?.size ?? 0),
          "aria-label": `Pool size for snapshot ${s.name || s.id}` });
        size.addEventListener("input", () => poolEdits.set(s.id, size.value));
        const set = h("button", { type: "button", "aria-label": `Set pool size of snapshot ${s.name || s.id}`, onclick: async () => {
          try {
            await post(`/v1/snapshots/${encodeURIComponent(s.id)}:pool`, { size: Number(size.value || 0) });
            poolEdits.delete(s.id);
            note.textContent = `Pool of ${s.name || s.id} set to ${size.value || 0}.`;
            p.now();
          } catch (e) { errors.show(e); }
        } }, "Set");
        const copy = h("button", { type: "button", "aria-label": `Start a copy of snapshot ${s.name || s.id}`, onclick: async () => {
          try {
            const r = await post<{ id: string }>("/v1/sandboxes", { snapshot: s.id });
            note.textContent = `Started sandbox ${r.id} from ${s.name || s.id}.`;
          } catch (e) { errors.show(e); }
        } }, "Start a copy");
        const del = h("button", { type: "button", class: "danger", "aria-label": `Delete snapshot ${s.name || s.id}`, onclick: async () => {
          if (!(await confirmAction(`Delete snapshot ${s.name || s.id}?`, "Its files and memory image are removed, and its pool with them; running copies keep running.", "Delete snapshot"))) return;
          try { await post(`/v1/snapshots/${encodeURIComponent(s.id)}:delete`, {}); note.textContent = "Deleted."; p.now(); } catch (e) { errors.show(e); }
        } }, "Delete");
        tbody.append(h("tr", { "data-id": s.id },
          h("th", { scope: "row" }, h("span", { class: "mono" }, s.id), s.name ? h("div", { class: "sub" }, s.name) : null),
          h("td", null, s.mode || "memory"),
          h("td", null, s.sourceSandboxId ? h("a", { href: `#/sandboxes/${encodeURIComponent(s.sourceSandboxId)}`, class: "mono" }, s.sourceSandboxId) : "—"),
          h("td", null, s.shape ? `${s.shape.vcpu} vCPU · ${mib(s.shape.memoryMiB)}` : "—"), h("td", null, bytes(s.sizeBytes)),
          h("td", null, since(s.createdAt)), h("td", null, s.expiresAt ? duration((Date.parse(s.expiresAt) - Date.now()) / 1000) : "—"),
          h("td", null, s.pool ? `${s.pool.ready}/${s.pool.size} ready` : "none", h("div", { class: "row-actions" }, size, set)),
          h("td", null, h("div", { class: "row-actions" }, copy, del))));
        if (focusedId === inputId) size.focus();
      }
      if (!snaps.data.length) tbody.append(h("tr", null, h("td", { colspan: 9 }, "No snapshots.")));
      clear(pools);
      for (const i of images.data.filter((x) => x.pool && x.pool.size > 0)) {
        pools.append(h("tr", null, h("th", { scope: "row" }, h("a", { href: `#/images/${encodeURIComponent(i.id)}` }, `${i.name}@${i.version}`)),
          h("td", null, i.pool!.size), h("td", null, i.pool!.ready)));
      }
      if (!pools.firstChild) pools.append(h("tr", null, h("td", { colspan: 3 }, "No image has a pool (set one on the image's page).")));
    } catch (e) {
      if (!scope.dead) errors.show(e, () => p.now());
    }
  });
}
