// The HTTP transport: configuration from options and environment, one
// request with auth, deadline and safe retries, JSON and NDJSON answers.
//
// Node's global fetch (undici) keeps connections alive and reuses them, so
// consecutive calls on one Runtime share a TCP connection
// (bench/overhead.mjs counts the connections).
import { closeSync, constants as fsConstants, openSync, readSync } from "node:fs";

import {
  ConnectionError,
  DELIBERATE_CODES,
  RuntimeError,
  TimeoutError,
  errorFromAnswer,
} from "./errors.js";
import { VERSION } from "./version.js";

export const DEFAULT_API_URL = "http://127.0.0.1:7070";
export const DEFAULT_ADMIN_KEY_FILE = "/var/lib/kiln/admin.key";
export const DEFAULT_TIMEOUT_MS = 300_000;
export const DEFAULT_MAX_RETRIES = 4;
export const DEFAULT_WAIT_FOR_CAPACITY_MS = 120_000;
export const DEFAULT_MAX_CONNECTIONS = 32;

export interface RuntimeOptions {
  /** Daemon origin. Default: KILN_API_URL, RUNTIME_API_URL, then http://127.0.0.1:7070. */
  apiUrl?: string;
  /** Same as `apiUrl` (the reference SDK's name). */
  baseUrl?: string;
  /**
   * Bearer key. Default: KILN_API_KEY, RUNTIME_API_KEY, then the local admin
   * key file (KILN_ADMIN_KEY_FILE, default /var/lib/kiln/admin.key) when readable.
   */
  apiKey?: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** Deadline per call, retries included (default 300 000; 0 = none). */
  timeoutMs?: number;
  /** Retries of transport failures and 429/502/503/504 where safe (default 4). */
  maxRetries?: number;
  /** How long a create waits for room (default 120 000; 0 = fail at once). */
  waitForCapacityMs?: number;
  /** Whole-body calls in flight at once (default 32); more wait their turn. Streams do not count. */
  maxConnections?: number;
}

/** A counting semaphore: at most `size` holders at once, the rest queue in order. */
export class Slots {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {}

