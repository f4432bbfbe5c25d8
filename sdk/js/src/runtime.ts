// The client: `new Runtime(options)` with `sandboxes` and `snapshots`.
import { randomBytes } from "node:crypto";
import { mkdir, open, rename as renameLocal, rm } from "node:fs/promises";
import { dirname, resolve } from "node:path";

import { type CallSpec, type RuntimeOptions, Transport, backoffMs, newIdempotencyKey, sleep } from "./client.js";
import { CAPACITY_CODES, RuntimeError } from "./errors.js";
import { Images } from "./images.js";
import { Page } from "./page.js";
import { Sandbox } from "./sandbox.js";
import type {
  CreateSandbox,
  DeletedSandbox,
  Limits,
  RequestOptions,
  SandboxInfo,
  SandboxState,
  Snapshot,
} from "./types.js";

export type { RuntimeOptions } from "./client.js";
export { Page } from "./page.js";

/** The fields `create` accepts; anything else is refused before sending. */
const CREATE_FIELDS: readonly string[] = [
  "name",
  "labels",
  "env",
  "vcpu",
  "memoryMiB",
  "diskMiB",
  "timeoutSeconds",
  "onLeaseEnd",
  "maxCostMicros",
  "snapshot",
  "image",
  "network",
  "pausable",
  "idlePauseSeconds",
  "autoWake",
  "persistent",
  "pauseMemory",
  "maxTotalCostMicros",
  "sudo",
  "getOrCreate",
  "funding",
  "region",
  "volumes",
  "wait",
];

/** States on the way to running: a create with `wait` follows them. */
const ON_THE_WAY: readonly string[] = ["starting", "resuming"];
const START_WAIT_MS = 60_000;
const START_POLL_MS = 250;

export interface CreateOptions extends RequestOptions {
  /** How long to wait for room (default: the client's `waitForCapacityMs`; 0 = fail at once). */
  waitForCapacityMs?: number;
  /** Called before each wait for room with the refusal and the wait in ms. */
  onCapacityWait?: (refusal: RuntimeError, waitMs: number) => void;
  /**
   * The most one request asks the server to wait in line (`Prefer: wait=N`,
   * seconds, ≤ 120; default 120). The SDK re-sends the same request (same
   * Idempotency-Key, same body) until `waitForCapacityMs` is used up.
   */
  preferWaitSeconds?: number;
}

export interface ListFilter {
  state?: SandboxState | SandboxState[];
  /** Only the sandbox(es) of this name. */
  name?: string;
  labels?: Record<string, string>;
  includeStopped?: boolean;
  limit?: number;
  cursor?: string;
}

function closest(name: string, names: readonly string[]): string | undefined {
  const low = name.toLowerCase().replace(/[_-]/g, "");
  return names.find((n) => {
    const l = n.toLowerCase();
    return l === low || l.startsWith(low.slice(0, 4)) || low.startsWith(l.slice(0, 4));
  });
}

function checkCreateFields(input: object): void {
  for (const key of Object.keys(input)) {
    if (!CREATE_FIELDS.includes(key)) {
      const near = closest(key, CREATE_FIELDS);
      throw new TypeError(
        `sandboxes.create: unknown field '${key}'` + (near ? ` (did you mean '${near}'?)` : "") +
          `; fields: ${CREATE_FIELDS.join(", ")}`,
      );
    }
  }
}

function enc(id: string): string {
  return encodeURIComponent(id);
}

export class Sandboxes {
  constructor(private readonly runtime: Runtime) {}

