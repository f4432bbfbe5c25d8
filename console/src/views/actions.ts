import { api, post } from "../api";
import { h } from "../dom";
import { confirmAction } from "../ui";

export interface Sandbox {
  id: string;
  name: string | null;
  state: string;
  labels: Record<string, string>;
  vcpu: number;
  memoryMiB: number;
  diskMiB: number;
  image?: string | null;
  snapshot?: string | null;
  createdAt: string;
  expiresAt: string | null;
  endedAt: string | null;
  chargedMicros: number;
  cpuSeconds: number;
  stopReason: string | null;
  pausedAt?: string | null;
}

export const LIVE = new Set(["starting", "running", "pausing", "resuming"]);

export function source(s: Sandbox): string {
  if (s.snapshot) return `snapshot ${s.snapshot}`;
  return s.image || "base";
}

export function leaseLeft(s: Sandbox): string {
  if (!LIVE.has(s.state) || !s.expiresAt) return "—";
  const left = (Date.parse(s.expiresAt) - Date.now()) / 1000;
  if (left <= 0) return "ending";
  const m = Math.floor(left / 60), sec = Math.floor(left % 60);
  return m ? `${m}m ${sec}s` : `${sec}s`;
}

/**
 * The actions a sandbox in this state allows, as buttons named with its id.
 * `done(message)` reports what happened; `fail(error)` what went wrong.
 */
export function actionButtons(s: Sandbox, done: (msg: string) => void, fail: (e: unknown) => void): HTMLElement[] {
  const base = `/v1/sandboxes/${encodeURIComponent(s.id)}`;
  const who = s.name ? `${s.name} (${s.id})` : s.id;
  const run = (label: string, f: () => Promise<string>) => async (ev: Event) => {
    const b = ev.currentTarget as HTMLButtonElement;
    // Busy, not `disabled`: a disabled button drops the keyboard focus (to <body>), and a keyboard
    // user pressing Enter on it would lose their place in the table.
    if (b.getAttribute("aria-disabled") === "true") return;
    b.setAttribute("aria-disabled", "true");
    try {
      done(await f());
    } catch (e) {
      fail(e);
    } finally {
      b.removeAttribute("aria-disabled");
    }
  };
  const btn = (label: string, verb: string, f: () => Promise<string>, cls = "") =>
    h("button", { type: "button", class: cls || null, "aria-label": verb.includes("{id}") ? verb.replace("{id}", s.id) : `${verb} sandbox ${s.id}`,
      onclick: run(label, f) }, label);
  const out: HTMLElement[] = [];
  const live = LIVE.has(s.state);
  if (s.state === "running") {
    out.push(btn("Pause", "Pause", async () => { await post(`${base}:pause`); return `Paused ${who}.`; }));
    out.push(btn("Extend", "Extend the lease of sandbox {id} by 10 minutes", async () => {
      const r = await post(`${base}:extend`, { seconds: 600 });
      return `Extended ${who}: its lease now ends at ${new Date(r.expiresAt).toLocaleTimeString()}.`;
    }));
    out.push(btn("Snapshot", "Snapshot", async () => {
      const r = await post(`${base}:snapshot`, {});
      return `Snapshot ${r.id} of ${who} is ${r.state}.`;
    }));
    out.push(btn("Fork", "Fork", async () => {
      const r = await post(`${base}:fork`, { count: 1 });
      return `Forked ${who}: ${r.sandboxes.map((x: Sandbox) => x.id).join(", ")}.`;
    }));
  }
  if (s.state === "paused") {
    out.push(btn("Wake", "Wake", async () => { await post(`${base}:wake`, {}); return `Woke ${who}.`; }));
  }
  if (live || s.state === "paused") {
    out.push(btn("Stop", "Stop", async () => {
      if (!(await confirmAction(`Stop sandbox ${who}?`,
        "Stopping destroys its processes, memory and files; this cannot be undone.", "Stop sandbox"))) return "Not stopped.";
      await post(`${base}:stop`, {});
      return `Stopped ${who}.`;
    }, "danger"));
  }
  out.push(btn("Delete", "Delete", async () => {
    if (!(await confirmAction(`Delete sandbox ${who}?`,
      "Deleting stops it if it runs and removes its record; this cannot be undone.", "Delete sandbox"))) return "Not deleted.";
    await api(base, { method: "DELETE" });
    return `Deleted ${who}.`;
  }, "danger"));
  return out;
}

// What the focus goes to when the button it was on is gone: the action that undoes it.
const FOLLOW: Record<string, string> = { Pause: "Wake", Wake: "Pause" };

/**
 * Replaces a sandbox's action buttons in `box` (after its state changed). If the focus was on one of
 * the old buttons, it moves to the new button of the same label or the one that follows it (Pause
 * turns into Wake), else to the first new one until that follow-up appears (a pause passes through
 * "pausing", which has neither): the keyboard focus is never dropped to <body>.
 */
export function replaceActions(box: HTMLElement, buttons: HTMLElement[]): void {
  const active = document.activeElement as HTMLElement | null;
  const inside = !!active && box.contains(active);
  const want = inside ? box.dataset.want || active!.textContent || "" : "";
  while (box.firstChild) box.firstChild.remove();
  box.append(...buttons);
  delete box.dataset.want;
  if (!inside || !buttons.length) return;
  const target = buttons.find((b) => b.textContent === FOLLOW[want]) || buttons.find((b) => b.textContent === want);
  if (!target) box.dataset.want = want; // a transitional state: keep looking on the next change
  (target || buttons[0]).focus();
}
