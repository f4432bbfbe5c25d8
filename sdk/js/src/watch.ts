// `sbx.files.watch(path)`: inotify in the sandbox, read by cursor
// (`/v1/sandboxes/{id}/files/watches`).
import type { Transport } from "./client.js";
import { newIdempotencyKey } from "./client.js";
import { errorFromAnswer } from "./errors.js";

export interface WatchEvent {
  type: "create" | "write" | "remove" | "rename" | "chmod";
  path: string;
  isDir: boolean;
  oldPath?: string;
  count?: number;
}

export interface WatchInfo {
  id: string;
  path: string;
  recursive: boolean;
  cursor: number;
  state: "running" | "ended";
  endReason: string | null;
  [key: string]: unknown;
}

export interface WatchOptions {
  recursive?: boolean;
  events?: string[];
  include?: string[];
  exclude?: string[];
  batchMs?: number;
  timeoutMs?: number;
  maxWatches?: number;
  id?: string;
}

const MAX_WAIT_MS = 8000;
const FOLLOW_TIMEOUT_MS = 150_000; // a follow ends by itself after 110 s with `continue`

export class WatchHandle implements AsyncIterable<WatchEvent> {
  readonly id: string;
  readonly path: string;
  cursor: number;
  /** overflow / limit / lost / paused notices: events were missed, rescan. */
  readonly notices: Record<string, unknown>[] = [];
  /** Why the watch ended (stopped, timeout, root-removed, gone); undefined while it runs. */
  exitReason: string | undefined;

  constructor(
    private readonly t: Transport,
    private readonly base: string,
    readonly info: WatchInfo,
  ) {
    this.id = info.id;
    this.path = info.path;
    this.cursor = Number(info.cursor ?? 0);
  }

  private get eventsPath(): string {
    return `${this.base}/${encodeURIComponent(this.id)}/events`;
  }

  /** Events after `cursor`, waiting up to `waitMs` (at most 8000) for the first. */
  async getNewEvents(waitMs = 0): Promise<WatchEvent[]> {
    const wait = Math.max(0, Math.min(MAX_WAIT_MS, Math.floor(waitMs)));
    const page = await this.t.json<{
      events?: WatchEvent[];
      notices?: Record<string, unknown>[];
      nextCursor?: number;
      lostBytes?: number;
    }>({ method: "GET", path: this.eventsPath, query: { cursor: this.cursor, waitMs: wait }, timeoutMs: this.t.timeoutMs + wait });
    if (typeof page.nextCursor === "number") this.cursor = page.nextCursor;
    if (page.lostBytes) this.notices.push({ k: "lost", bytes: page.lostBytes });
    for (const n of page.notices ?? []) {
      if (n["k"] === "end") this.exitReason = String(n["reason"]);
      else this.notices.push(n);
    }
    return page.events ?? [];
  }

  /** Each event as it comes, until the watch ends or the sandbox pauses; follows again on `continue`. */
  async *events(signal?: AbortSignal): AsyncGenerator<WatchEvent, void, undefined> {
    for (;;) {
      let again = false;
      const lines = this.t.ndjson({
        method: "GET",
        path: this.eventsPath,
        query: { cursor: this.cursor, follow: true },
        timeoutMs: FOLLOW_TIMEOUT_MS,
        signal,
      });
      for await (const line of lines) {
        if (typeof line["cursor"] === "number") this.cursor = line["cursor"];
        const k = line["k"];
        if (k === "events") yield* (line["events"] ?? []) as WatchEvent[];
        else if (k === "continue") again = true;
        else if (k === "end") {
          this.exitReason = String(line["reason"]);
          return;
        } else if (k === "paused") {
          this.notices.push(line);
          return;
        } else if (k === "failure") {
          const status = typeof line["status"] === "number" ? line["status"] : 500;
          throw errorFromAnswer(status, JSON.stringify({ error: { code: line["code"], message: line["message"], status } }), new Headers());
        } else this.notices.push(line);
      }
      if (!again) return;
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<WatchEvent> {
    return this.events();
  }

  /** Ends the watch in the sandbox (its readers see `end {reason: stopped}`). */
  async stop(): Promise<boolean> {
    const r = await this.t.json<{ stopped?: boolean }>({ method: "DELETE", path: `${this.base}/${encodeURIComponent(this.id)}` });
    this.exitReason ??= "stopped";
    return Boolean(r.stopped);
  }
}

export class Watches {
  private readonly base: string;

  constructor(
    private readonly t: Transport,
    sandboxId: string,
  ) {
    this.base = `/v1/sandboxes/${encodeURIComponent(sandboxId)}/files/watches`;
  }

  async start(path: string, options: WatchOptions = {}): Promise<WatchHandle> {
    const info = await this.t.json<WatchInfo>({
      method: "POST",
      path: this.base,
      json: { path, recursive: false, ...options },
      idempotencyKey: newIdempotencyKey(),
      retry: "safe",
    });
    return new WatchHandle(this.t, this.base, info);
  }

  async list(): Promise<WatchInfo[]> {
    return (await this.t.json<{ data: WatchInfo[] }>({ method: "GET", path: this.base })).data;
  }

  async stop(id: string): Promise<boolean> {
    return Boolean((await this.t.json<{ stopped?: boolean }>({ method: "DELETE", path: `${this.base}/${encodeURIComponent(id)}` })).stopped);
  }
}
