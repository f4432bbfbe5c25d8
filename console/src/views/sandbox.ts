import { api, ApiError } from "../api";
import { clear, h, setText } from "../dom";
import type { Session } from "../main";
import { TerminalPanel } from "../terminal";
import { bytes, ErrorSlot, labelsText, mib, money, Scope, since, status } from "../ui";
import { actionButtons, leaseLeft, replaceActions, Sandbox, source } from "./actions";

export function sandboxView(main: HTMLElement, scope: Scope, _s: Session, id: string): void {
  const base = `/v1/sandboxes/${encodeURIComponent(id)}`;
  const errors = new ErrorSlot();
  const note = status();
  const facts = h("dl", { class: "facts" });
  const actions = h("div", { class: "row-actions" });
  let actionsKey = "";
  let gone = false;

  main.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/sandboxes" }, "Sandboxes"), " / ", h("span", { class: "mono" }, id)),
    h("h1", { tabindex: "-1" }, "Sandbox ", h("span", { class: "mono" }, id)),
    errors.el, note, facts, actions);

  const fact = (k: string, v: string) => [h("dt", null, k), h("dd", null, v)];
  const poller = scope.poll(3000, async () => {
    try {
      const s = await api<Sandbox>(base, { signal: scope.signal });
      gone = false;
      errors.clear();
      clear(facts);
      facts.dataset.state = s.state;
      facts.append(...fact("State", s.state + (s.stopReason ? ` (${s.stopReason})` : "")),
        ...fact("Name", s.name || "—"), ...fact("Image or snapshot", source(s)),
        ...fact("Shape", `${s.vcpu} vCPU · ${mib(s.memoryMiB)} · ${mib(s.diskMiB)} disk`),
        ...fact("Age", since(s.createdAt)), ...fact("Lease left", leaseLeft(s)),
        ...fact("CPU", `${(s.cpuSeconds || 0).toFixed(1)} s`), ...fact("Cost so far", money(s.chargedMicros)),
        ...fact("Labels", labelsText(s.labels) || "—"));
      if (actionsKey !== s.state) {
        actionsKey = s.state;
        replaceActions(actions, actionButtons(s, (m) => { note.textContent = m; poller.now(); }, (e) => errors.show(e)));
      }
    } catch (e) {
      if (scope.dead) return;
      if (e instanceof ApiError && e.status === 404) {
        gone = true;
        errors.show(`Sandbox ${id} no longer exists: it was deleted, or this key cannot see it.`, () => poller.now());
        facts.dataset.state = "gone";
      } else {
        errors.show(e, () => poller.now());
      }
    }
  });

  main.append(processesSection(base, scope, () => gone), filesSection(base, scope), egressSection(base, scope, () => gone),
    new TerminalPanel(id, scope).el);
}

interface Proc {
  id: string; pid: number; state: string; exitCode: number | null; command: string | null; argv: string[] | null;
  startedAt: string; pty: { cols: number; rows: number } | null;
}

function processesSection(base: string, scope: Scope, gone: () => boolean): HTMLElement {
  const tbody = h("tbody");
  const errors = new ErrorSlot();
  const sec = h("section", { "aria-labelledby": "procs-title" },
    h("h2", { id: "procs-title" }, "Processes"), errors.el,
    h("div", { class: "table-wrap", role: "region", "aria-label": "Processes table", tabindex: "0" },
      h("table", { class: "grid processes" },
        h("thead", null, h("tr", null, ["Process", "PID", "State", "Command", "Terminal size", "Started"].map((c) => h("th", { scope: "col" }, c)))),
        tbody)));
  const p = scope.poll(3000, async () => {
    if (gone()) return;
    try {
      const r = await api<{ data: Proc[] }>(`${base}/processes`, { signal: scope.signal });
      errors.clear();
      clear(tbody);
      for (const x of r.data) {
        const cmd = x.command || (x.argv || []).join(" ");
        tbody.append(h("tr", { "data-process": x.id },
          h("th", { scope: "row" }, x.id), h("td", null, x.pid), h("td", null, x.state + (x.exitCode !== null ? ` (${x.exitCode})` : "")),
          h("td", { class: "mono" }, cmd), h("td", { class: "pty-size" }, x.pty ? `${x.pty.cols}×${x.pty.rows}` : "—"),
          h("td", null, since(x.startedAt))));
      }
      if (!r.data.length) tbody.append(h("tr", null, h("td", { colspan: 6 }, "No processes.")));
    } catch (e) {
      if (!scope.dead && !(e instanceof ApiError && (e.status === 404 || e.status === 409))) errors.show(e, () => p.now());
    }
  });
  return sec;
}

interface FileEntry { name: string; path: string; type: string; size: number; mode: string; modifiedAt: string }

