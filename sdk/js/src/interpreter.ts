// `sbx.interpreter`: stateful Python/JavaScript contexts, like notebook kernels.
import { newIdempotencyKey } from "./client.js";
import { errorFromAnswer } from "./errors.js";
import type { Sandbox } from "./sandbox.js";

export interface ExecutionResult {
  main: boolean;
  data: Record<string, unknown>;
  refs: unknown[];
}
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}
export interface Execution {
  id: string;
  contextId: string;
  language: string;
  executionCount: number | null;
  status: "ok" | "error" | "interrupted" | "timeout" | "lost";
  stdout: string;
  stderr: string;
  results: ExecutionResult[];
  error: ExecutionError | null;
  overflow: Array<{ what: string; droppedBytes: number }>;
  durationMs: number;
  contextStarted: boolean;
  lostBytes: number;
}
export interface InterpreterContext {
  id: string;
  language: string;
  cwd: string;
  state: "running" | "busy" | "dead";
  executionCount: number | null;
  createdAt: string;
  pid: number | null;
  processId: string;
}

export interface RunOptions {
  language?: "python" | "javascript" | "typescript" | "r" | "java" | "bash";
  context?: string;
  /** Interrupt the cell after this long (default 60 000; 0 = never). */
  timeoutMs?: number;
  /** Environment variables for this run alone, put back after it. */
  env?: Record<string, string>;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (result: ExecutionResult) => void;
  onError?: (error: ExecutionError) => void;
  signal?: AbortSignal;
}

const GRACE_MS = 60_000;

export class Contexts {
  constructor(private readonly sandbox: Sandbox) {}

  async list(): Promise<InterpreterContext[]> {
    return (await this.sandbox.call<{ data: InterpreterContext[] }>({ method: "GET", path: "/interpreter/contexts" })).data;
  }

  create(options: { id?: string; language?: string; cwd?: string; env?: Record<string, string> } = {}): Promise<InterpreterContext> {
    return this.sandbox.call({
      method: "POST",
      path: "/interpreter/contexts",
      json: options,
      idempotencyKey: newIdempotencyKey(),
      retry: "safe",
    });
  }

  /** Kills the kernel and starts it again with empty state. */
  restart(id: string): Promise<InterpreterContext> {
    return this.sandbox.call({ method: "POST", path: `/interpreter/contexts/${encodeURIComponent(id)}:restart`, json: {} });
  }

  /** SIGINT to the running code (state kept); whether code was running. */
  async interrupt(id: string): Promise<boolean> {
    const r = await this.sandbox.call<{ interrupted: boolean }>({
      method: "POST",
      path: `/interpreter/contexts/${encodeURIComponent(id)}:interrupt`,
      json: {},
    });
    return r.interrupted;
  }

  async delete(id: string): Promise<boolean> {
    return (await this.sandbox.call<{ deleted: boolean }>({ method: "DELETE", path: `/interpreter/contexts/${encodeURIComponent(id)}` })).deleted;
  }

  remove(id: string): Promise<boolean> {
    return this.delete(id);
  }
}

export class Interpreter {
  readonly contexts: Contexts;

  constructor(private readonly sandbox: Sandbox) {
    this.contexts = new Contexts(sandbox);
  }

  /**
   * Runs a cell; the Execution. With a callback the run streams and output
   * reaches it as it happens. A cell's error is a result (`status: "error"`).
   */
  async run(code: string, options: RunOptions = {}): Promise<Execution> {
    const { onStdout, onStderr, onResult, onError, signal, ...fields } = options;
    const body: Record<string, unknown> = { code, ...fields };
    const timeoutMs = (options.timeoutMs === 0 ? 86_400_000 : (options.timeoutMs ?? 60_000)) + GRACE_MS;
    if (!onStdout && !onStderr && !onResult && !onError)
      return this.sandbox.call<Execution>({ method: "POST", path: "/interpreter:run", json: body, retry: "never", timeoutMs, signal });
    const events = this.sandbox.runtime.transport.ndjson({
      method: "POST",
      path: `/v1/sandboxes/${encodeURIComponent(this.sandbox.id)}/interpreter:run`,
      json: { ...body, stream: true },
      retry: "never",
      timeoutMs,
      signal,
    });
    for await (const ev of events) {
      const k = ev["k"];
      if (k === "stdout") onStdout?.(String(ev["text"] ?? ""));
      else if (k === "stderr") onStderr?.(String(ev["text"] ?? ""));
      else if (k === "result") onResult?.({ main: Boolean(ev["main"]), data: (ev["data"] ?? {}) as Record<string, unknown>, refs: (ev["refs"] ?? []) as unknown[] });
      else if (k === "error") onError?.({ name: String(ev["name"]), value: String(ev["value"]), traceback: String(ev["traceback"] ?? "") });
      else if (k === "execution") return ev["execution"] as Execution;
      else if (k === "failure") {
        const status = typeof ev["status"] === "number" ? ev["status"] : 500;
        throw errorFromAnswer(status, JSON.stringify({ error: { code: ev["code"], message: ev["message"], status } }), new Headers());
      }
    }
    throw errorFromAnswer(502, JSON.stringify({ error: { code: "stream_ended", message: "the interpreter stream ended without its execution" } }), new Headers());
  }
}
