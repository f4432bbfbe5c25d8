// Errors: classes chosen from the answer's status and code, with code,
// status and requestId; nothing is faked for routes the daemon lacks.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  AuthError,
  AuthenticationError,
  ConflictError,
  InvalidRequestError,
  KilnError,
  NotFoundError,
  Runtime,
  RuntimeError,
  Sandbox,
} from "kiln";

import { SHAPE, runtime } from "./helpers.mjs";

let sbx;
before(async () => {
  sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "sdk-js", file: "errors" } });
});
after(async () => {
  await sbx?.stop();
});

test("a wrong key is an AuthError (401 unauthorized) with a request id", async () => {
  const bad = new Runtime({ apiKey: "kiln_not_a_real_key" });
  await assert.rejects(bad.sandboxes.list(), (e) => {
    assert.ok(e instanceof AuthError);
    assert.ok(e instanceof AuthenticationError);
    assert.ok(e instanceof RuntimeError);
    assert.equal(AuthError, AuthenticationError);
    assert.equal(KilnError, RuntimeError);
    assert.equal(e.code, "unauthorized");
    assert.equal(e.status, 401);
    assert.match(e.requestId, /\S/);
    assert.equal(e.retryable, false);
    return true;
  });
  await assert.rejects(bad.sandboxes.create(SHAPE, { waitForCapacityMs: 0 }), AuthError);
});

test("an unknown sandbox id is a NotFoundError", async () => {
  await assert.rejects(runtime.sandboxes.get("00000000-0000-4000-8000-000000000000"), (e) => {
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.code, "not_found");
    assert.equal(e.status, 404);
    assert.match(e.requestId, /\S/);
    return true;
  });
  await assert.rejects(Sandbox.connect("00000000-0000-4000-8000-000000000000", { client: runtime }), NotFoundError);
});

test("bad input is an InvalidRequestError naming the field", async () => {
  await assert.rejects(runtime.sandboxes.create({ vcpu: 1, memoryMiB: 1 }), (e) => {
    assert.ok(e instanceof InvalidRequestError);
    assert.equal(e.code, "invalid_request");
    assert.equal(e.status, 400);
    assert.ok(e.details.issues.some((i) => i.path === "body.memoryMiB"), JSON.stringify(e.details));
    return true;
  });
  // A misspelt field never leaves the client.
  await assert.rejects(runtime.sandboxes.create({ memoryMb: 512 }), (e) => e instanceof TypeError && /memoryMiB/.test(e.message));
});

test("extend outside 1..3600 seconds is refused", async () => {
  await assert.rejects(sbx.extend(0), (e) => e instanceof InvalidRequestError && e.details.issues[0].path === "body.seconds");
});

test("a daemon that is not there is a ConnectionError after retries", async () => {
  const nowhere = new Runtime({ apiUrl: "http://127.0.0.1:9", apiKey: "k", maxRetries: 1 });
  await assert.rejects(nowhere.sandboxes.list(), (e) => e.name === "ConnectionError" && e.code === "connection_error" && e.status === 0);
});

test("ConflictError for state conflicts", async () => {
  const s = await runtime.sandboxes.create(SHAPE);
  await s.stop();
  await assert.rejects(s.exec("true"), ConflictError);
});
