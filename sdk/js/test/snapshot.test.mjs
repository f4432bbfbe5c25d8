// Snapshots and forks: a copy has the same files and running processes.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Sandbox } from "kiln";

import { SHAPE, runtime } from "./helpers.mjs";

let sbx;
const made = [];
before(async () => {
  sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "sdk-js", file: "snapshot" } });
  await sbx.files.write("/workspace/state.txt", "before-snapshot\n");
  await sbx.spawn("python3 -c 'import time\nwhile True: time.sleep(1)'");
});
after(async () => {
  for (const s of made) await s.stop().catch(() => undefined);
  await sbx?.stop();
});

test("snapshot, then a create from it has the files and the process", async () => {
  const snap = await sbx.snapshot({ name: "sdk-js-snap", retentionDays: 1 });
  assert.equal(snap.kind, "snapshot");
  assert.equal(snap.state, "ready");
  assert.equal(snap.name, "sdk-js-snap");
  assert.equal(snap.retentionDays, 1);
  assert.equal(snap.sourceSandboxId, sbx.id);
  assert.equal((await runtime.snapshots.get(snap.id)).id, snap.id);
  assert.ok((await runtime.snapshots.list({ sandboxId: sbx.id })).data.some((s) => s.id === snap.id));

  const copy = await runtime.sandboxes.create({ snapshot: snap.id });
  made.push(copy);
  assert.equal(copy.state, "running");
  assert.notEqual(copy.id, sbx.id);
  assert.equal(await copy.files.readText("/workspace/state.txt"), "before-snapshot\n");
  const procs = await copy.processes.list();
  assert.ok(procs.some((p) => p.state === "running" && (p.command ?? "").includes("python3")), JSON.stringify(procs));
  await copy.stop();
  assert.equal((await runtime.snapshots.delete(snap.id)).id, snap.id);
  // The source kept running through all of it.
  assert.equal((await sbx.exec("cat /workspace/state.txt")).stdout, "before-snapshot\n");
});

test("fork({count}) answers an array of copies; fork() one Sandbox", async () => {
  const copies = await sbx.fork({ count: 2, labels: { suite: "sdk-js", file: "snapshot-fork" } });
  made.push(...copies);
  assert.ok(Array.isArray(copies));
  assert.equal(copies.length, 2);
  for (const c of copies) {
    assert.ok(c instanceof Sandbox);
    assert.equal(c.state, "running");
    assert.deepEqual(c.info.labels, { suite: "sdk-js", file: "snapshot-fork" });
    assert.equal((await c.exec("cat /workspace/state.txt")).stdout, "before-snapshot\n");
  }
  // Copies are independent of each other.
  await copies[0].files.write("/workspace/state.txt", "changed\n");
  assert.equal(await copies[1].files.readText("/workspace/state.txt"), "before-snapshot\n");

  const single = await sbx.fork();
  made.push(single);
  assert.ok(single instanceof Sandbox);
  assert.equal(await single.files.readText("/workspace/state.txt"), "before-snapshot\n");
  for (const c of [...copies, single]) assert.equal((await c.stop()).state, "stopped");
});
