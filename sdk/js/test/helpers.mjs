// Shared by the test scripts: they run against the kilnd named by
// KILN_API_URL / KILN_API_KEY (set by tests/integration/test_sdk_js.py).
import assert from "node:assert/strict";

import { Runtime } from "kiln";

if (!process.env.KILN_API_URL || !process.env.KILN_API_KEY) {
  throw new Error("set KILN_API_URL and KILN_API_KEY to a running kilnd (tests/integration/test_sdk_js.py does)");
}

/** The smallest shape that runs everything here. */
export const SHAPE = Object.freeze({ vcpu: 1, memoryMiB: 512 });

export const runtime = new Runtime();

/** The state the daemon reports now (refresh, not the cached info). */
export async function stateOf(id) {
  return (await runtime.sandboxes.get(id)).state;
}

export async function assertStopped(id) {
  assert.equal(await stateOf(id), "stopped", `sandbox ${id} should be stopped`);
}
