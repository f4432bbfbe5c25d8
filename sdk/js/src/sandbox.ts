// A sandbox: commands, background processes, lifecycle, snapshots, forks,
// network rules. `await using sbx = await Sandbox.create()` stops it at the
// end of the scope.
import { type CallSpec, newIdempotencyKey } from "./client.js";
import { DEFAULT_EXEC_TIMEOUT_MS, EXEC_GRACE_MS, MAX_EXEC_TIMEOUT_MS } from "./contract.js";
import { CommandError, ConnectionError, RuntimeError } from "./errors.js";
import { Collector, b64, toEvent } from "./events.js";
import { Files } from "./files.js";
import { Interpreter } from "./interpreter.js";
import { Network } from "./network.js";
import { Ports } from "./ports.js";
import { Previews } from "./previews.js";
import { type ForwardOptions, PortForward } from "./tunnel.js";
import { Process, Processes } from "./process.js";
import type { Page } from "./page.js";
import { type CreateOptions, type ListFilter, type Runtime, defaultClient } from "./runtime.js";
import type {
  CommandResult,
  CreateSandbox,
  DeletedSandbox,
  MetricsRange,
  NetworkRules,
  OutputEvent,
  ProcessInfo,
  RequestOptions,
  SandboxInfo,
  SandboxMetrics,
  SandboxStart,
  SandboxState,
  Snapshot,
} from "./types.js";

/** A command: a string runs under `bash -c`, an array runs directly (no shell). */
export type Command = string | readonly string[];

export interface ExecOptions extends RequestOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** Written to the command's stdin, then closed (text, or bytes sent as base64). */
  stdin?: string | Uint8Array;
  /** Kill the command after this long (default 60 000; streamed: 86 400 000). */
  timeoutMs?: number;
  /** Throw a CommandError when the command exits non-zero or times out. */
  check?: boolean;
  /**
   * Output as it comes (switches to a streamed exec, not capped). Without
   * callbacks the answer keeps at most 64 KiB of stdout and of stderr, or
   * 1 MiB when `timeoutMs` is over 60 s (`execOutputCap`).
   */
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** Stream even without callbacks. */
  stream?: boolean;
  /**
   * kiln's own: kill the command as soon as stdout or stderr passes the
   * answer's 64 KiB cap, instead of reading and dropping the rest (JSON
   * answers only).
   */
  stopAtOutputCap?: boolean;
}

export interface SpawnOptions extends RequestOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** "pipe" keeps stdin open for `process.write`; a string is written, then closed. */
  stdin?: "pipe" | string;
  /** Kill the process after this long (default: never). */
  timeoutMs?: number;
  /** Run it on a terminal: true (80x24) or its size; `process.resize` changes it. */
  pty?: boolean | { cols: number; rows: number };
  /** "root" runs it as root (the key's holder only); default the sandbox's user. */
  user?: string;
}

/** What `update` changes; what is left out stays. `null` removes a name, an env variable or the cap. */
export interface SandboxSettings {
  name?: string | null;
  labels?: Record<string, string>;
  env?: Record<string, string | null>;
  autoWake?: boolean;
  idlePauseSeconds?: number;
  persistent?: boolean;
  maxTotalCostMicros?: number | null;
}

export interface SnapshotOptions extends RequestOptions {
  name?: string;
  labels?: Record<string, string>;
  retentionDays?: number;
  /** "memory" (default: files, memory, processes) or "disk" (files only; copies boot fresh). */
  mode?: "memory" | "disk";
}

export interface ForkOptions extends RequestOptions {
  count?: number;
  /** The copies are called name, name-1, name-2, ... */
  name?: string;
  /** Accepted for the public API's sake and not sent: a local daemon has no trial. */
  funding?: "trial" | "paid";
  labels?: Record<string, string>;
  keepSnapshot?: boolean;
  /** Egress rules of the copies; default: this sandbox's. */
  network?: NetworkRules;
}

/** A streamed exec is not limited unless asked: the longest timeout the API allows. */
const STREAMED_EXEC_TIMEOUT_MS = MAX_EXEC_TIMEOUT_MS;

function enc(id: string): string {
  return encodeURIComponent(id);
}

function commandFields(command: Command): Record<string, unknown> {
  if (typeof command === "string") return { command };
  if (Array.isArray(command) && command.every((a) => typeof a === "string")) return { argv: [...command] };
  throw new TypeError("a command is a string (run by bash -c) or an array of strings (argv)");
}

function commandText(command: Command): string {
  return typeof command === "string" ? command : command.join(" ");
}

