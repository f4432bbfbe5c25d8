// Capacity waiting, driven by tests/integration/test_sdk_js.py against a
// kilnd with room for exactly two 512 MiB sandboxes, both taken from Python.
// Protocol: this script prints one JSON object per line; on {"ready": X}
// Python frees one sandbox ~2 s later. Exit status 0 = every check passed.
import assert from "node:assert/strict";

import { CapacityError, ConflictError, Runtime } from "kiln";

const SHAPE = { vcpu: 1, memoryMiB: 512 };
const runtime = new Runtime();
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const mine = [];

try {
  // Full, and told not to wait: refused at once, as a CapacityError.
  let t0 = Date.now();
  await assert.rejects(runtime.sandboxes.create(SHAPE, { waitForCapacityMs: 0 }), (e) => {
    assert.ok(e instanceof CapacityError, String(e));
    assert.ok(e instanceof ConflictError);
    assert.equal(e.code, "no_capacity");
    assert.equal(e.status, 409);
    assert.ok(e.retryAfterMs >= 1000, `retryAfterMs ${e.retryAfterMs}`);
    assert.match(e.idempotencyKey, /^[0-9a-f-]{36}$/);
    return true;
  });
  say({ phase: "no-wait", refusedMs: Date.now() - t0 });

  // A: the create waits in the daemon's line (Prefer: wait=N) until Python frees room.
  say({ ready: "A" });
  t0 = Date.now();
  const a = await runtime.sandboxes.create(SHAPE, { waitForCapacityMs: 60_000 });
  mine.push(a);
  assert.equal(a.state, "running");
  say({ phase: "A", waitedMs: Date.now() - t0, id: a.id });

  // B: short server waits (1 s each); the SDK re-sends the same request with
  // the same Idempotency-Key after Retry-After until Python frees room.
  const refusals = [];
  say({ ready: "B" });
  t0 = Date.now();
  const b = await runtime.sandboxes.create(SHAPE, {
    waitForCapacityMs: 60_000,
    preferWaitSeconds: 1,
    onCapacityWait: (refusal, waitMs) => refusals.push({ at: Date.now() - t0, code: refusal.code, key: refusal.idempotencyKey, waitMs }),
  });
  mine.push(b);
  assert.equal(b.state, "running");
  assert.ok(refusals.length >= 1, "the SDK retried at least once");
  assert.ok(refusals.every((r) => r.code === "no_capacity"), JSON.stringify(refusals));
  assert.equal(new Set(refusals.map((r) => r.key)).size, 1, "one Idempotency-Key for the whole call");
  assert.ok(refusals.every((r) => r.waitMs >= 900), "waited Retry-After (1 s) between tries");
  say({ phase: "B", waitedMs: Date.now() - t0, id: b.id, refusals });

  // A wait that runs out ends in the refusal.
  t0 = Date.now();
  await assert.rejects(runtime.sandboxes.create(SHAPE, { waitForCapacityMs: 1500, preferWaitSeconds: 1 }), CapacityError);
  say({ phase: "gave-up", afterMs: Date.now() - t0 });
  say({ done: true });
} finally {
  for (const s of mine) await s.stop().catch(() => undefined);
}
