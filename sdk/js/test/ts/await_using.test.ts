// `await using sbx = await Sandbox.create()` stops the sandbox when the
// scope ends, also when it ends by an exception. Compiled by tsc (Node 20
// cannot parse `await using` itself) into dist-test/.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Runtime, Sandbox } from "kiln";

const runtime = new Runtime();
const shape = { vcpu: 1, memoryMiB: 512 };

async function stateOf(id: string): Promise<string> {
  return (await runtime.sandboxes.get(id)).state;
}

test("await using stops the sandbox at the end of the block", async () => {
  let id = "";
  {
    await using sbx = await Sandbox.create(shape, { client: runtime });
    id = sbx.id;
    const r = await sbx.exec("echo inside", { check: true });
    assert.equal(r.stdout, "inside\n");
    assert.equal(await stateOf(id), "running");
  }
  assert.equal(await stateOf(id), "stopped");
});

test("await using stops it when the block throws", async () => {
  let id = "";
  await assert.rejects(async () => {
    await using sbx = await runtime.sandboxes.create(shape);
    id = sbx.id;
    throw new Error("boom");
  }, /boom/);
  assert.notEqual(id, "");
  assert.equal(await stateOf(id), "stopped");
});
