// Sandboxes and commands: create/get/list, exec (string, argv, stdin, env,
// cwd, check, timeout, streaming), spawn, extend, stop, keep-alive.
import assert from "node:assert/strict";
import dc from "node:diagnostics_channel";
import { after, before, test } from "node:test";

import { CommandError, ConflictError, Process, Sandbox } from "kiln";

import { SHAPE, assertStopped, runtime } from "./helpers.mjs";

let sbx;
before(async () => {
  sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "sdk-js", file: "sandbox" } });
});
after(async () => {
  await sbx?.stop();
});

test("create answers a running Sandbox; get and list find it", async () => {
  assert.ok(sbx instanceof Sandbox);
  assert.equal(sbx.state, "running");
  assert.match(sbx.id, /^[0-9a-f-]{36}$/);
  assert.equal(sbx.info.vcpu, 1);
  assert.equal(sbx.info.memoryMiB, 512);
  assert.deepEqual(sbx.info.labels, { suite: "sdk-js", file: "sandbox" });
  const again = await runtime.sandboxes.get(sbx.id);
  assert.equal(again.id, sbx.id);
  assert.equal(again.state, "running");
  const page = await runtime.sandboxes.list({ labels: { suite: "sdk-js", file: "sandbox" }, state: "running" });
  assert.deepEqual(page.data.map((s) => s.id), [sbx.id]);
  assert.equal(page.hasMore, false);
  const all = [];
  for await (const s of await runtime.sandboxes.list({ labels: { file: "sandbox" } })) all.push(s.id);
  assert.deepEqual(all, [sbx.id]);
  assert.equal(JSON.parse(JSON.stringify(sbx)).id, sbx.id);
});

test("exec of a string runs bash -c and reports both streams and the exit code", async () => {
  const r = await sbx.exec("echo hi; echo oops >&2; exit 3");
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "hi\n");
  assert.equal(r.stderr, "oops\n");
  assert.equal(r.timedOut, false);
  assert.equal(r.stdoutTruncated, false);
  assert.equal(r.stderrTruncated, false);
  assert.equal(typeof r.durationMs, "number");
  assert.equal(r.signal, null);
});

test("exec of an argv runs without a shell", async () => {
  const r = await sbx.exec(["echo", "$HOME", "a b"]);
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "$HOME a b\n");
  const missing = await sbx.exec(["no-such-program-here"]);
  assert.equal(missing.exitCode, 127);
});

test("exec passes stdin (text and bytes), env and cwd", async () => {
  assert.equal((await sbx.exec(["cat"], { stdin: "from stdin\n" })).stdout, "from stdin\n");
  const bytes = new Uint8Array([104, 105, 0, 255]);
  assert.equal((await sbx.exec("od -An -tu1 | tr -s ' '", { stdin: bytes })).stdout.trim(), "104 105 0 255");
  const r = await sbx.exec("echo $GREETING $OTHER; pwd", { env: { GREETING: "hello", OTHER: "there" }, cwd: "/tmp" });
  assert.equal(r.stdout, "hello there\n/tmp\n");
  assert.equal((await sbx.exec("pwd")).stdout, "/workspace\n");
});

test("exec with check throws a CommandError on failure and returns on success", async () => {
  const ok = await sbx.exec("echo fine", { check: true });
  assert.equal(ok.stdout, "fine\n");
  await assert.rejects(sbx.exec("echo partial; echo broken >&2; exit 7", { check: true }), (e) => {
    assert.ok(e instanceof CommandError);
    assert.equal(e.code, "command_failed");
    assert.equal(e.exitCode, 7);
    assert.equal(e.stdout, "partial\n");
    assert.equal(e.stderr, "broken\n");
    assert.match(e.message, /exited with 7/);
    assert.match(e.message, /broken/);
    return true;
  });
  await assert.rejects(sbx.exec("sleep 5", { timeoutMs: 300, check: true }), (e) => {
    assert.ok(e instanceof CommandError);
    assert.equal(e.code, "command_timeout");
    assert.equal(e.timedOut, true);
    return true;
  });
});

test("a timeout is a result, not an error", async () => {
  const r = await sbx.exec("echo before; sleep 5", { timeoutMs: 300 });
  assert.equal(r.timedOut, true);
  assert.equal(r.exitCode, null);
  assert.equal(r.stdout, "before\n");
});

