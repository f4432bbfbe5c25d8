// Pause, wake, getOrCreate and names from the TypeScript SDK against a real
// kilnd with issue 14's server side. Run by tests/integration/test_pause_clients.py
// (not by test_sdk_js.py's glob of test/*.test.mjs).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, test } from "node:test";

import { ConflictError, InvalidRequestError } from "kiln";

import { SHAPE, runtime } from "../helpers.mjs";

const made = [];
after(async () => {
  for (const sbx of made) await sbx.delete().catch(() => undefined);
});

async function create(input = {}) {
  const sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "pause-js" }, ...input });
  made.push(sbx);
  return sbx;
}

test("pause and wake keep the id and the processes", async () => {
  const sbx = await create();
  await sbx.spawn("i=0; while true; do i=$((i+1)); echo $i > /tmp/n.t; mv /tmp/n.t /tmp/n; sleep 0.05; done");
  await sbx.exec("sleep 0.3");
  const info = await sbx.pause();
  assert.equal(info.state, "paused");
  assert.equal(sbx.paused, true);
  assert.ok(info.pausedAt);
  assert.equal((await runtime.sandboxes.get(sbx.id)).state, "paused");
  await sbx.wake({ timeoutSeconds: 600 });
  assert.equal(sbx.state, "running");
  assert.equal((await runtime.sandboxes.get(sbx.id)).state, "running");
  const n1 = Number((await sbx.exec("cat /tmp/n")).stdout.trim());
  await sbx.exec("sleep 0.3");
  const n2 = Number((await sbx.exec("cat /tmp/n")).stdout.trim());
  assert.ok(n1 > 0 && n2 > n1, `the counter went on after the wake (${n1} -> ${n2})`);
  await sbx.wake(); // already awake: fine
  await assert.rejects(sbx.wake({ timeoutSeconds: 600 }), (e) => e instanceof ConflictError && e.code === "not_paused");
});

test("a files-only pause boots afresh; metrics give the meter's readings", async () => {
  const sbx = await create({ pauseMemory: false });
  assert.equal(sbx.info.pauseMemory, false);
  await sbx.exec("echo kept > /workspace/f; timeout 3 sh -c 'while :; do :; done'; true");
  const boot = (await sbx.exec("cat /proc/sys/kernel/random/boot_id")).stdout;
  await sbx.pause();
  await sbx.wake();
  assert.equal((await sbx.exec("cat /workspace/f")).stdout, "kept\n");
  assert.notEqual((await sbx.exec("cat /proc/sys/kernel/random/boot_id")).stdout, boot);
  const other = await create();
  await other.pause({ memory: false });
  assert.equal((await runtime.sandboxes.get(other.id)).state, "paused");
  let m = await sbx.metrics({ range: "1h" });
  for (let i = 0; i < 30 && !m.latest; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    m = await sbx.metrics({ range: "1h" });
  }
  assert.ok(m.latest && m.latest.cpuCores >= 1 && m.points.length > 0, JSON.stringify(m));
  await assert.rejects(sbx.metrics({ range: "2h" }), (e) => e instanceof InvalidRequestError);
});

test("autoWake: a command wakes a paused sandbox; autoWake false refuses it", async () => {
  const sbx = await create();
  await sbx.pause();
  assert.equal((await sbx.exec("echo up")).stdout, "up\n");
  assert.equal((await sbx.refresh()).state, "running");
  const stiff = await create({ autoWake: false });
  assert.equal(stiff.info.autoWake, false);
  await stiff.pause();
  await assert.rejects(stiff.exec("true"), (e) => e instanceof ConflictError && e.code === "sandbox_paused");
  const nope = await create({ pausable: false });
  await assert.rejects(nope.pause(), (e) => e instanceof ConflictError && e.code === "not_pausable");
});

test("getOrCreate answers the live sandbox of a name, woken if paused; names are unique", async () => {
  const name = `js-${randomUUID().slice(0, 8)}`;
  const first = await runtime.sandboxes.getOrCreate(name, { ...SHAPE, idlePauseSeconds: 900 });
  made.push(first);
  assert.equal(first.info.reused, false);
  assert.equal(first.info.idlePauseSeconds, 900);
  const again = await runtime.sandboxes.getOrCreate(name, SHAPE);
  assert.equal(again.id, first.id);
  assert.equal(again.info.reused, true);
  await first.pause();
  const woken = await runtime.sandboxes.getOrCreate(name, SHAPE);
  assert.equal(woken.id, first.id);
  assert.equal(woken.state, "running");
  await assert.rejects(
    runtime.sandboxes.create({ ...SHAPE, name }),
    (e) => e instanceof ConflictError && e.code === "name_taken" && e.details?.sandboxId === first.id,
  );
  const page = await runtime.sandboxes.list({ name });
  assert.deepEqual(
    page.data.map((s) => s.id),
    [first.id],
  );
});

test("create fields and limits", async () => {
  const sbx = await create({ idlePauseSeconds: 0, onLeaseEnd: "pause", persistent: false, sudo: false, maxTotalCostMicros: 9_000_000, funding: "paid", region: "anywhere" });
  const i = sbx.info;
  assert.deepEqual(
    [i.idlePauseSeconds, i.onLeaseEnd, i.persistent, i.sudo, i.maxTotalCostMicros, i.pausable, i.autoWake, i.pausedAt],
    [0, "pause", false, false, 9_000_000, true, true, null],
  );
  await assert.rejects(create({ idlePauseSeconds: 5 }), (e) => e instanceof InvalidRequestError);
  const limits = await runtime.limits.get();
  assert.equal(limits.access, "full");
  assert.equal(limits.daily.window, "24h");
  assert.equal(limits.trial, null);
});

test("update changes settings; a pty process reports its size and resizes", async () => {
  const sbx = await create({ env: { A: "1", B: "2" } });
  const info = await sbx.update({ env: { A: "9", B: null }, idlePauseSeconds: 600, labels: { t: "u" } });
  assert.deepEqual(info.envNames, ["A"]);
  assert.equal(info.idlePauseSeconds, 600);
  assert.equal((await sbx.exec("echo $A-${B:-unset}")).stdout, "9-unset\n");
  const p = await sbx.spawn("stty size; read x; stty size", { pty: { cols: 100, rows: 30 }, stdin: "pipe" });
  // The first size is printed before the resize.
  for (let i = 0; i < 200 && ((await p.refresh()).outputBytes ?? 0) < 6; i++)
    await new Promise((r) => setTimeout(r, 50));
  await p.resize(120, 40);
  await p.write("\n");
  const out = (await p.wait()).stdout;
  assert.match(out, /30 100/);
  assert.match(out, /40 120/);
});
