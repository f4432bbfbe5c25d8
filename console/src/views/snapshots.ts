import { api, post } from "../api";
import { clear, h, setText } from "../dom";
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

  // Rows are kept per snapshot and updated in place (a poll rebuilding them would drop a click that
  // lands while it runs, the focus, and a pool size being typed).
  const rows = new Map<string, SnapRow>();
  const empty = h("tr", null, h("td", { colspan: 9 }, "No snapshots."));
  const p = scope.poll(5000, async () => {
    try {
      const [snaps, images] = await Promise.all([
        api<{ data: Snapshot[] }>("/v1/snapshots", { signal: scope.signal }),
        api<{ data: Image[] }>("/v1/images", { query: { limit: 100 }, signal: scope.signal }),
      ]);
      errors.clear();
      const seen = new Set<string>();
      let before: ChildNode | null = tbody.firstChild;
      for (const s of snaps.data) {
        seen.add(s.id);
        let row = rows.get(s.id);
        if (!row) {
          row = new SnapRow(s, (m) => { note.textContent = m; errors.clear(); p.now(); }, (e) => errors.show(e));
          rows.set(s.id, row);
        }
        row.update(s);
        if (row.tr !== before) tbody.insertBefore(row.tr, before);
        before = row.tr.nextSibling;
      }
      for (const [id, row] of rows) {
        if (!seen.has(id)) { row.tr.remove(); rows.delete(id); }
      }
      if (!snaps.data.length) tbody.append(empty);
      else empty.remove();
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

/** One snapshot's row: its cells are updated on each poll; its controls are made once. */
class SnapRow {
  readonly tr: HTMLTableRowElement;
  private age = h("td");
  private expires = h("td");
  private size = h("td");
  private pool = h("span");
  private input: HTMLInputElement;
  private typed = false; // a size being typed is not overwritten by a poll
  constructor(s: Snapshot, done: (m: string) => void, fail: (e: unknown) => void) {
    const who = s.name || s.id;
    const base = `/v1/snapshots/${encodeURIComponent(s.id)}`;
    this.input = h("input", { type: "number", min: 0, max: 64, id: `pool-${s.id}`, class: "narrow", value: String(s.pool?.size ?? 0),
      "aria-label": `Pool size for snapshot ${who}` });
    this.input.addEventListener("input", () => { this.typed = true; });
    const busy = (f: () => Promise<void>) => async (ev: Event) => {
      const b = ev.currentTarget as HTMLButtonElement;
      if (b.getAttribute("aria-disabled") === "true") return;
      b.setAttribute("aria-disabled", "true");
      try { await f(); } catch (e) { fail(e); } finally { b.removeAttribute("aria-disabled"); }
    };
    const set = h("button", { type: "button", "aria-label": `Set pool size of snapshot ${who}`, onclick: busy(async () => {
      const n = Number(this.input.value || 0);
      await post(`${base}:pool`, { size: n });
      this.typed = false;
      done(`Pool of ${who} set to ${n}.`);
    }) }, "Set");
    const copy = h("button", { type: "button", "aria-label": `Start a copy of snapshot ${who}`, onclick: busy(async () => {
      const r = await post<{ id: string }>("/v1/sandboxes", { snapshot: s.id });
      done(`Started sandbox ${r.id} from ${who}.`);
    }) }, "Start a copy");
    const del = h("button", { type: "button", class: "danger", "aria-label": `Delete snapshot ${who}`, onclick: busy(async () => {
      if (!(await confirmAction(`Delete snapshot ${who}?`, "Its files and memory image are removed, and its pool with them; running copies keep running.", "Delete snapshot"))) return;
      await post(`${base}:delete`, {});
      done(`Deleted snapshot ${who}.`);
    }) }, "Delete");
    this.tr = h("tr", { "data-id": s.id },
      h("th", { scope: "row" }, h("span", { class: "mono" }, s.id), s.name ? h("div", { class: "sub" }, s.name) : null),
      h("td", null, s.mode || "memory"),
      h("td", null, s.sourceSandboxId ? h("a", { href: `#/sandboxes/${encodeURIComponent(s.sourceSandboxId)}`, class: "mono" }, s.sourceSandboxId) : "—"),
      h("td", null, s.shape ? `${s.shape.vcpu} vCPU · ${mib(s.shape.memoryMiB)}` : "—"), this.size, this.age, this.expires,
      h("td", null, this.pool, h("div", { class: "row-actions" }, this.input, set)),
      h("td", null, h("div", { class: "row-actions" }, copy, del)));
  }
  update(s: Snapshot): void {
    setText(this.size, bytes(s.sizeBytes));
    setText(this.age, since(s.createdAt));
    setText(this.expires, s.expiresAt ? duration((Date.parse(s.expiresAt) - Date.now()) / 1000) : "—");
    setText(this.pool, s.pool ? `${s.pool.ready}/${s.pool.size} ready` : "none");
    if (!this.typed && document.activeElement !== this.input) this.input.value = String(s.pool?.size ?? 0);
  }
}
