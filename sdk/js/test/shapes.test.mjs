// The public API's shapes against a real kilnd: files.list filters (glob,
// hidden, limit), files.glob, and the exec answer's 64 KiB / 1 MiB caps.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { EXEC_LONG_OUTPUT_CAP, EXEC_OUTPUT_CAP } from "kiln";

import { SHAPE, runtime } from "./helpers.mjs";

let sbx;
before(async () => {
  sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "sdk-js", file: "shapes" } });
  await sbx.exec(
    "mkdir -p /workspace/t/a/b /workspace/t/.hid && cd /workspace/t && " +
      "touch x.csv y.txt a/z.csv a/b/w.csv .hid/h.csv .top.csv",
  );
});
after(async () => {
  await sbx?.stop();
});

const names = (entries) => entries.map((e) => e.path.replace("/workspace/t/", "")).sort();

test("files.list: glob, hidden and limit", async () => {
  assert.deepEqual(names(await sbx.files.list("/workspace/t", { glob: "**/*.csv" })), [
    ".hid/h.csv",
    ".top.csv",
    "a/b/w.csv",
    "a/z.csv",
    "x.csv",
  ]);
  assert.deepEqual(names(await sbx.files.list("/workspace/t", { glob: "**/*.csv", hidden: false })), [
    "a/b/w.csv",
    "a/z.csv",
    "x.csv",
  ]);
  assert.deepEqual(names(await sbx.files.glob("*.csv", "/workspace/t")), [".top.csv", "x.csv"]);
  assert.equal((await sbx.files.list("/workspace/t", { depth: 3, limit: 2 })).length, 2);
});

test("the exec answer keeps 64 KiB, or 1 MiB past a 60 s timeout", async () => {
  const flood = "head -c 2000000 /dev/zero | tr '\\0' a";
  const short = await sbx.exec(flood);
  assert.equal(short.stdout.length, EXEC_OUTPUT_CAP);
  assert.equal(short.stdoutTruncated, true);
  const long = await sbx.exec(flood, { timeoutMs: 120_000 });
  assert.equal(long.stdout.length, EXEC_LONG_OUTPUT_CAP);
  assert.equal(long.stdoutTruncated, true);
});
