// Background processes: `sbx.spawn(...)` answers a Process; `sbx.processes`
// lists, gets and follows them.
import { newIdempotencyKey } from "./client.js";
import { ConnectionError } from "./errors.js";
import { Collector, b64, toEvent } from "./events.js";
import type { Sandbox } from "./sandbox.js";
import type { CommandResult, OutputEvent, ProcessInfo, RequestOptions } from "./types.js";

function enc(id: string): string {
  return encodeURIComponent(id);
}

export class Processes {
  constructor(private readonly sandbox: Sandbox) {}

  async list(options: RequestOptions = {}): Promise<ProcessInfo[]> {
    const answer = await this.sandbox.call<{ data: ProcessInfo[] }>({
      method: "GET",
      path: "/processes",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return answer.data;
  }

  async get(id: string, options: RequestOptions = {}): Promise<Process> {
    const info = await this.sandbox.call<ProcessInfo>({
      method: "GET",
      path: `/processes/${enc(id)}`,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return new Process(this.sandbox, info);
  }

  /**
   * The process's output from `cursor` (byte offset in its combined output)
   * until it ends: `stdout` / `stderr` / `truncated` events, then `exit`.
   * Reconnects from the last offset when the connection drops; gives up after
   * 4 reconnects in a row that bring nothing.
   */
  async *follow(
    id: string,
    options: { cursor?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<OutputEvent, void, undefined> {
    let cursor = options.cursor ?? 0;
    let idle = 0;
    for (;;) {
      let progressed = false;
      try {
        for await (const raw of this.sandbox.runtime.transport.ndjson({
          method: "GET",
          path: `/v1/sandboxes/${enc(this.sandbox.id)}/processes/${enc(id)}/output`,
          query: { cursor, follow: "true" },
          signal: options.signal,
          timeoutMs: 180_000,
        })) {
          const ev = toEvent(raw);
          progressed = true;
          if (ev.type === "stdout" || ev.type === "stderr") cursor = ev.offset + Buffer.byteLength(ev.data, ev.base64 ? "base64" : "utf8");
          if (ev.type === "truncated") cursor = Math.max(cursor, ev.resumeAt);
          yield ev;
          if (ev.type === "exit") return;
        }
      } catch (e) {
        if (!(e instanceof ConnectionError) || options.signal?.aborted) throw e;
      }
      idle = progressed ? 0 : idle + 1;
      if (idle >= 4)
        throw new ConnectionError({
          code: "connection_error",
          status: 0,
          message: `lost the output of process ${id}`,
          details: { sandboxId: this.sandbox.id, processId: id },
        });
    }
  }
}

/** A background process started by `spawn`. */
export class Process {
  #info: ProcessInfo;

  constructor(
    readonly sandbox: Sandbox,
    info: ProcessInfo,
  ) {
    this.#info = info;
  }

  get id(): string {
    return this.#info.id;
  }

  get info(): ProcessInfo {
    return this.#info;
  }

  get state(): ProcessInfo["state"] {
    return this.#info.state;
  }

  toJSON(): ProcessInfo {
    return this.#info;
  }

  async refresh(options: RequestOptions = {}): Promise<ProcessInfo> {
    this.#info = await this.sandbox.call<ProcessInfo>({
      method: "GET",
      path: `/processes/${enc(this.id)}`,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return this.#info;
  }

  /** Its output events from `cursor` until it ends. */
  output(options: { cursor?: number; signal?: AbortSignal } = {}): AsyncGenerator<OutputEvent, void, undefined> {
    return this.sandbox.processes.follow(this.id, options);
  }

  /** Waits for the end; the result holds the output still kept (the latest 1 MiB). */
  async wait(options: { signal?: AbortSignal; onStdout?: (t: string) => void; onStderr?: (t: string) => void } = {}): Promise<CommandResult> {
    const c = new Collector(options.onStdout, options.onStderr);
    for await (const ev of this.output(options.signal ? { signal: options.signal } : {})) c.add(ev);
    const info = await this.refresh();
    const duration =
      info.startedAt && info.endedAt ? Date.parse(info.endedAt) - Date.parse(info.startedAt) : undefined;
    const r = c.result(duration);
    r.processId = this.id;
    return r;
  }

  /** Writes to its stdin (spawned with `stdin: "pipe"`); `eof` closes it. */
  async write(data: string | Uint8Array, options: { eof?: boolean } & RequestOptions = {}): Promise<{ offset: number }> {
    const body: Record<string, unknown> = typeof data === "string" ? { data } : { base64: b64(data) };
    if (options.eof) body["eof"] = true;
    return this.sandbox.call<{ offset: number }>({
      method: "POST",
      path: `/processes/${enc(this.id)}:write`,
      json: body,
      idempotencyKey: options.idempotencyKey,
      retry: options.idempotencyKey ? "safe" : "never",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** Signals its process group (SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2). */
  /** Resizes the terminal of a process spawned with `pty` (it gets SIGWINCH). */
  async resize(cols: number, rows: number, options: RequestOptions = {}): Promise<void> {
    await this.sandbox.call<unknown>({
      method: "POST",
      path: `/processes/${enc(this.id)}:resize`,
      json: { cols, rows },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  async kill(signal = "SIGTERM", options: RequestOptions = {}): Promise<ProcessInfo> {
    this.#info = await this.sandbox.call<ProcessInfo>({
      method: "POST",
      path: `/processes/${enc(this.id)}:signal`,
      json: { signal },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return this.#info;
  }
}
