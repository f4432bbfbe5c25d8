// Output events of commands and processes: NDJSON lines to typed events
// (an `error` line is thrown), and events folded into a CommandResult.
import { errorClassFor } from "./errors.js";
import type { CommandResult, OutputEvent } from "./types.js";

export function b64(data: Uint8Array): string {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64");
}

/** Converts one NDJSON event (throws on an `error` event). */
export function toEvent(raw: Record<string, unknown>): OutputEvent {
  if (raw["type"] === "error") {
    const e = (raw["error"] ?? {}) as Record<string, unknown>;
    const code = typeof e["code"] === "string" ? e["code"] : "stream_error";
    const status = typeof e["status"] === "number" ? e["status"] : code === "not_running" ? 409 : 500;
    const Cls = errorClassFor(status, code);
    throw new Cls({
      code,
      status,
      message: typeof e["message"] === "string" ? e["message"] : "the stream failed",
      requestId: typeof e["requestId"] === "string" ? e["requestId"] : undefined,
    });
  }
  return raw as unknown as OutputEvent;
}

/** Folds output events into a CommandResult. */
export class Collector {
  stdout = "";
  stderr = "";
  truncated = false;
  processId: string | undefined;
  exit: Extract<OutputEvent, { type: "exit" }> | undefined;

  constructor(
    private readonly onStdout?: (t: string) => void,
    private readonly onStderr?: (t: string) => void,
  ) {}

  add(ev: OutputEvent): void {
    switch (ev.type) {
      case "start":
        this.processId = ev.processId;
        break;
      case "stdout":
      case "stderr": {
        const text = ev.base64 ? Buffer.from(ev.data, "base64").toString("utf8") : ev.data;
        if (ev.type === "stdout") {
          this.stdout += text;
          this.onStdout?.(text);
        } else {
          this.stderr += text;
          this.onStderr?.(text);
        }
        break;
      }
      case "truncated":
        this.truncated = true;
        break;
      case "exit":
        this.exit = ev;
        break;
    }
  }

  result(durationMs?: number): CommandResult {
    const exit = this.exit;
    if (!exit) throw new Error("no exit event");
    const r: CommandResult = {
      exitCode: exit.exitCode ?? null,
      signal: exit.signal ?? null,
      stdout: this.stdout,
      stderr: this.stderr,
      timedOut: exit.timedOut === true,
      stdoutTruncated: this.truncated,
      stderrTruncated: this.truncated,
      durationMs: exit.durationMs ?? durationMs ?? 0,
    };
    if (this.processId !== undefined) r.processId = this.processId;
    return r;
  }
}