  async take(): Promise<void> {
    if (this.held < this.size) {
      this.held++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held--;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    await this.take();
    try {
      return await fn();
    } finally {
      this.give();
    }
  }
}

type QueryValue = string | number | boolean | undefined | null | readonly string[];

/** One call. `retry`: "safe" may be re-sent (idempotent, or keyed); "never" must not. */
export interface CallSpec {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  json?: unknown;
  body?: Uint8Array | ReadableStream<Uint8Array>;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
  idempotencyKey?: string | undefined;
  retry?: "safe" | "never";
  signal?: AbortSignal | undefined;
  /** Deadline of this call (default: the client's); 0 = none. */
  timeoutMs?: number | undefined;
}

function env(name: string): string | undefined {
  const v = process.env[name];
  return v && v.length > 0 ? v : undefined;
}

/** The first line of a key file, or undefined when it cannot be read. */
export function readKeyFile(path: string): string | undefined {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO at the path must not hang the caller.
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const buf = Buffer.alloc(4096);
    const n = readSync(fd, buf, 0, buf.length, null);
    const key = buf.subarray(0, n).toString("utf8").split("\n")[0]?.trim() ?? "";
    return key.length > 0 && /^[\x21-\x7e]+$/.test(key) ? key : undefined;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function normalizeUrl(text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new RuntimeError({ code: "invalid_api_url", status: 0, message: `API URL '${text}' is not a URL` });
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new RuntimeError({ code: "invalid_api_url", status: 0, message: `API URL '${text}' must be http or https` });
  if (u.username || u.password || u.search || u.hash)
    throw new RuntimeError({
      code: "invalid_api_url",
      status: 0,
      message: `API URL '${text}' must have no credentials, query or fragment (use apiKey / KILN_API_KEY)`,
    });
  return (u.origin + u.pathname).replace(/\/+$/, "");
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function jitter(ms: number, lo: number, hi: number): number {
  return ms * (lo + Math.random() * (hi - lo));
}

/** Backoff before retry `n` (0-based): min(8 s, 0.25 s * 2^n) * U(0.5, 1.5). */
export function backoffMs(n: number): number {
  return jitter(Math.min(8000, 250 * 2 ** n), 0.5, 1.5);
}

/** The transport error codes that prove the request never reached the server. */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

function causeCode(e: unknown): string | undefined {
  let c: unknown = e;
  for (let i = 0; i < 4 && c && typeof c === "object"; i++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === "string") return code;
    c = (c as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A call's deadline and cancellation, as one AbortSignal. */
export class Deadline {
  readonly signal: AbortSignal | undefined;
  readonly endsAt: number;
  private readonly expiry: AbortController | undefined;
  private timeout: ReturnType<typeof setTimeout> | undefined;

  constructor(
    readonly user: AbortSignal | undefined,
    timeoutMs: number,
  ) {
    this.endsAt = timeoutMs > 0 ? Date.now() + timeoutMs : Infinity;
    if (timeoutMs > 0) {
      // One unref'd timer, cleared as soon as the answer is read (cheaper
      // than AbortSignal.timeout, whose timer lives on after the call).
      const expiry = new AbortController();
      this.expiry = expiry;
      this.timeout = setTimeout(() => expiry.abort(new DOMException("deadline", "TimeoutError")), timeoutMs);
      this.timeout.unref();
    }
    const parts = [user, this.expiry?.signal].filter((s): s is AbortSignal => s !== undefined);
    this.signal = parts.length === 0 ? undefined : parts.length === 1 ? parts[0] : AbortSignal.any(parts);
  }

  /** The call is over: its timer is no longer needed. */
  done(): void {
    if (this.timeout !== undefined) clearTimeout(this.timeout);
    this.timeout = undefined;
  }

  left(): number {
    return this.endsAt - Date.now();
  }

  /** The error for a failure while this deadline ran. */
  failure(e: unknown, what: string, idempotencyKey?: string): RuntimeError {
    if (e instanceof RuntimeError) return e;
    if (this.user?.aborted)
      return new RuntimeError({
        code: "cancelled",
        status: 0,
        message: `${what}: cancelled`,
        idempotencyKey,
        cause: this.user.reason,
      });
    if (this.expiry?.signal.aborted)
      return new TimeoutError({
        code: "timeout",
        status: 0,
        message: `${what}: no complete answer before the deadline`,
        idempotencyKey,
        cause: e,
      });
    const code = causeCode(e);
    return new ConnectionError({
      code: "connection_error",
      status: 0,
      message: `${what}: ${code ?? (e instanceof Error ? e.message : String(e))}`,
      details: code ? { cause: code } : undefined,
      idempotencyKey,
      cause: e,
    });
  }
}

export interface Answer {
  response: Response;
  /** The deadline still running, for reading a streamed body. */
  deadline: Deadline;
}

export class Transport {
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly waitForCapacityMs: number;
  readonly maxConnections: number;
  private readonly slots: Slots;
  private readonly fetchImpl: typeof fetch;
  private readonly userAgent = `kiln-sdk-js/${VERSION}`;

  constructor(options: RuntimeOptions = {}) {
    this.baseUrl = normalizeUrl(
      options.apiUrl ?? options.baseUrl ?? env("KILN_API_URL") ?? env("RUNTIME_API_URL") ?? DEFAULT_API_URL,
    );
    this.apiKey =
      options.apiKey ??
      env("KILN_API_KEY") ??
      env("RUNTIME_API_KEY") ??
      readKeyFile(env("KILN_ADMIN_KEY_FILE") ?? DEFAULT_ADMIN_KEY_FILE);
    if (this.apiKey !== undefined && /\s/.test(this.apiKey))
      throw new RuntimeError({ code: "missing_api_key", status: 0, message: "the API key contains whitespace" });
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.waitForCapacityMs = options.waitForCapacityMs ?? DEFAULT_WAIT_FOR_CAPACITY_MS;
    this.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    if (!Number.isInteger(this.maxConnections) || this.maxConnections < 1)
      throw new RangeError(`maxConnections must be a whole number >= 1, got ${String(options.maxConnections)}`);
    this.slots = new Slots(this.maxConnections);
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    let target = this.baseUrl + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v === undefined || v === null) continue;
        if (Array.isArray(v)) for (const one of v as readonly string[]) q.append(k, one);
        else q.append(k, String(v));
      }
      const s = q.toString();
      if (s) target += "?" + s;
    }
    return target;
  }

  /**
   * Sends one call and answers its 2xx response (body unread); throws the
   * matching RuntimeError otherwise. Transport failures and 429/5xx are
   * retried only when re-sending is safe: the request never left, the
   * server refused it before acting (429, `server_busy`), or the call is
   * idempotent (`retry: "safe"`: GET/PUT/DELETE, or a POST with an
   * Idempotency-Key the server deduplicates).
   */
  async send(spec: CallSpec): Promise<Answer> {
    const deadline = new Deadline(spec.signal, spec.timeoutMs ?? this.timeoutMs);
    const what = `${spec.method} ${spec.path}`;
    const headers: Record<string, string> = {
      Accept: spec.accept ?? "application/json",
      "User-Agent": this.userAgent,
      "X-Runtime-Client": `sdk-js/${VERSION}`,
    };
    if (this.apiKey) headers["Authorization"] = `Bearer ${this.apiKey}`;
    let body: string | Uint8Array | ReadableStream<Uint8Array> | undefined;
    if (spec.json !== undefined) {
      body = JSON.stringify(spec.json);
      headers["Content-Type"] = "application/json";
    } else if (spec.body !== undefined) {
      body = spec.body;
      headers["Content-Type"] = spec.contentType ?? "application/octet-stream";
    }
    if (spec.idempotencyKey) headers["Idempotency-Key"] = spec.idempotencyKey;
    Object.assign(headers, spec.headers);
    const streamBody = body instanceof ReadableStream;
    const safe = spec.retry !== "never" && !streamBody && (spec.retry === "safe" || spec.method !== "POST");
    const url = this.url(spec.path, spec.query);

    try {
      for (let attempt = 0; ; attempt++) {
        let response: Response;
        try {
          const init: RequestInit & { duplex?: "half" } = {
            method: spec.method,
            headers,
            redirect: "manual",
            signal: deadline.signal ?? null,
          };
          if (body !== undefined) init.body = body as NonNullable<RequestInit["body"]>;
          if (streamBody) init.duplex = "half";
          response = await this.fetchImpl(url, init);
        } catch (e) {
          const err = deadline.failure(e, what, spec.idempotencyKey);
          const neverSent = NOT_SENT.has(causeCode(e) ?? "");
          if (err.code !== "connection_error" || !(safe || (neverSent && !streamBody))) throw err;
          if (attempt >= this.maxRetries) throw err;
          await this.pause(backoffMs(attempt), deadline, err);
          continue;
        }
        if (response.status >= 200 && response.status < 300) return { response, deadline };
        let text = "";
        try {
          text = await response.text();
        } catch {
          // the status alone describes it
        }
        if (response.status >= 300 && response.status < 400) {
          throw new ConnectionError({
            code: "connection_error",
            status: response.status,
            message: `${what}: unexpected redirect (${response.status})`,
            requestId: response.headers.get("x-request-id") ?? undefined,
          });
        }
        const err = errorFromAnswer(response.status, text, response.headers, spec.idempotencyKey);
        const refusedBeforeActing = response.status === 429 || err.code === "server_busy";
        const transient = [429, 502, 503, 504].includes(response.status) && !DELIBERATE_CODES.has(err.code);
        if (!transient || !(safe || refusedBeforeActing) || streamBody || attempt >= this.maxRetries) throw err;
        const wait =
          err.retryAfterMs !== undefined ? jitter(Math.min(err.retryAfterMs, 30_000), 0.9, 1.1) : backoffMs(attempt);
        await this.pause(wait, deadline, err);
      }
    } catch (e) {
      deadline.done();
      throw e;
    }
  }

  /** Sleeps before a retry unless the deadline would pass first (then throws `err`). */
  private async pause(ms: number, deadline: Deadline, err: RuntimeError): Promise<void> {
    if (ms >= deadline.left()) throw err;
    try {
      await sleep(ms, deadline.signal);
    } catch (e) {
      throw deadline.failure(e, err.message);
    }
  }

  /** A call whose answer is JSON (an error-only body after a late answer throws). */
  async json<T>(spec: CallSpec): Promise<T> {
    return this.slots.run(() => this.readJson<T>(spec));
  }

  private async readJson<T>(spec: CallSpec): Promise<T> {
    const { response, deadline } = await this.send(spec);
    let text: string;
    try {
      text = await response.text();
    } catch (e) {
      throw deadline.failure(e, `${spec.method} ${spec.path}`, spec.idempotencyKey);
    } finally {
      deadline.done();
    }
    let value: unknown;
    try {
      value = text.length === 0 ? {} : JSON.parse(text);
    } catch (e) {
      throw new ConnectionError({
        code: "invalid_response",
        status: 502,
        message: `${spec.method} ${spec.path}: the answer is not JSON`,
        requestId: response.headers.get("x-request-id") ?? undefined,
        cause: e,
      });
    }
    if (
      value &&
      typeof value === "object" &&
      Object.keys(value).length === 1 &&
      "error" in value &&
      response.headers.get("runtime-late-answer") === "true"
    ) {
      const inner = (value as { error: { status?: unknown } }).error;
      const status = typeof inner.status === "number" ? inner.status : 500;
      throw errorFromAnswer(status, text, response.headers, spec.idempotencyKey);
    }
    return value as T;
  }

  /** The answer's body as bytes. */
  async bytes(spec: CallSpec): Promise<{ data: Uint8Array; headers: Headers }> {
    return this.slots.run(() => this.readBytes(spec));
  }

  private async readBytes(spec: CallSpec): Promise<{ data: Uint8Array; headers: Headers }> {
    const { response, deadline } = await this.send({ accept: "application/octet-stream", ...spec });
    try {
      return { data: new Uint8Array(await response.arrayBuffer()), headers: response.headers };
    } catch (e) {
      throw deadline.failure(e, `${spec.method} ${spec.path}`, spec.idempotencyKey);
    } finally {
      deadline.done();
    }
  }

  /** An NDJSON answer, one parsed object per line. */
  async *ndjson(spec: CallSpec): AsyncGenerator<Record<string, unknown>, void, undefined> {
    const { response, deadline } = await this.send({ accept: "application/x-ndjson", ...spec });
    const what = `${spec.method} ${spec.path}`;
    const body = response.body;
    if (!body) return;
    const decoder = new TextDecoder();
    let pending = "";
    const reader = body.getReader();
    try {
      for (;;) {
        const chunk = await reader.read().catch((e: unknown) => {
          throw deadline.failure(e, what, spec.idempotencyKey);
        });
        if (chunk.done) break;
        pending += decoder.decode(chunk.value, { stream: true });
        let nl: number;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line) yield JSON.parse(line) as Record<string, unknown>;
        }
      }
      pending += decoder.decode();
      if (pending.trim()) yield JSON.parse(pending) as Record<string, unknown>;
    } finally {
      // An early exit (break, throw) closes the stream: the server sees the
      // client leave (an exec then stops its command).
      await reader.cancel().catch(() => undefined);
      deadline.done();
    }
  }

  /** The raw 2xx response, for streaming bodies (archives, file content). */
  async stream(spec: CallSpec): Promise<Answer> {
    return this.send(spec);
  }
}

export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}