function checkResult(command: Command, r: CommandResult, requestId?: string): CommandResult {
  if (!r.timedOut && r.exitCode === 0) return r;
  const tail = r.stderr.slice(-500);
  const how = r.timedOut ? "timed out" : r.exitCode === null ? `was killed (${r.signal ?? "signal"})` : `exited with ${r.exitCode}`;
  throw new CommandError({
    code: r.timedOut ? "command_timeout" : "command_failed",
    status: 0,
    message: `command ${how}: ${commandText(command).slice(0, 200)}` + (tail ? `\n${tail}` : ""),
    requestId,
    details: { processId: r.processId },
    exitCode: r.exitCode,
    stdout: r.stdout,
    stderr: r.stderr,
    timedOut: r.timedOut,
  });
}

function num(v: unknown, fallback = 0): number {
  return typeof v === "number" ? v : fallback;
}

export class Sandbox implements AsyncDisposable {
  readonly runtime: Runtime;
  readonly files: Files;
  readonly processes: Processes;
  readonly network: Network;
  readonly ports: Ports;
  readonly previews: Previews;
  readonly interpreter: Interpreter;
  #info: SandboxInfo;
  /** The image start command's outcome; only the create answer carries it, so it is kept here. */
  readonly start: SandboxStart | undefined;

  constructor(runtime: Runtime, info: SandboxInfo) {
    this.runtime = runtime;
    this.#info = info;
    this.start = (info["start"] as SandboxStart | undefined) ?? undefined;
    this.files = new Files(runtime.transport, info.id);
    this.processes = new Processes(this);
    this.network = new Network(this);
    this.ports = new Ports(runtime.transport, `/v1/sandboxes/${enc(info.id)}`);
    this.previews = new Previews(this);
    this.interpreter = new Interpreter(this);
  }

  /**
   * Listens on `host:localPort` (default 127.0.0.1 and the same port; 0
   * picks a free one, see `localPort`) and carries each connection to `port`
   * inside the sandbox over the tunnel WebSocket, until `close()`.
   */
  forwardPort(port: number, options: ForwardOptions = {}): Promise<PortForward> {
    return PortForward.open(this.runtime.transport, `/v1/sandboxes/${enc(this.id)}`, port, options);
  }

  /** Creates a sandbox with `options.client` (default: a Runtime configured from the environment). */
  static async create(
    input: CreateSandbox & { wait?: boolean } = {},
    options: CreateOptions & { client?: Runtime } = {},
  ): Promise<Sandbox> {
    const { client, ...rest } = options;
    return (client ?? defaultClient()).sandboxes.create(input, rest);
  }

  /** The sandbox with this id (NotFoundError if there is none). */
  static async connect(id: string, options: RequestOptions & { client?: Runtime } = {}): Promise<Sandbox> {
    const { client, ...rest } = options;
    return (client ?? defaultClient()).sandboxes.get(id, rest);
  }

  /** The live sandbox called `name` (woken if paused), or a new one made from `input`. */
  static async getOrCreate(
    name: string,
    input: Omit<CreateSandbox, "name" | "getOrCreate"> & { wait?: boolean } = {},
    options: CreateOptions & { client?: Runtime } = {},
  ): Promise<Sandbox> {
    const { client, ...rest } = options;
    return (client ?? defaultClient()).sandboxes.getOrCreate(name, input, rest);
  }

  static async list(filter: ListFilter = {}, options: { client?: Runtime } = {}): Promise<Page<Sandbox>> {
    return (options.client ?? defaultClient()).sandboxes.list(filter);
  }

  get id(): string {
    return this.#info.id;
  }

  /** The last answer about this sandbox. */
  get info(): SandboxInfo {
    return this.#info;
  }

  /** starting, running, pausing, paused, resuming, stopping or stopped (as last seen). */
  get state(): SandboxState {
    return this.#info.state;
  }

  get paused(): boolean {
    return this.#info.state === "paused" || this.#info.state === "pausing";
  }

  toJSON(): SandboxInfo {
    return this.#info;
  }

  private get t() {
    return this.runtime.transport;
  }

  /** @internal a call on this sandbox's routes. */
  call<T>(spec: Omit<CallSpec, "path"> & { path: string }): Promise<T> {
    return this.t.json<T>({ ...spec, path: `/v1/sandboxes/${enc(this.id)}${spec.path}` });
  }