  /**
   * Creates a sandbox and answers it running. Sends `Prefer: wait=N` so the
   * daemon queues the request for capacity, and one Idempotency-Key for the
   * whole logical call: a `no_capacity` / `quota_exceeded` refusal is
   * re-sent with the same key and body until `waitForCapacityMs` runs out
   * (honouring Retry-After), then thrown as a CapacityError. A `starting`
   * answer is followed until the sandbox runs (else `start_failed`).
   * `wait: false` sends no `Prefer: wait` and answers as soon as the daemon
   * does, possibly while the sandbox is still starting.
   */
  async create(input: CreateSandbox & { wait?: boolean } = {}, options: CreateOptions = {}): Promise<Sandbox> {
    checkCreateFields(input);
    const { wait = true, ...fields } = input;
    const body: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) body[k] = v;
    const t = this.runtime.transport;
    const key = options.idempotencyKey ?? newIdempotencyKey();
    const roomMs = Math.max(0, options.waitForCapacityMs ?? t.waitForCapacityMs);
    const roomUntil = Date.now() + roomMs;
    const cap = Math.min(120, Math.max(0, options.preferWaitSeconds ?? 120));
    for (let n = 0; ; n++) {
      const left = roomUntil - Date.now();
      const preferSeconds = Math.min(cap, Math.max(0, Math.ceil(left / 1000)));
      const spec: CallSpec = {
        method: "POST",
        path: "/v1/sandboxes",
        json: body,
        idempotencyKey: key,
        retry: "safe",
        signal: options.signal,
        // The time spent in line is added to the call's deadline, not taken from it.
        timeoutMs: (options.timeoutMs ?? t.timeoutMs) === 0 ? 0 : (options.timeoutMs ?? t.timeoutMs) + preferSeconds * 1000,
      };
      if (wait) spec.headers = { Prefer: `wait=${preferSeconds}` };
      try {
        const info = await t.json<SandboxInfo>(spec);
        const sbx = new Sandbox(this.runtime, info);
        return wait ? await this.untilRunning(sbx, options) : sbx;
      } catch (e) {
        if (!(e instanceof RuntimeError) || !CAPACITY_CODES.has(e.code) || e.details?.["field"] === "count") throw e;
        const remaining = roomUntil - Date.now();
        if (remaining <= 0) throw e;
        const pause = Math.min(remaining, e.retryAfterMs ?? backoffMs(n + 1));
        options.onCapacityWait?.(e, pause);
        try {
          await sleep(pause, options.signal);
        } catch (abort) {
          throw new RuntimeError({ code: "cancelled", status: 0, message: "create: cancelled", idempotencyKey: key, cause: abort });
        }
      }
    }
  }

  private async untilRunning(sbx: Sandbox, options: RequestOptions): Promise<Sandbox> {
    const until = Date.now() + START_WAIT_MS;
    while (ON_THE_WAY.includes(sbx.state) && Date.now() < until) {
      await sleep(START_POLL_MS, options.signal);
      await sbx.refresh({ signal: options.signal });
    }
    if (sbx.state !== "running")
      throw new RuntimeError({
        code: "start_failed",
        status: 0,
        message: `sandbox ${sbx.id} did not start (state ${sbx.state})`,
        details: { sandboxId: sbx.id, state: sbx.state, stopReason: sbx.info.stopReason },
      });
    return sbx;
  }

  /**
   * The live sandbox called `name` (woken if paused; `info.reused` is true),
   * or a new one made from `input` (which applies only when creating).
   */
  async getOrCreate(
    name: string,
    input: Omit<CreateSandbox, "name" | "getOrCreate"> & { wait?: boolean } = {},
    options: CreateOptions = {},
  ): Promise<Sandbox> {
    if (!name) throw new TypeError("getOrCreate needs a name");
    return this.create({ ...input, name, getOrCreate: true }, options);
  }

  async get(id: string, options: RequestOptions = {}): Promise<Sandbox> {
    const info = await this.runtime.transport.json<SandboxInfo>({
      method: "GET",
      path: `/v1/sandboxes/${enc(id)}`,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return new Sandbox(this.runtime, info);
  }

  /** Sandboxes, oldest first; stopped ones only with `includeStopped` or `state: "stopped"`. */
  async list(filter: ListFilter = {}, options: RequestOptions = {}): Promise<Page<Sandbox>> {
    const states = filter.state === undefined ? undefined : Array.isArray(filter.state) ? filter.state : [filter.state];
    const labels = filter.labels ? Object.entries(filter.labels).map(([k, v]) => `${k}:${v}`) : undefined;
    const fetchPage = async (cursor: string | undefined): Promise<Page<Sandbox>> => {
      const answer = await this.runtime.transport.json<{ data: SandboxInfo[]; nextCursor?: string | null }>({
        method: "GET",
        path: "/v1/sandboxes",
        query: {
          state: states,
          label: labels,
          includeStopped: filter.includeStopped ? "true" : undefined,
          name: filter.name,
          limit: filter.limit,
          cursor,
        },
        signal: options.signal,
        timeoutMs: options.timeoutMs,
      });
      return new Page(
        answer.data.map((info) => new Sandbox(this.runtime, info)),
        answer.nextCursor ?? null,
        fetchPage,
      );
    };
    return fetchPage(filter.cursor);
  }

  /** Stops and forgets a sandbox; idempotent. */
  async delete(id: string, options: RequestOptions = {}): Promise<DeletedSandbox> {
    return this.runtime.transport.json<DeletedSandbox>({
      method: "DELETE",
      path: `/v1/sandboxes/${enc(id)}`,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }
}

export class Snapshots {
  constructor(private readonly runtime: Runtime) {}

  async get(id: string, options: RequestOptions = {}): Promise<Snapshot> {
    return this.runtime.transport.json<Snapshot>({
      method: "GET",
      path: `/v1/snapshots/${enc(id)}`,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  async list(filter: { sandboxId?: string; name?: string } = {}, options: RequestOptions = {}): Promise<Page<Snapshot>> {
    const fetchPage = async (cursor: string | undefined): Promise<Page<Snapshot>> => {
      const answer = await this.runtime.transport.json<{ data: Snapshot[]; nextCursor?: string | null }>({
        method: "GET",
        path: "/v1/snapshots",
        query: { sandboxId: filter.sandboxId, name: filter.name, cursor },
        signal: options.signal,
        timeoutMs: options.timeoutMs,
      });
      return new Page(answer.data, answer.nextCursor ?? null, fetchPage);
    };
    return fetchPage(undefined);
  }

  async delete(id: string, options: RequestOptions = {}): Promise<Snapshot> {
    return this.runtime.transport.json<Snapshot>({
      method: "POST",
      path: `/v1/snapshots/${enc(id)}:delete`,
      json: {},
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** Keeps `size` restored copies of the snapshot ready for creates (0 turns the pool off). */
  async pool(id: string, size: number, options: RequestOptions = {}): Promise<Snapshot> {
    return this.runtime.transport.json<Snapshot>({
      method: "POST",
      path: `/v1/snapshots/${enc(id)}:pool`,
      json: { size },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /**
   * Writes the snapshot as a tar (its checkpoint and checksums) to `path`, for
   * `import` on another kilnd; a snapshot of an image carries its layers,
   * but those named in `skipLayers` (sha256s the receiver's `layers()` gives)
   * are listed, not sent. The file is written under a temporary name,
   * length-checked, then renamed: it appears only once whole. Returns `path`.
   */
  async export(
    id: string,
    path: string,
    options: RequestOptions & { skipLayers?: string[] } = {},
  ): Promise<string> {
    const target = resolve(path);
    await mkdir(dirname(target), { recursive: true });
    const partial = `${target}.kiln-partial-${randomBytes(4).toString("hex")}`;
    const { response, deadline } = await this.runtime.transport.stream({
      method: "GET",
      path:
        `/v1/snapshots/${enc(id)}/archive` +
        (options.skipLayers?.length
          ? `?skipLayers=${[...new Set(options.skipLayers)].sort().join(",")}`
          : ""),
      accept: "application/x-tar",
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? 0,
    });
    const expected = Number(response.headers.get("x-content-length") ?? NaN);
    let received = 0;
    const fh = await open(partial, "w", 0o600);
    try {
      if (response.body) {
        const reader = response.body.getReader();
        for (;;) {
          const r = await reader.read();
          if (r.done) break;
          await fh.write(r.value);
          received += r.value.length;
        }
      }
      await fh.close();
    } catch (e) {
      await fh.close().catch(() => undefined);
      await rm(partial, { force: true });
      throw deadline.failure(e, `export snapshot ${id}`);
    } finally {
      deadline.done();
    }
    if (Number.isFinite(expected) && expected !== received) {
      await rm(partial, { force: true });
      throw new RuntimeError({
        code: "download_incomplete",
        status: 0,
        message: `snapshot ${id}: received ${received} of ${expected} bytes`,
        details: { received, expected },
      });
    }
    await renameLocal(partial, target);
    return path;
  }

  /**
   * Imports a tar written by `export` (here or on another kilnd) as this key's
   * snapshot, keeping its id, name, labels and network rules. kilnd checks
   * every checksum before it answers; the same snapshot imported again answers
   * its record. The file is streamed, never read whole.
   */
  /** The sha256s of the image layers this kilnd holds, which an export for it may skip (admin key). */
  async layers(options: RequestOptions = {}): Promise<string[]> {
    const found = await this.runtime.transport.json<{ layers: { sha256: string }[] }>({
      method: "GET",
      path: "/v1/images:layers",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return [...new Set(found.layers.map((l) => l.sha256))].sort();
  }

  async import(path: string, options: RequestOptions = {}): Promise<Snapshot> {
    const fh = await open(path, "r");
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const buf = new Uint8Array(1 << 20);
        try {
          const { bytesRead } = await fh.read(buf, 0, buf.length, null);
          if (bytesRead === 0) {
            await fh.close();
            controller.close();
          } else {
            controller.enqueue(buf.subarray(0, bytesRead));
          }
        } catch (e) {
          await fh.close().catch(() => undefined);
          controller.error(e);
        }
      },
      async cancel() {
        await fh.close().catch(() => undefined);
      },
    });
    try {
      return await this.runtime.transport.json<Snapshot>({
        method: "POST",
        path: "/v1/snapshots:import",
        body,
        contentType: "application/x-tar",
        retry: "never",
        signal: options.signal,
        timeoutMs: options.timeoutMs ?? 0,
      });
    } finally {
      await fh.close().catch(() => undefined);
    }
  }
}

/** `runtime.limits`: what this key may spend. */
export class LimitsClient {
  constructor(private readonly runtime: Runtime) {}

  /** `{access, daily: {limitMicros, usedMicros, remainingMicros, window}, trial}` (no trial locally). */
  async get(options: RequestOptions = {}): Promise<Limits> {
    return this.runtime.transport.json<Limits>({
      method: "GET",
      path: "/v1/limits",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }
}

export class Runtime {
  readonly transport: Transport;
  readonly sandboxes: Sandboxes;
  readonly snapshots: Snapshots;
  readonly images: Images;
  readonly limits: LimitsClient;

  constructor(options: RuntimeOptions = {}) {
    this.transport = new Transport(options);
    this.sandboxes = new Sandboxes(this);
    this.snapshots = new Snapshots(this);
    this.images = new Images(this);
    this.limits = new LimitsClient(this);
  }

  /** The daemon origin calls go to. */
  get apiUrl(): string {
    return this.transport.baseUrl;
  }

  /** `GET /v1/health` (no key needed). */
  async health(options: RequestOptions = {}): Promise<{ ok: boolean; version: string; [k: string]: unknown }> {
    return this.transport.json({ method: "GET", path: "/v1/health", signal: options.signal, timeoutMs: options.timeoutMs });
  }

  /** `GET /v1/usage`: spend totals (`from`/`to` RFC 3339, `groupBy` key|label). */
  async usage(
    query: { from?: string; to?: string; groupBy?: "key" | "label"; label?: string } = {},
    options: RequestOptions = {},
  ): Promise<Record<string, unknown>> {
    return this.transport.json({ method: "GET", path: "/v1/usage", query, signal: options.signal, timeoutMs: options.timeoutMs });
  }
}

let defaultRuntime: Runtime | undefined;

/** The client static helpers use when none is given (configured from the environment). */
export function defaultClient(): Runtime {
  defaultRuntime ??= new Runtime();
  return defaultRuntime;
}
