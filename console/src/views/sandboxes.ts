import { api } from "../api";
import { h, setText } from "../dom";
import type { Session } from "../main";
import { ErrorSlot, field, labelsText, mib, money, parseLabels, Scope, since, status } from "../ui";
import { actionButtons, leaseLeft, replaceActions, Sandbox, source } from "./actions";

const PAGE = 100; // rows per page: the API's cursor pages the rest (a poll reads one page)
const STATES = ["", "running", "paused", "starting", "pausing", "resuming", "stopping", "stopped"];

export function sandboxesView(main: HTMLElement, scope: Scope, _s: Session): void {
  const errors = new ErrorSlot();
  const note = status();

  // ---- create ----
  const image = h("input", { type: "text", placeholder: "base", autocomplete: "off" });
  const snapshot = h("input", { type: "text", autocomplete: "off" });
  const name = h("input", { type: "text", autocomplete: "off" });
  const labels = h("input", { type: "text", placeholder: "team=rl, run=7", autocomplete: "off" });
  const vcpu = h("input", { type: "number", min: 1, max: 16, placeholder: "2" });
  const mem = h("input", { type: "number", min: 128, max: 65536, step: 128, placeholder: "2048" });
  const createBtn = h("button", { type: "submit" }, "Create sandbox");
  const create = h("form", { class: "inline-form", "aria-label": "Create a sandbox" },
    field("Image", image, "name, name:tag or id"), field("Snapshot", snapshot, "a snapshot id, instead of an image"),
    field("Name", name),
    field("Labels", labels), field("vCPU", vcpu), field("Memory (MiB)", mem), createBtn);
  create.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (createBtn.getAttribute("aria-disabled") === "true") return; // busy (not disabled: that drops focus)
    createBtn.setAttribute("aria-disabled", "true");
    try {
      const body: Record<string, unknown> = {};
      if (image.value.trim()) body.image = image.value.trim();
      if (snapshot.value.trim()) body.snapshot = snapshot.value.trim();
      if (name.value.trim()) body.name = name.value.trim();
      if (labels.value.trim()) body.labels = parseLabels(labels.value);
      if (vcpu.value) body.vcpu = Number(vcpu.value);
      if (mem.value) body.memoryMiB = Number(mem.value);
      note.textContent = "Creating a sandbox…";
      const s = await api<Sandbox>("/v1/sandboxes", { method: "POST", body, signal: scope.signal });
      note.textContent = `Created sandbox ${s.id} (${s.state}).`;
      errors.clear();
      poller.now();
    } catch (e) {
      note.textContent = "";
      errors.show(e);
    } finally {
      createBtn.removeAttribute("aria-disabled");
    }
  });

  // ---- filter ----
  const state = h("select", null, STATES.map((s) => h("option", { value: s }, s || "live (all but stopped)")));
  state.append(h("option", { value: "*" }, "all, stopped too"));
  const label = h("input", { type: "text", placeholder: "team:rl", autocomplete: "off" });
  const filter = h("form", { class: "inline-form", "aria-label": "Filter sandboxes" },
    field("State", state), field("Label", label, "key:value"), h("button", { type: "submit" }, "Filter"));
  filter.addEventListener("submit", (ev) => { ev.preventDefault(); cursors = [""]; poller.now(); });
  state.addEventListener("change", () => { cursors = [""]; poller.now(); });

  // ---- table ----
  const cols = ["Sandbox", "State", "Image or snapshot", "Shape", "Age", "Lease left", "CPU", "Memory", "Cost so far", "Labels", "Actions"];
  const tbody = h("tbody");
  const table = h("table", { class: "grid sandboxes" },
    h("caption", { class: "visually-hidden" }, "Sandboxes"),
    h("thead", null, h("tr", null, cols.map((c) => h("th", { scope: "col" }, c)))), tbody);
  const count = h("p", { class: "count", "aria-live": "polite" });
  const prev = h("button", { type: "button", disabled: true }, "Previous page");
  const next = h("button", { type: "button", disabled: true }, "Next page");
  let cursors = [""]; // cursor of each page seen; the last is the current one
  let nextCursor: string | null = null;
  prev.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); poller.now(); } });
  next.addEventListener("click", () => { if (nextCursor) { cursors.push(nextCursor); poller.now(); } });

  main.append(h("h1", { tabindex: "-1" }, "Sandboxes"), create, note, errors.el, filter,
    h("div", { class: "table-wrap", role: "region", "aria-label": "Sandbox table", tabindex: "0" }, table),
    h("div", { class: "pager" }, prev, count, next));

  const rows = new Map<string, Row>();
  const report = (msg: string) => { note.textContent = msg; errors.clear(); poller.now(); };
  const fail = (e: unknown) => errors.show(e);

  const poller = scope.poll(3000, async () => {
    const st = state.value;
    const query: Record<string, string | number | boolean> = { limit: PAGE };
    if (st === "*") query.includeStopped = true;
    else if (st) query.state = st;
    if (label.value.trim()) query.label = label.value.trim();
    const cur = cursors[cursors.length - 1];
    if (cur) query.cursor = cur;
    try {
      const page = await api<{ data: Sandbox[]; nextCursor: string | null }>("/v1/sandboxes", { query, signal: scope.signal });
      errors.clear();
      nextCursor = page.nextCursor;
      next.disabled = !nextCursor;
      prev.disabled = cursors.length <= 1;
      const first = (cursors.length - 1) * PAGE;
      count.textContent = page.data.length
        ? `Sandboxes ${first + 1}–${first + page.data.length}${nextCursor ? ", more on the next page" : ""}`
        : "No sandboxes match.";
      const seen = new Set<string>();
      let before: ChildNode | null = tbody.firstChild;
      for (const s of page.data) {
        seen.add(s.id);
        let row = rows.get(s.id);
        if (!row) { row = new Row(); rows.set(s.id, row); }
        row.update(s, report, fail);
        if (row.tr !== before) tbody.insertBefore(row.tr, before);
        before = row.tr.nextSibling;
      }
      for (const [id, row] of rows) {
        if (!seen.has(id)) { row.tr.remove(); rows.delete(id); }
      }
    } catch (e) {
      if (!scope.dead) errors.show(e, () => poller.now());
    }
  });
}