  private async lifecycle(
    verb: string,
    body: Record<string, unknown>,
    options: RequestOptions & { wait?: boolean },
  ): Promise<SandboxInfo> {
    const info = await this.call<SandboxInfo>({
      method: "POST",
      path: `:${verb}`,
      json: body,
      ...(options.wait === true ? { headers: { Prefer: "wait=60" } } : {}),
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    this.#info = info;
    return info;
  }

  async refresh(options: RequestOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.call<SandboxInfo>({ method: "GET", path: "", signal: options.signal, timeoutMs: options.timeoutMs });
    return this.#info;
  }

  /**
   * Runs a command to completion: `exec("echo hi | wc -c")` (bash -c) or
   * `exec(["python3", "-c", "print(1)"])` (no shell). A timeout is a result
   * (`timedOut: true`), not an error, unless `check` is set.
   */
  async exec(command: Command, options: ExecOptions = {}): Promise<CommandResult> {
    // A long timeout stays a JSON answer: its cap is 1 MiB per stream then.
    const streamed = options.stream === true || options.onStdout !== undefined || options.onStderr !== undefined;
    if (streamed) {
      const started = Date.now();
      const c = new Collector(options.onStdout, options.onStderr);
      for await (const ev of this.execStream(command, options)) c.add(ev);
      const r = c.result(Date.now() - started);
      return options.check ? checkResult(command, r) : r;
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
    const raw = await this.call<CommandResult>({
      method: "POST",
      path: ":exec",
      json: this.execBody(command, options, false),
      idempotencyKey: options.idempotencyKey,
      retry: "never",
      signal: options.signal,
      timeoutMs: timeoutMs + EXEC_GRACE_MS,
    });
    const r: CommandResult = {
      ...raw,
      signal: raw.signal ?? null,
      stdoutTruncated: raw.stdoutTruncated === true,
      stderrTruncated: raw.stderrTruncated === true,
      timedOut: raw.timedOut === true,
      durationMs: num(raw.durationMs),
    };
    return options.check ? checkResult(command, r) : r;
  }

  private execBody(command: Command, o: ExecOptions, stream: boolean): Record<string, unknown> {
    const body: Record<string, unknown> = commandFields(command);
    if (o.cwd !== undefined) body["cwd"] = o.cwd;
    if (o.env !== undefined) body["env"] = o.env;
    if (typeof o.stdin === "string") body["stdin"] = o.stdin;
    else if (o.stdin instanceof Uint8Array) body["stdinBase64"] = b64(o.stdin);
    const timeoutMs = o.timeoutMs ?? (stream ? STREAMED_EXEC_TIMEOUT_MS : undefined);
    if (timeoutMs !== undefined) body["timeoutMs"] = timeoutMs;
    if (stream) body["stream"] = true;
    else if (o.stopAtOutputCap) body["stopAtOutputCap"] = true;
    return body;
  }

  /**
   * Runs a command and yields its events as they come: `start`, `stdout` /
   * `stderr` (`data`, `offset`), `exit`. An `error` event is thrown. Leaving
   * the loop early disconnects, which stops the command.
   */
  async *execStream(command: Command, options: ExecOptions = {}): AsyncGenerator<OutputEvent, void, undefined> {
    const timeoutMs = options.timeoutMs ?? STREAMED_EXEC_TIMEOUT_MS;
    let processId: string | undefined;
    let exited = false;
    for await (const raw of this.t.ndjson({
      method: "POST",
      path: `/v1/sandboxes/${enc(this.id)}:exec`,
      json: this.execBody(command, options, true),
      idempotencyKey: options.idempotencyKey,
      retry: "never",
      signal: options.signal,
      timeoutMs: timeoutMs + EXEC_GRACE_MS,
    })) {
      const ev = toEvent(raw);
      if (ev.type === "start") processId = ev.processId;
      if (ev.type === "exit") exited = true;
      yield ev;
    }
    if (!exited)
      throw new ConnectionError({
        code: "connection_error",
        status: 0,
        message: "the command's output stream ended before its exit",
        details: { sandboxId: this.id, processId },
      });
  }

  /** Starts a background process (it outlives the call; see `Process`). */
  async spawn(command: Command, options: SpawnOptions = {}): Promise<Process> {
    const body: Record<string, unknown> = commandFields(command);
    if (options.cwd !== undefined) body["cwd"] = options.cwd;
    if (options.env !== undefined) body["env"] = options.env;
    if (options.stdin !== undefined) body["stdinMode"] = "pipe";
    if (options.timeoutMs !== undefined) body["timeoutMs"] = options.timeoutMs;
    if (options.pty) body["pty"] = options.pty === true ? true : { cols: options.pty.cols, rows: options.pty.rows };
    if (options.user !== undefined) body["user"] = options.user;
    const info = await this.call<ProcessInfo>({
      method: "POST",
      path: "/processes",
      json: body,
      idempotencyKey: options.idempotencyKey,
      retry: options.idempotencyKey ? "safe" : "never",
      signal: options.signal,
    });
    const p = new Process(this, info);
    if (options.stdin !== undefined && options.stdin !== "pipe") await p.write(options.stdin, { eof: true });
    return p;
  }

  /**
   * Stops the sandbox (synchronous in kilnd: when it answers nothing of it
   * remains); `wait: false` only leaves out `Prefer: wait`.
   */
  async stop(options: RequestOptions & { wait?: boolean } = {}): Promise<SandboxInfo> {
    return this.lifecycle("stop", {}, { ...options, wait: options.wait ?? true });
  }

  /**
   * Freezes the sandbox (processes, memory, files kept); `memory: false`
   * keeps only its files, and its wake boots afresh on them. 409
   * `not_running` / `not_pausable`.
   */
  async pause(options: RequestOptions & { wait?: boolean; memory?: boolean } = {}): Promise<SandboxInfo> {
    const { memory, ...rest } = options;
    return this.lifecycle("pause", memory === undefined ? {} : { memory }, { ...rest, wait: rest.wait ?? true });
  }

  /**
   * Its resource use over `range` (15m, 1h, 6h, 24h, 7d, 30d): the meter's
   * readings (every 5 s) as `{latest, points}`, means and peaks per point.
   */
  async metrics(options: RequestOptions & { range?: MetricsRange } = {}): Promise<SandboxMetrics> {
    return this.call<SandboxMetrics>({
      method: "GET",
      path: "/metrics",
      query: { range: options.range ?? "15m" },
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /**
   * Resumes a paused sandbox (same id); `timeoutSeconds` asks for a new
   * lease. Already awake (409 `not_paused`) is success unless a new lease
   * was asked for.
   */
  async wake(options: RequestOptions & { wait?: boolean; timeoutSeconds?: number } = {}): Promise<SandboxInfo> {
    const { timeoutSeconds, ...rest } = options;
    try {
      return await this.lifecycle("wake", timeoutSeconds === undefined ? {} : { timeoutSeconds }, {
        ...rest,
        wait: rest.wait ?? true,
      });
    } catch (e) {
      if (!(e instanceof RuntimeError) || e.code !== "not_paused" || timeoutSeconds !== undefined) throw e;
      return this.refresh({ signal: options.signal, timeoutMs: options.timeoutMs });
    }
  }

  /** Changes its settings (`SandboxSettings`); commands started afterwards see a new env. */
  async update(settings: SandboxSettings, options: RequestOptions = {}): Promise<SandboxInfo> {
    const info = await this.call<SandboxInfo>({
      method: "POST",
      path: ":update",
      json: settings,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    this.#info = info;
    return info;
  }

  /** Moves the lease end to max(expiresAt, now) + seconds (at most kilnd's --max-lease-seconds ahead: a day by default). */
  async extend(seconds: number, options: RequestOptions = {}): Promise<SandboxInfo> {
    return this.lifecycle("extend", { seconds }, options);
  }

  /** Stops the sandbox and forgets it (a later get is a NotFoundError). */
  async delete(options: RequestOptions = {}): Promise<DeletedSandbox> {
    const answer = await this.runtime.sandboxes.delete(this.id, options);
    this.#info = { ...this.#info, state: "stopped" };
    return answer;
  }

  /** Captures files, memory and processes while the sandbox keeps running. */
  async snapshot(options: SnapshotOptions = {}): Promise<Snapshot> {
    const body: Record<string, unknown> = {};
    if (options.name !== undefined) body["name"] = options.name;
    if (options.labels !== undefined) body["labels"] = options.labels;
    if (options.retentionDays !== undefined) body["retentionDays"] = options.retentionDays;
    if (options.mode !== undefined) body["mode"] = options.mode;
    return this.call<Snapshot>({
      method: "POST",
      path: ":snapshot",
      json: body,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /**
   * Copies of this sandbox (same files, memory, processes): one Sandbox
   * without `count`, an array with it.
   */
  fork(options?: Omit<ForkOptions, "count">): Promise<Sandbox>;
  fork(options: ForkOptions & { count: number }): Promise<Sandbox[]>;
  async fork(options: ForkOptions = {}): Promise<Sandbox | Sandbox[]> {
    const body: Record<string, unknown> = {};
    if (options.count !== undefined) body["count"] = options.count;
    if (options.name !== undefined) body["name"] = options.name;
    if (options.labels !== undefined) body["labels"] = options.labels;
    if (options.keepSnapshot !== undefined) body["keepSnapshot"] = options.keepSnapshot;
    if (options.network !== undefined) body["network"] = options.network;
    const answer = await this.call<{ sandboxes: SandboxInfo[] }>({
      method: "POST",
      path: ":fork",
      json: body,
      headers: { Prefer: "wait=60" },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? this.t.timeoutMs + 60_000,
    });
    const copies = answer.sandboxes.map((info) => new Sandbox(this.runtime, info));
    if (options.count !== undefined) return copies;
    const [only] = copies;
    if (!only) throw new RuntimeError({ code: "fork_failed", status: 0, message: "the fork answered no sandbox" });
    return only;
  }

  /** `await using sbx = ...`: stops the sandbox at the end of the scope (errors ignored). */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#info.state === "stopped") return;
    try {
      await this.stop({ wait: false });
    } catch {
      // best effort: the lease stops it anyway
    }
  }
}
