#!/usr/bin/env node
// kiln-js: the SDK's command line.
//   kiln-js sandbox run [create options] [--keep] [--timeout S] [--no-stream] [--json] -- CMD...
//   kiln-js sandbox create [create options]          prints the id
//   kiln-js sandbox exec ID [--cwd D] [--env K=V]... [--timeout S] [--json] -- CMD...
//   kiln-js sandbox ls [--all] [--state S] [--label k=v]... [--json]
//   kiln-js sandbox get ID | stop ID | extend ID SECONDS
import { MAX_EXEC_TIMEOUT_MS } from "./contract.js";
import { RuntimeError } from "./errors.js";
import { type CreateOptions, Runtime } from "./runtime.js";
import type { Sandbox } from "./sandbox.js";
import type { CommandResult, CreateSandbox, SandboxState } from "./types.js";
import { VERSION } from "./version.js";

class UsageError extends Error {}

const USAGE = `kiln-js ${VERSION}: kiln sandboxes from the command line

Usage:
  kiln-js sandbox run [create options] [--keep] [--timeout S] [--no-stream] [--json] -- CMD [ARG...]
      create a sandbox, run CMD (output streamed), stop it, exit with CMD's code
      (--timeout limits the command: exit 124 when it runs out)
  kiln-js sandbox create [create options]       print the new sandbox's id
  kiln-js sandbox exec ID [--cwd D] [--env K=V]... [--timeout S] [--json] -- CMD [ARG...]
  kiln-js sandbox ls [--all] [--state S] [--label k=v]... [--json]
  kiln-js sandbox get ID
  kiln-js sandbox stop ID
  kiln-js sandbox extend ID SECONDS

Create options: --vcpu N  --memory MiB  --disk MiB  --lease SECONDS  --name N
  --label k=v (repeat)  --env K=V (repeat)  --snapshot ID  --max-cost-micros N
  --wait-for-capacity SECONDS (default 120)

Environment: KILN_API_URL / RUNTIME_API_URL (default http://127.0.0.1:7070),
  KILN_API_KEY / RUNTIME_API_KEY, else the key in KILN_ADMIN_KEY_FILE
  (default /var/lib/kiln/admin.key) when readable.
`;

interface Parsed {
  positional: string[];
  options: Map<string, string[]>;
  command: string[] | undefined;
}

const FLAGS = new Set(["--keep", "--no-stream", "--json", "--all", "--help", "-h"]);

function parse(args: string[]): Parsed {
  const out: Parsed = { positional: [], options: new Map(), command: undefined };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "--") {
      out.command = args.slice(i + 1);
      break;
    }
    if (a.startsWith("-")) {
      let name = a;
      let value: string | undefined;
      const eq = a.indexOf("=");
      if (a.startsWith("--") && eq > 0) {
        name = a.slice(0, eq);
        value = a.slice(eq + 1);
      }
      if (FLAGS.has(name)) value = "true";
      else if (value === undefined) {
        value = args[++i];
        if (value === undefined) throw new UsageError(`${name} needs a value`);
      }
      const list = out.options.get(name) ?? [];
      list.push(value);
      out.options.set(name, list);
    } else {
      out.positional.push(a);
    }
  }
  return out;
}

function one(p: Parsed, name: string): string | undefined {
  const v = p.options.get(name);
  return v === undefined ? undefined : v[v.length - 1];
}

function int(p: Parsed, name: string): number | undefined {
  const v = one(p, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`${name} must be a whole number, not '${v}'`);
  return Number(v);
}