/** One table row, updated in place so focus and selection survive a poll. */
class Row {
  readonly tr = h("tr");
  private cells: HTMLTableCellElement[] = [];
  private actionsKey = "";
  constructor() {
    for (let i = 0; i < 11; i++) {
      const c = i === 0 ? h("th", { scope: "row" }) : h("td");
      this.cells.push(c);
      this.tr.append(c);
    }
  }
  update(s: Sandbox, done: (m: string) => void, fail: (e: unknown) => void): void {
    const c = this.cells;
    if (!c[0].firstChild) {
      c[0].append(h("a", { href: `#/sandboxes/${encodeURIComponent(s.id)}`, class: "mono" }, s.id));
      if (s.name) c[0].append(h("div", { class: "sub" }, s.name));
    }
    this.tr.dataset.id = s.id;
    this.tr.dataset.state = s.state;
    setText(c[1], s.state + (s.stopReason && s.state === "stopped" ? ` (${s.stopReason})` : ""));
    c[1].className = `state state-${s.state}`;
    setText(c[2], source(s));
    setText(c[3], `${s.vcpu} vCPU · ${mib(s.memoryMiB)} · ${mib(s.diskMiB)} disk`);
    setText(c[4], since(s.createdAt));
    setText(c[5], leaseLeft(s));
    setText(c[6], `${(s.cpuSeconds || 0).toFixed(1)} s`);
    setText(c[7], mib(s.memoryMiB));
    setText(c[8], money(s.chargedMicros));
    setText(c[9], labelsText(s.labels));
    if (this.actionsKey !== s.state) {
      this.actionsKey = s.state;
      let box = c[10].firstElementChild as HTMLElement | null;
      if (!box) { box = h("div", { class: "row-actions" }); c[10].append(box); }
      replaceActions(box, actionButtons(s, done, fail));
    }
  }
}
