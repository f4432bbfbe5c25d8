import { errorText } from "./api";
import { h, clear } from "./dom";

/** What a view owns: its polls, sockets and requests; all ended when the route changes. */
export class Scope {
  private disposers: (() => void)[] = [];
  readonly abort = new AbortController();
  get signal(): AbortSignal {
    return this.abort.signal;
  }
  get dead(): boolean {
    return this.abort.signal.aborted;
  }
  add(f: () => void): void {
    this.disposers.push(f);
  }
  /** Runs `f` now and then every `ms` while the tab is visible (none while document.hidden). */
  poll(ms: number, f: () => Promise<void> | void): Poller {
    const p = new Poller(ms, f);
    this.add(() => p.stop());
    p.start();
    return p;
  }
  dispose(): void {
    this.abort.abort();
    for (const f of this.disposers.splice(0)) {
      try { f(); } catch { /* ending anyway */ }
    }
  }
}

export class Poller {
  private timer: number | undefined;
  private running = false;
  private stopped = false;
  private onVisible = () => {
    if (!document.hidden && !this.running && !this.stopped) {
      window.clearTimeout(this.timer);
      void this.tick();
    }
  };
  constructor(private ms: number, private f: () => Promise<void> | void) {}
  start(): void {
    document.addEventListener("visibilitychange", this.onVisible);
    void this.tick();
  }
  /** Polls again now (after an action), without waiting for the period. */
  now(): void {
    if (this.stopped) return;
    window.clearTimeout(this.timer);
    if (!this.running) void this.tick();
  }
  stop(): void {
    this.stopped = true;
    window.clearTimeout(this.timer);
    document.removeEventListener("visibilitychange", this.onVisible);
  }
  private async tick(): Promise<void> {
    if (this.stopped || document.hidden) return; // a hidden tab polls nothing; visibilitychange resumes
    this.running = true;
    try {
      await this.f();
    } catch { /* the view shows its own errors */ }
    this.running = false;
    if (!this.stopped) this.timer = window.setTimeout(() => void this.tick(), this.ms);
  }
}

/** A clear message (role=alert) with an optional retry button. */
export function alertBox(message: string, actions: { label: string; run: () => void }[] = []): HTMLElement {
  return h("div", { class: "alert", role: "alert" },
    h("p", null, message),
    actions.length ? h("div", { class: "actions" },
      actions.map((a) => h("button", { type: "button", onclick: a.run }, a.label))) : null);
}

/** A slot for a view's error: shows one alert at a time, cleared when things work again. */
export class ErrorSlot {
  readonly el = h("div", { class: "error-slot" });
  private current = "";
  show(e: unknown, retry?: () => void, label = "Retry"): void {
    const text = typeof e === "string" ? e : errorText(e);
    if (text === this.current) return;
    this.current = text;
    clear(this.el);
    this.el.append(alertBox(text, retry ? [{ label, run: retry }] : []));
  }
  clear(): void {
    if (!this.current) return;
    this.current = "";
    clear(this.el);
  }
}

export function status(text = ""): HTMLElement {
  return h("p", { class: "status", role: "status", "aria-live": "polite" }, text);
}

/** Asks before something is destroyed. Resolves true on the confirm button. */
export function confirmAction(title: string, detail: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const dlg = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title", "aria-describedby": "confirm-detail" });
    const done = (ok: boolean) => {
      dlg.close();
      dlg.remove();
      resolve(ok);
    };
    const cancel = h("button", { type: "button", onclick: () => done(false) }, "Cancel");
    dlg.append(
      h("h2", { id: "confirm-title" }, title),
      h("p", { id: "confirm-detail" }, detail),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "danger", onclick: () => done(true) }, confirmLabel), cancel));
    dlg.addEventListener("cancel", (ev) => { ev.preventDefault(); done(false); });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

// ---- formatting ----

export function money(micros: number | null | undefined): string {
  if (micros === null || micros === undefined) return "—";
  const d = micros / 1e6;
  return `$${d < 1 ? d.toFixed(4) : d.toFixed(2)}`;
}

export function duration(seconds: number): string {
  if (!isFinite(seconds)) return "—";
  const neg = seconds < 0;
  let t = Math.abs(Math.round(seconds));
  const d = Math.floor(t / 86400); t %= 86400;
  const hh = Math.floor(t / 3600); t %= 3600;
  const mm = Math.floor(t / 60); const ss = t % 60;
  const txt = d ? `${d}d ${hh}h` : hh ? `${hh}h ${mm}m` : mm ? `${mm}m ${ss}s` : `${ss}s`;
  return neg ? `-${txt}` : txt;
}

export function since(iso: string | null | undefined): string {
  if (!iso) return "—";
  return duration((Date.now() - Date.parse(iso)) / 1000);
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function mib(n: number | null | undefined): string {
  return n === null || n === undefined ? "—" : bytes(n * 1024 * 1024);
}

export function labelsText(labels: Record<string, string> | null | undefined): string {
  return Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(", ");
}

/** "a=1, b=2" → {a: "1", b: "2"}; throws on a malformed pair. */
export function parseLabels(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text.split(",").map((x) => x.trim()).filter(Boolean)) {
    const i = part.search(/[=:]/);
    if (i <= 0) throw new Error(`Label "${part}" is not key=value.`);
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

/** A labelled form field. */
export function field(label: string, input: HTMLElement, hint?: string): HTMLElement {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), input, hint ? h("small", null, hint) : null);
}

/** A horizontal gauge (ARIA meter) with a text reading. */
export function gauge(label: string, value: number, max: number, reading: string): HTMLElement {
  const pct = max > 0 ? Math.max(0, Math.min(100, (value / max) * 100)) : 0;
  const bar = h("div", { class: "gauge-fill" });
  bar.style.width = `${pct}%`; // CSSOM, allowed by style-src 'self'
  if (pct >= 90) bar.classList.add("high");
  return h("div", { class: "gauge", role: "meter", "aria-label": label, "aria-valuemin": 0,
    "aria-valuemax": max, "aria-valuenow": value, "aria-valuetext": reading },
    h("div", { class: "gauge-head" }, h("span", { class: "gauge-label" }, label), h("span", { class: "gauge-reading" }, reading)),
    h("div", { class: "gauge-track" }, bar));
}
