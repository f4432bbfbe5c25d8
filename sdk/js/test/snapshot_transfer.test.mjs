// Snapshots as tar files: export, delete, import keeps the id, and a copy of
// the imported snapshot has the files and the running process.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm, stat, writeFile, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { RuntimeError } from "kiln";

import { SHAPE, runtime } from "./helpers.mjs";

let sbx;
let dir;
const made = [];
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "kiln-js-transfer-"));
  sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "sdk-js", file: "transfer" } });
  await sbx.files.write("/workspace/state.txt", "travels\n");
  await sbx.spawn("python3 -c 'import time\nwhile True: time.sleep(1)'");
});
after(async () => {
  for (const s of made) await s.stop().catch(() => undefined);
  await sbx?.stop();
  await rm(dir, { recursive: true, force: true });
});

test("export writes a tar; import after a delete brings back the same id", async () => {
  const snap = await sbx.snapshot({ name: "sdk-js-transfer", retentionDays: 1 });
  const path = join(dir, "snap.tar");
  assert.equal(await runtime.snapshots.export(snap.id, path), path);
  const bytes = await readFile(path);
  assert.equal(bytes.subarray(0, 18).toString(), "kiln-snapshot.json");
  assert.ok((await stat(path)).size > 1024);
  assert.deepEqual((await readdir(dir)).filter((n) => n.includes("kiln-partial")), []);

  await runtime.snapshots.delete(snap.id);
  const imported = await runtime.snapshots.import(path);
  assert.equal(imported.id, snap.id);
  assert.equal(imported.name, "sdk-js-transfer");
  assert.deepEqual(imported.labels, { suite: "sdk-js", file: "transfer" });
  // Again: the same record, nothing written twice.
  assert.equal((await runtime.snapshots.import(path)).id, snap.id);

  const copy = await runtime.sandboxes.create({ snapshot: snap.id });
  made.push(copy);
  assert.equal(await copy.files.readText("/workspace/state.txt"), "travels\n");
  const procs = await copy.processes.list();
  assert.ok(procs.some((p) => p.state === "running" && (p.command ?? "").includes("python3")), JSON.stringify(procs));
  await copy.stop();

  // A cut tar is refused with its reason, and the snapshot stays as it was.
  const cut = join(dir, "cut.tar");
  await writeFile(cut, bytes.subarray(0, bytes.length - 4096));
  await runtime.snapshots.delete(snap.id);
  await assert.rejects(runtime.snapshots.import(cut), (e) => e instanceof RuntimeError && e.code === "invalid_archive");
  await assert.rejects(runtime.snapshots.get(snap.id), (e) => e instanceof RuntimeError && e.status === 404);
});

test("export of an unknown snapshot is a 404 and leaves no file", async () => {
  const path = join(dir, "none.tar");
  await assert.rejects(
    runtime.snapshots.export("00000000-0000-4000-8000-000000000000", path),
    (e) => e instanceof RuntimeError && e.status === 404,
  );
  assert.deepEqual((await readdir(dir)).filter((n) => n.startsWith("none.tar")), []);
});

test("skipLayers reaches kilnd: a digest that is not one is named", async () => {
  const snap = await sbx.snapshot({ name: "sdk-js-skip", retentionDays: 1 });
  await assert.rejects(
    runtime.snapshots.export(snap.id, join(dir, "skip.tar"), { skipLayers: ["not-a-digest"] }),
    (e) => e instanceof RuntimeError && e.code === "invalid_request" && e.message.includes("skipLayers"),
  );
  // A well-formed digest the snapshot does not use changes nothing.
  const path = join(dir, "skip.tar");
  await runtime.snapshots.export(snap.id, path, { skipLayers: ["0".repeat(64)] });
  assert.equal((await readFile(path)).subarray(0, 18).toString(), "kiln-snapshot.json");
  await runtime.snapshots.delete(snap.id);
});