function pairs(p: Parsed, name: string): Record<string, string> | undefined {
  const list = p.options.get(name);
  if (!list) return undefined;
  const out: Record<string, string> = {};
  for (const item of list) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new UsageError(`${name} takes KEY=VALUE, not '${item}'`);
    out[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return out;
}

const CREATE_OPTIONS = ["--vcpu", "--memory", "--disk", "--lease", "--name", "--label", "--env", "--snapshot", "--max-cost-micros", "--wait-for-capacity"];

function checkKnown(p: Parsed, allowed: string[]): void {
  for (const name of p.options.keys()) {
    if (name === "--help" || name === "-h") continue;
    if (!allowed.includes(name)) throw new UsageError(`unknown option ${name}`);
  }
}

function createInput(p: Parsed): { input: CreateSandbox; options: CreateOptions } {
  const input: CreateSandbox = {};
  const vcpu = int(p, "--vcpu");
  if (vcpu !== undefined) input.vcpu = vcpu;
  const memory = int(p, "--memory");
  if (memory !== undefined) input.memoryMiB = memory;
  const disk = int(p, "--disk");
  if (disk !== undefined) input.diskMiB = disk;
  const lease = int(p, "--lease");
  if (lease !== undefined) input.timeoutSeconds = lease;
  const name = one(p, "--name");
  if (name !== undefined) input.name = name;
  const labels = pairs(p, "--label");
  if (labels) input.labels = labels;
  const env = pairs(p, "--env");
  if (env) input.env = env;
  const snapshot = one(p, "--snapshot");
  if (snapshot !== undefined) input.snapshot = snapshot;
  const cost = int(p, "--max-cost-micros");
  if (cost !== undefined) input.maxCostMicros = cost;
  const options: CreateOptions = {};
  const wait = int(p, "--wait-for-capacity");
  if (wait !== undefined) options.waitForCapacityMs = wait * 1000;
  let told = false;
  options.onCapacityWait = (refusal) => {
    if (!told) process.stderr.write(`kiln-js: waiting for room (${refusal.code}: ${refusal.message})\n`);
    told = true;
  };
  return { input, options };
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGUSR1: 10, SIGUSR2: 12, SIGTERM: 15 };

function exitCodeOf(r: CommandResult): number {
  if (r.timedOut) return 124;
  if (r.exitCode !== null) return r.exitCode;
  return 128 + (SIGNALS[r.signal ?? ""] ?? 9);
}

function write(stream: NodeJS.WriteStream, text: string): void {
  stream.write(text);
}

async function runCommand(
  sbx: Sandbox,
  p: Parsed,
  argv: string[],
  abort: AbortSignal,
  env: Record<string, string> | undefined,
): Promise<number> {
  const json = one(p, "--json") === "true";
  const stream = !json && one(p, "--no-stream") !== "true";
  const timeout = int(p, "--timeout");
  const cwd = one(p, "--cwd");
  const r = await sbx.exec(argv, {
    ...(timeout !== undefined ? { timeoutMs: timeout * 1000 } : {}),
    ...(cwd !== undefined ? { cwd } : {}),
    ...(env ? { env } : {}),
    ...(stream
      ? { onStdout: (t: string) => write(process.stdout, t), onStderr: (t: string) => write(process.stderr, t), ...(timeout === undefined ? { timeoutMs: MAX_EXEC_TIMEOUT_MS } : {}) }
      : {}),
    signal: abort,
  });
  if (json) {
    write(process.stdout, JSON.stringify(r) + "\n");
  } else if (!stream) {
    write(process.stdout, r.stdout);
    write(process.stderr, r.stderr);
  }
  if (r.timedOut && !json) write(process.stderr, `kiln-js: the command timed out\n`);
  return exitCodeOf(r);
}

function requireCommand(p: Parsed): string[] {
  if (!p.command || p.command.length === 0) throw new UsageError("give the command after --, e.g. -- python3 -c 'print(6 * 7)'");
  return p.command;
}

async function main(args: string[]): Promise<number> {
  if (args.length === 0 || args[0] === "--help" || args[0] === "-h" || args[0] === "help") {
    write(process.stdout, USAGE);
    return args.length === 0 ? 2 : 0;
  }
  if (args[0] === "--version") {
    write(process.stdout, `kiln-js ${VERSION}\n`);
    return 0;
  }
  if (args[0] !== "sandbox") throw new UsageError(`unknown command '${args[0]}'`);
  const p = parse(args.slice(1));
  if (p.options.has("--help") || p.options.has("-h")) {
    write(process.stdout, USAGE);
    return 0;
  }
  const verb = p.positional[0];
  const runtime = new Runtime();
  const abort = new AbortController();
  const json = one(p, "--json") === "true";
  switch (verb) {
    case "run": {
      checkKnown(p, [...CREATE_OPTIONS, "--keep", "--timeout", "--no-stream", "--json", "--cwd"]);
      const argv = requireCommand(p);
      const { input, options } = createInput(p);
      const sbx = await runtime.sandboxes.create(input, options);
      let interrupted = false;
      const onSignal = () => {
        interrupted = true;
        abort.abort(new Error("interrupted"));
      };
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      try {
        return await runCommand(sbx, p, argv, abort.signal, undefined); // --env went to the sandbox
      } catch (e) {
        if (interrupted) return 130;
        throw e;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
        if (one(p, "--keep") === "true") {
          write(process.stderr, `kiln-js: sandbox ${sbx.id} keeps running; stop it with: kiln-js sandbox stop ${sbx.id}\n`);
        } else {
          await sbx.stop().catch((e: unknown) => write(process.stderr, `kiln-js: stopping ${sbx.id} failed: ${String(e)}\n`));
        }
      }
    }
    case "create": {
      checkKnown(p, [...CREATE_OPTIONS, "--json"]);
      const { input, options } = createInput(p);
      const sbx = await runtime.sandboxes.create(input, options);
      write(process.stdout, json ? JSON.stringify(sbx.info) + "\n" : sbx.id + "\n");
      return 0;
    }
    case "exec": {
      checkKnown(p, ["--cwd", "--env", "--timeout", "--json", "--no-stream"]);
      const id = p.positional[1];
      if (!id) throw new UsageError("exec needs a sandbox id");
      const argv = requireCommand(p);
      const sbx = await runtime.sandboxes.get(id);
      process.once("SIGINT", () => abort.abort(new Error("interrupted")));
      try {
        return await runCommand(sbx, p, argv, abort.signal, pairs(p, "--env"));
      } catch (e) {
        if (abort.signal.aborted) return 130;
        throw e;
      }
    }
    case "ls": {
      checkKnown(p, ["--all", "--state", "--label", "--json"]);
      const states = p.options.get("--state") as SandboxState[] | undefined;
      const page = await runtime.sandboxes.list({
        ...(states ? { state: states } : {}),
        ...(pairs(p, "--label") ? { labels: pairs(p, "--label") as Record<string, string> } : {}),
        includeStopped: one(p, "--all") === "true",
      });
      const all = await page.toArray();
      if (json) {
        write(process.stdout, JSON.stringify(all.map((s) => s.info)) + "\n");
      } else {
        for (const s of all) write(process.stdout, `${s.id}  ${s.state.padEnd(8)}  ${s.info.vcpu} vCPU  ${s.info.memoryMiB} MiB  expires ${s.info.expiresAt}\n`);
      }
      return 0;
    }
    case "get":
    case "stop": {
      checkKnown(p, ["--json"]);
      const id = p.positional[1];
      if (!id) throw new UsageError(`${verb} needs a sandbox id`);
      const sbx = await runtime.sandboxes.get(id);
      const info = verb === "stop" ? await sbx.stop() : sbx.info;
      write(process.stdout, verb === "get" || json ? JSON.stringify(info, null, verb === "get" && !json ? 2 : undefined) + "\n" : `${info.id} ${info.state}\n`);
      return 0;
    }
    case "extend": {
      checkKnown(p, ["--json"]);
      const [, id, seconds] = p.positional;
      if (!id || !seconds || !/^\d+$/.test(seconds)) throw new UsageError("extend needs a sandbox id and seconds");
      const info = await (await runtime.sandboxes.get(id)).extend(Number(seconds));
      write(process.stdout, json ? JSON.stringify(info) + "\n" : `${info.id} expires ${info.expiresAt}\n`);
      return 0;
    }
    default:
      throw new UsageError(verb ? `unknown sandbox command '${verb}'` : "sandbox needs a command (run, create, exec, ls, get, stop, extend)");
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (e instanceof UsageError) {
      write(process.stderr, `kiln-js: ${e.message}\nRun 'kiln-js --help' for usage.\n`);
      process.exitCode = 2;
    } else if (e instanceof RuntimeError) {
      write(process.stderr, `kiln-js: [${e.code} ${e.status}] ${e.message}${e.requestId ? ` (request ${e.requestId})` : ""}\n`);
      process.exitCode = 1;
    } else {
      write(process.stderr, `kiln-js: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exitCode = 1;
    }
  },
);
