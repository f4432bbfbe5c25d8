import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { errorText, post } from "./api";
import { clear, h } from "./dom";
import { alertBox, Scope } from "./ui";

/**
 * xterm's DOM renderer writes its sizes and theme into <style> elements it creates, which the
 * console's CSP (style-src 'self') does not apply. This mirrors each such element's text into a
 * constructed stylesheet adopted by the document (CSSOM, which the CSP allows), so the terminal
 * lays out and colours as xterm meant, without 'unsafe-inline'.
 */
function mirrorInlineStyles(root: HTMLElement): () => void {
  const sheets = new Map<HTMLStyleElement, { sheet: CSSStyleSheet; text: string }>();
  const sync = () => {
    const live = new Set(root.querySelectorAll("style"));
    for (const el of live) {
      let m = sheets.get(el);
      if (!m) {
        m = { sheet: new CSSStyleSheet(), text: "" };
        sheets.set(el, m);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, m.sheet];
      }
      const text = el.textContent || "";
      if (text !== m.text) {
        m.text = text;
        m.sheet.replaceSync(text);
      }
    }
    for (const [el, m] of sheets) {
      if (!live.has(el)) {
        sheets.delete(el);
        document.adoptedStyleSheets = document.adoptedStyleSheets.filter((x) => x !== m.sheet);
      }
    }
  };
  const mo = new MutationObserver(sync);
  mo.observe(root, { childList: true, subtree: true, characterData: true });
  sync();
  return () => {
    mo.disconnect();
    const mine = new Set([...sheets.values()].map((m) => m.sheet));
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((x) => !mine.has(x));
    sheets.clear();
  };
}

/** A shell in the sandbox over kilnd's terminal WebSocket, opened with a single-use ticket. */
export class TerminalPanel {
  readonly el: HTMLElement;
  private host = h("div", { class: "term-host" });
  private term: Terminal | null = null;
  private fit = new FitAddon();
  private ws: WebSocket | null = null;
  private statusEl = h("p", { class: "status", role: "status", "aria-live": "polite" }, "Not connected.");
  private slot = h("div");
  private connectBtn = h("button", { type: "button" }, "Open terminal");
  private closeBtn = h("button", { type: "button", disabled: true }, "Close terminal");
  private unmirror: (() => void) | null = null;
  private onWindowResize = () => this.refit();
  private observer = new ResizeObserver(() => this.refit());
  private enc = new TextEncoder();

  constructor(private sandboxId: string, private scope: Scope) {
    this.el = h("div", { class: "terminal-panel" },
      h("h2", { id: "term-title" }, "Terminal"),
      h("div", { class: "actions" }, this.connectBtn, this.closeBtn),
      this.statusEl, this.slot,
      h("div", { class: "term-region", role: "region", "aria-label": "Terminal" }, this.host));
    this.connectBtn.addEventListener("click", () => void this.connect());
    this.closeBtn.addEventListener("click", () => this.disconnect("Closed."));
    scope.add(() => this.dispose());
  }

  private ensureTerm(): Terminal {
    if (this.term) return this.term;
    this.unmirror = mirrorInlineStyles(this.host);
    const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false,
      fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace" });
    term.loadAddon(this.fit);
    term.open(this.host);
    term.onData((d) => {
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(this.enc.encode(d));
    });
    term.onResize(({ cols, rows }) => {
      this.host.dataset.cols = String(cols);
      this.host.dataset.rows = String(rows);
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: "resize", cols, rows }));
    });
    window.addEventListener("resize", this.onWindowResize);
    this.observer.observe(this.host);
    this.term = term;
    this.refit();
    return term;
  }

  private refit(): void {
    if (!this.term || !this.host.isConnected) return;
    try {
      this.fit.fit();
    } catch { /* not laid out yet */ }
    this.host.dataset.cols = String(this.term.cols);
    this.host.dataset.rows = String(this.term.rows);
  }

  async connect(): Promise<void> {
    this.disconnect("");
    clear(this.slot);
    const term = this.ensureTerm();
    this.connectBtn.disabled = true;
    this.statusEl.textContent = "Connecting…";
    let ticket: string;
    try {
      const t = await post<{ ticket: string }>(`/v1/sandboxes/${encodeURIComponent(this.sandboxId)}/terminal-tickets`, {}, this.scope.signal);
      ticket = t.ticket;
    } catch (e) {
      if (this.scope.dead) return;
      this.connectBtn.disabled = false;
      this.statusEl.textContent = "Not connected.";
      this.problem(`Could not open a terminal: ${errorText(e)}`, "Retry");
      return;
    }
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const u = `${proto}//${location.host}/v1/sandboxes/${encodeURIComponent(this.sandboxId)}/terminal?cols=${term.cols}&rows=${term.rows}`;
    const ws = new WebSocket(u, ["runtime.terminal.v1", `runtime.ticket.${ticket}`]);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    let opened = false, ended = false;
    ws.onopen = () => {
      opened = true;
      this.closeBtn.disabled = false;
      this.statusEl.textContent = "Connected.";
      this.refit();
      ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
      term.focus();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") {
        term.write(new Uint8Array(ev.data as ArrayBuffer));
        return;
      }
      let m: any;
      try { m = JSON.parse(ev.data); } catch { return; }
      if (m.type === "ready") {
        this.host.dataset.processId = m.processId;
        this.statusEl.textContent = `Connected: shell process ${m.processId}.`;
      } else if (m.type === "exit") {
        ended = true;
        this.statusEl.textContent = `The shell ended (exit code ${m.exitCode ?? m.signal ?? "unknown"}).`;
        this.problem(`The shell ended with exit code ${m.exitCode ?? "none"}${m.signal ? ` (${m.signal})` : ""}.`, "Start a new shell", false);
      } else if (m.type === "error") {
        ended = true;
        this.problem(`The terminal failed: ${m.error?.message || "unknown error"} (${m.error?.code || "error"}).`, "Retry");
      }
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return; // closed on purpose
      this.ws = null;
      this.connectBtn.disabled = false;
      this.closeBtn.disabled = true;
      if (ended) return;
      this.statusEl.textContent = "Disconnected.";
      if (!opened) {
        this.problem("The terminal connection was refused (the ticket was not accepted, or the sandbox is not running).", "Retry");
      } else {
        this.problem(`The terminal connection dropped (code ${ev.code}${ev.reason ? `: ${ev.reason}` : ""}).`, "Reconnect");
      }
    };
  }

  private problem(message: string, retry: string, alert = true): void {
    clear(this.slot);
    const box = alertBox(message, [{ label: retry, run: () => void this.connect() }]);
    if (!alert) box.setAttribute("role", "status");
    this.slot.append(box);
  }

  disconnect(message: string): void {
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close(1000);
    this.closeBtn.disabled = true;
    this.connectBtn.disabled = false;
    if (message) this.statusEl.textContent = message;
  }

  private dispose(): void {
    this.disconnect("");
    window.removeEventListener("resize", this.onWindowResize);
    this.observer.disconnect();
    this.term?.dispose();
    this.unmirror?.();
  }
}