test("exec streams output to callbacks and execStream yields events", async () => {
  const seen = [];
  const r = await sbx.exec("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.05; done; exit 2", {
    onStdout: (t) => seen.push(["out", t]),
    onStderr: (t) => seen.push(["err", t]),
  });
  assert.equal(r.exitCode, 2);
  assert.equal(r.stdout, "out1\nout2\nout3\n");
  assert.equal(r.stderr, "err1\nerr2\nerr3\n");
  assert.equal(seen.filter(([k]) => k === "out").map(([, t]) => t).join(""), r.stdout);
  assert.ok(seen.length >= 4, "output arrived in pieces");

  const events = [];
  for await (const ev of sbx.execStream(["sh", "-c", "echo a; echo b >&2"])) events.push(ev);
  assert.equal(events[0].type, "start");
  assert.equal(events.at(-1).type, "exit");
  assert.equal(events.at(-1).exitCode, 0);
  assert.equal(events.filter((e) => e.type === "stdout").map((e) => e.data).join(""), "a\n");
  assert.equal(events.filter((e) => e.type === "stderr").map((e) => e.data).join(""), "b\n");

  // More than the 64 KiB JSON cap comes through whole when streamed.
  const big = await sbx.exec("head -c 200000 /dev/zero | tr '\\0' x", { stream: true });
  assert.equal(big.stdout.length, 200000);
  assert.equal(big.stdoutTruncated, false);
  const capped = await sbx.exec("head -c 200000 /dev/zero | tr '\\0' x");
  assert.equal(capped.stdout.length, 65536);
  assert.equal(capped.stdoutTruncated, true);
});

test("spawn runs in the background; write, wait, list, kill", async () => {
  const cat = await sbx.spawn(["cat"], { stdin: "pipe" });
  assert.ok(cat instanceof Process);
  assert.equal(cat.state, "running");
  await cat.write("one\n");
  await cat.write(new TextEncoder().encode("two\n"), { eof: true });
  const r = await cat.wait();
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "one\ntwo\n");
  assert.equal(r.processId, cat.id);

  const fed = await sbx.spawn("tr a-z A-Z", { stdin: "shout\n" });
  assert.equal((await fed.wait()).stdout, "SHOUT\n");

  const server = await sbx.spawn("echo started; exec sleep 600", { cwd: "/tmp" });
  const listed = await sbx.processes.list();
  assert.ok(listed.some((p) => p.id === server.id && p.state === "running"), JSON.stringify(listed));
  const first = [];
  for await (const ev of server.output()) {
    first.push(ev);
    if (ev.type === "stdout") break;
  }
  assert.equal(first.at(-1).data, "started\n");
  await server.kill("SIGKILL");
  const done = await server.wait();
  assert.equal(done.exitCode, null);
  assert.equal(done.signal, "SIGKILL");
  assert.equal((await sbx.processes.get(server.id)).state, "killed");
});

test("extend moves the lease end", async () => {
  const before = Date.parse(sbx.info.expiresAt);
  const info = await sbx.extend(600);
  assert.ok(Date.parse(info.expiresAt) >= before, `${info.expiresAt} vs ${sbx.info.expiresAt}`);
  assert.ok(Date.parse(info.expiresAt) >= Date.now() + 590_000);
  assert.equal(sbx.info.expiresAt, info.expiresAt);
});

test("consecutive calls reuse one keep-alive connection", async () => {
  let opened = 0;
  const count = () => opened++;
  dc.subscribe("undici:client:connected", count);
  try {
    for (let i = 0; i < 20; i++) await sbx.exec(["true"]);
    for (let i = 0; i < 20; i++) await sbx.refresh();
  } finally {
    dc.unsubscribe("undici:client:connected", count);
  }
  // undici may open a second connection when a call follows the previous answer
  // at once; after that both are reused.
  assert.ok(opened <= 2, `40 sequential calls opened ${opened} connections`);
});

test("stop stops it; later calls are refused as not_running", async () => {
  const other = await runtime.sandboxes.create(SHAPE);
  const info = await other.stop();
  assert.equal(info.state, "stopped");
  assert.equal(info.stopReason, "requested");
  assert.equal(other.state, "stopped");
  await assertStopped(other.id);
  await assert.rejects(other.exec("true"), (e) => e instanceof ConflictError && e.code === "not_running");
  await assert.rejects(other.extend(60), (e) => e instanceof ConflictError && e.code === "not_running");
  const gone = await other.delete();
  assert.equal(gone.status, "deleted");
});