function filesSection(base: string, scope: Scope): HTMLElement {
  const errors = new ErrorSlot();
  const pathInput = h("input", { type: "text", value: "/workspace", autocomplete: "off", spellcheck: "false" });
  const list = h("tbody");
  const form = h("form", { class: "inline-form", "aria-label": "Browse files" },
    h("div", { class: "field" }, h("label", { for: "files-path" }, "Folder"), pathInput), h("button", { type: "submit" }, "Open folder"));
  pathInput.id = "files-path";
  const up = h("button", { type: "button" }, "Parent folder");
  // Only the latest folder asked for is shown: an earlier listing that answers late (the first one of
  // /workspace, on a busy host) must not replace the folder the user has opened since.
  let latest = 0;
  const load = async (path: string) => {
    pathInput.value = path;
    const ticket = ++latest;
    try {
      const r = await api<{ data: FileEntry[] }>(`${base}/files/list`, { query: { path, depth: 1 }, signal: scope.signal });
      if (ticket !== latest) return;
      errors.clear();
      clear(list);
      const entries = r.data.slice().sort((a, b) => (a.type === "directory" ? 0 : 1) - (b.type === "directory" ? 0 : 1) || a.name.localeCompare(b.name));
      for (const f of entries) {
        const open = f.type === "directory"
          ? h("button", { type: "button", class: "link", "aria-label": `Open folder ${f.path}`, onclick: () => void load(f.path) }, `${f.name}/`)
          : h("span", { class: "mono" }, f.name);
        const dl = f.type === "file"
          ? h("button", { type: "button", "aria-label": `Download ${f.path}`, onclick: () => void download(f) }, "Download") : "";
        list.append(h("tr", null, h("th", { scope: "row" }, open), h("td", null, f.type), h("td", null, f.type === "file" ? bytes(f.size) : ""),
          h("td", null, f.mode), h("td", null, since(f.modifiedAt)), h("td", null, dl)));
      }
      if (!entries.length) list.append(h("tr", null, h("td", { colspan: 6 }, "Empty folder.")));
    } catch (e) {
      if (!scope.dead && ticket === latest) errors.show(e, () => void load(path));
    }
  };
  const download = async (f: FileEntry) => {
    try {
      const res = await api<Response>(`${base}/files/content`, { query: { path: f.path }, raw: true, signal: scope.signal });
      const blob = await res.blob();
      const href = URL.createObjectURL(blob);
      const a = h("a", { href, download: f.name, class: "visually-hidden" }, f.name);
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(href), 60_000);
    } catch (e) {
      errors.show(e);
    }
  };
  form.addEventListener("submit", (ev) => { ev.preventDefault(); void load(pathInput.value.trim() || "/"); });
  up.addEventListener("click", () => {
    const p = pathInput.value.replace(/\/+$/, "");
    void load(p.slice(0, p.lastIndexOf("/")) || "/");
  });
  void load("/workspace");
  return h("section", { "aria-labelledby": "files-title" }, h("h2", { id: "files-title" }, "Files"), form, up, errors.el,
    h("div", { class: "table-wrap", role: "region", "aria-label": "Files table", tabindex: "0" },
      h("table", { class: "grid files" },
        h("thead", null, h("tr", null, ["Name", "Type", "Size", "Mode", "Modified", "Download"].map((c) => h("th", { scope: "col" }, c)))), list)));
}

interface Egress {
  id: string; time: string; method: string; host: string; port: number; verdict: string; bytesOut: number; bytesIn: number; open?: boolean;
}

const EGRESS_SHOWN = 200; // the newest entries kept on the page

/**
 * The egress log, followed: the API lists it oldest first with a cursor (an entry's id), so each poll
 * reads on from the oldest entry still open (its byte counts still change) or else the newest one
 * seen, instead of re-reading the first page (which showed the sandbox's first 100 connections forever).
 */
function egressSection(base: string, scope: Scope, gone: () => boolean): HTMLElement {
  const errors = new ErrorSlot();
  const tbody = h("tbody");
  const count = h("p", { class: "count" });
  let entries: Egress[] = [];
  let trimmed = false;
  const p = scope.poll(5000, async () => {
    if (gone()) return;
    try {
      const firstOpen = entries.findIndex((e) => e.open);
      const keep = firstOpen >= 0 ? entries.slice(0, firstOpen) : entries;
      let cursor: string | null = firstOpen >= 0 ? String(Number(entries[firstOpen].id) - 1)
        : entries.length ? entries[entries.length - 1].id : null;
      const fresh: Egress[] = [];
      for (let page = 0; page < 5; page++) { // at most 2,500 new entries a poll; the rest next time
        const r = await api<{ data: Egress[]; nextCursor: string | null }>(`${base}/network/log`,
          { query: { limit: 500, cursor }, signal: scope.signal });
        fresh.push(...r.data);
        if (!r.nextCursor) break;
        cursor = r.nextCursor;
      }
      entries = keep.concat(fresh);
      if (entries.length > EGRESS_SHOWN) { entries = entries.slice(-EGRESS_SHOWN); trimmed = true; }
      errors.clear();
      clear(tbody);
      for (const e of entries) {
        tbody.append(h("tr", { "data-id": e.id }, h("td", null, new Date(e.time).toLocaleTimeString()), h("td", null, e.method),
          h("td", { class: "mono" }, `${e.host}:${e.port}`), h("td", { class: `verdict verdict-${e.verdict}` }, e.verdict),
          h("td", null, `${bytes(e.bytesOut)} / ${bytes(e.bytesIn)}`)));
      }
      if (!entries.length) tbody.append(h("tr", null, h("td", { colspan: 5 }, "No connections yet.")));
      setText(count, trimmed ? `The newest ${entries.length} connections, oldest first.` : "");
    } catch (e) {
      if (!scope.dead && !(e instanceof ApiError && e.status === 404)) errors.show(e, () => p.now());
    }
  });
  return h("section", { "aria-labelledby": "egress-title" }, h("h2", { id: "egress-title" }, "Egress log"), errors.el, count,
    h("div", { class: "table-wrap", role: "region", "aria-label": "Egress table", tabindex: "0" },
      h("table", { class: "grid" },
        h("thead", null, h("tr", null, ["Time", "Method", "Destination", "Verdict", "Sent / received"].map((c) => h("th", { scope: "col" }, c)))), tbody)));
}
