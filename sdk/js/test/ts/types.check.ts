// Compile-time checks of the public types (tsc fails on a mismatch; never run).
import {
  AuthError,
  CapacityError,
  type CommandResult,
  NotFoundError,
  type OutputEvent,
  Runtime,
  RuntimeError,
  Sandbox,
  type SandboxInfo,
  type Snapshot,
} from "kiln";
import { Runtime as RuntimeAlias } from "withruntime";

export async function typesCheck(): Promise<void> {
  const runtime: Runtime = new RuntimeAlias({ apiUrl: "http://127.0.0.1:7070", apiKey: "k", waitForCapacityMs: 0 });
  const sbx: Sandbox = await runtime.sandboxes.create(
    { vcpu: 1, memoryMiB: 512, timeoutSeconds: 600, labels: { a: "b" }, maxCostMicros: 10 },
    { waitForCapacityMs: 5000, onCapacityWait: (e: RuntimeError, ms: number) => void [e.code, ms] },
  );
  const r: CommandResult = await sbx.exec(["true"], { stdin: new Uint8Array([1]), env: { A: "1" }, cwd: "/tmp", timeoutMs: 5, check: true });
  const code: number | null = r.exitCode;
  for await (const ev of sbx.execStream("echo")) {
    const e: OutputEvent = ev;
    if (e.type === "stdout") void e.data.length;
  }
  const one: Sandbox = await sbx.fork();
  const many: Sandbox[] = await sbx.fork({ count: 2 });
  const snap: Snapshot = await sbx.snapshot({ name: "n", retentionDays: 7 });
  const info: SandboxInfo = await sbx.extend(60);
  const text: string = await sbx.files.readText("/workspace/x");
  const bytes: Uint8Array = await sbx.files.readBytes("/workspace/x");
  await sbx.files.upload(".", "/workspace/app");
  await sbx.network.set({ internet: false });
  const p = await sbx.spawn("sleep 1", { stdin: "pipe" });
  const waited: CommandResult = await p.wait();
  const isAuth: boolean = new AuthError({ code: "unauthorized", status: 401, message: "" }) instanceof RuntimeError;
  const isCap: boolean = new CapacityError({ code: "no_capacity", status: 409, message: "" }).retryable;
  const nf: string | undefined = new NotFoundError({ code: "not_found", status: 404, message: "", requestId: "r" }).requestId;
  void [code, one, many, snap, info, text, bytes, waited, isAuth, isCap, nf];
  // @ts-expect-error: `count` makes fork answer an array
  const wrong: Sandbox = await sbx.fork({ count: 2 });
  void wrong;
  await sbx[Symbol.asyncDispose]();
}
