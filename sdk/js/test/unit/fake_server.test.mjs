// Unit tests of the SDK against a local fake HTTP server (no daemon): request
// shapes, retry rules and error classes. Does not use helpers.mjs nor
// KILN_API_URL / KILN_API_KEY: every Runtime is built with explicit options.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, test } from "node:test";

import {
  AuthError,
  AuthenticationError,
  CapacityError,
  ConflictError,
  ConnectionError,
  InvalidRequestError,
  NotFoundError,
  Runtime,
  RuntimeError,
  Sandbox,
  ServiceUnavailableError,
} from "kiln";

// ---- fake server -----------------------------------------------------------

/** Every request seen: {method, url, headers, body (parsed JSON or raw text or undefined), at}. */
let requests = [];
/** Canned answers, consumed in order: {status, body?, headers?}. */
let queue = [];
let server;
let baseUrl;

function reply(status, body, headers = {}) {
  queue.push({ status, body, headers });
}

function errorBody(code, status, message, extra = {}) {
  return { error: { code, status, message, ...extra } };
}

const INFO = {
  id: "sbx_1",
  state: "running",
  vcpu: 1,
  memoryMiB: 256,
  labels: { suite: "unit" },
};

before(async () => {
  server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body;
      if (text.length > 0) {
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      }
      requests.push({ method: req.method, url: req.url, headers: req.headers, body, at: Date.now() });
      const next = queue.shift() ?? {
        status: 500,
        body: errorBody("test_queue_empty", 500, `no canned answer for ${req.method} ${req.url}`),
        headers: {},
      };
      const payload = next.body === undefined ? "" : typeof next.body === "string" ? next.body : JSON.stringify(next.body);
      res.writeHead(next.status, { "content-type": "application/json", ...next.headers });
      res.end(payload);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${server.address().port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  requests = [];
  queue = [];
});

function runtime(extra = {}) {
  return new Runtime({ apiUrl: baseUrl, apiKey: "k_test", ...extra });
}

/** A Sandbox for id sbx_1 without a create round trip on the record. */
async function sandbox(rt = runtime()) {
  reply(200, INFO);
  const sbx = await rt.sandboxes.get("sbx_1");
  requests = [];
  return sbx;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// ---- 1. request shapes -----------------------------------------------------

test("create: POST /v1/sandboxes with body, bearer key, idempotency-key and prefer: wait", async () => {
  const rt = runtime();
  reply(200, INFO);
  const input = {
    vcpu: 1,
    memoryMiB: 256,
    timeoutSeconds: 60,
    labels: { suite: "unit", owner: "me" },
    network: { internet: false, allow: ["pypi.org"] },
  };
  const sbx = await rt.sandboxes.create(input);
  assert.equal(sbx.id, "sbx_1");
  assert.equal(sbx.state, "running");
  assert.equal(requests.length, 1);
  const [r] = requests;
  assert.equal(r.method, "POST");
  assert.equal(r.url, "/v1/sandboxes");
  assert.deepEqual(r.body, input);
  assert.equal(r.headers["authorization"], "Bearer k_test");
  assert.equal(r.headers["content-type"], "application/json");
  assert.equal(r.headers["accept"], "application/json");
  assert.match(r.headers["idempotency-key"], UUID);
  assert.equal(r.headers["prefer"], "wait=120");
  assert.match(r.headers["user-agent"], /^kiln-sdk-js\//);
  assert.match(r.headers["x-runtime-client"], /^sdk-js\//);
});

test("create: wait:false sends no prefer header and is not in the body; unknown fields never sent", async () => {
  const rt = runtime();
  reply(200, INFO);
  await rt.sandboxes.create({ vcpu: 1, wait: false });
  assert.equal(requests.length, 1);
  assert.deepEqual(requests[0].body, { vcpu: 1 });
  assert.equal(requests[0].headers["prefer"], undefined);

  await assert.rejects(rt.sandboxes.create({ memoryMb: 256 }), (e) => {
    assert.ok(e instanceof TypeError);
    assert.match(e.message, /unknown field 'memoryMb'.*did you mean 'memoryMiB'/);
    return true;
  });
  assert.equal(requests.length, 1);
});

test("create: preferWaitSeconds and idempotencyKey options are honoured", async () => {
  const rt = runtime();
  reply(200, INFO);
  await rt.sandboxes.create({ vcpu: 1 }, { preferWaitSeconds: 5, idempotencyKey: "idem-fixed" });
  assert.equal(requests[0].headers["prefer"], "wait=5");
  assert.equal(requests[0].headers["idempotency-key"], "idem-fixed");
});

test("exec(string): POST /v1/sandboxes/{id}:exec with command, no retry key", async () => {
  const sbx = await sandbox();
  reply(200, { processId: "p1", exitCode: 0, stdout: "hi\n", stderr: "" });
  const r = await sbx.exec("echo hi");
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "hi\n");
  assert.equal(r.timedOut, false);
  assert.equal(r.signal, null);
  assert.equal(r.durationMs, 0);
  assert.equal(requests.length, 1);
  const [q] = requests;
  assert.equal(q.method, "POST");
  assert.equal(q.url, "/v1/sandboxes/sbx_1:exec");
  assert.deepEqual(q.body, { command: "echo hi" });
  assert.equal(q.headers["authorization"], "Bearer k_test");
  assert.equal(q.headers["idempotency-key"], undefined);
});

test("exec(argv): sends argv (no command) plus cwd/env/stdin/timeoutMs", async () => {
  const sbx = await sandbox();
  reply(200, { processId: "p2", exitCode: 0, stdout: "", stderr: "" });
  await sbx.exec(["ls", "-l"]);
  assert.deepEqual(requests[0].body, { argv: ["ls", "-l"] });

  reply(200, { processId: "p3", exitCode: 0, stdout: "", stderr: "" });
  await sbx.exec(["cat"], { cwd: "/tmp", env: { A: "1" }, stdin: "x", timeoutMs: 5000 });
  assert.deepEqual(requests[1].body, { argv: ["cat"], cwd: "/tmp", env: { A: "1" }, stdin: "x", timeoutMs: 5000 });

  reply(200, { processId: "p4", exitCode: null, signal: "SIGKILL", stdout: "", stderr: "", stdoutTruncated: true });
  const r = await sbx.exec(["yes"], { stopAtOutputCap: true });
  assert.deepEqual(requests[2].body, { argv: ["yes"], stopAtOutputCap: true });
  assert.equal(r.stdoutTruncated, true);
});

test("exec with check: a non-zero exit throws CommandError", async () => {
  const sbx = await sandbox();
  reply(200, { processId: "p4", exitCode: 3, stdout: "", stderr: "boom" });
  await assert.rejects(sbx.exec("false", { check: true }), (e) => {
    assert.equal(e.name, "CommandError");
    assert.equal(e.code, "command_failed");
    assert.equal(e.exitCode, 3);
    assert.equal(e.stderr, "boom");
    return true;
  });
});

test("network.set: PUT /v1/sandboxes/{id}/network with the rules", async () => {
  const sbx = await sandbox();
  reply(200, { internet: true, allow: ["a.test"] });
  const policy = await sbx.network.set({ internet: true, allow: ["a.test"] });
  assert.deepEqual(policy, { internet: true, allow: ["a.test"] });
  assert.equal(requests.length, 1);
  const [q] = requests;
  assert.equal(q.method, "PUT");
  assert.equal(q.url, "/v1/sandboxes/sbx_1/network");
  assert.deepEqual(q.body, { internet: true, allow: ["a.test"] });
  assert.equal(q.headers["authorization"], "Bearer k_test");
});

test("stop: POST /v1/sandboxes/{id}:stop with {} and an idempotency-key; updates state", async () => {
  const sbx = await sandbox();
  reply(200, { ...INFO, state: "stopped" });
  const info = await sbx.stop();
  assert.equal(info.state, "stopped");
  assert.equal(sbx.state, "stopped");
  assert.equal(requests.length, 1);
  const [q] = requests;
  assert.equal(q.method, "POST");
  assert.equal(q.url, "/v1/sandboxes/sbx_1:stop");
  assert.deepEqual(q.body, {});
  assert.match(q.headers["idempotency-key"], UUID);
});

test("get and list: GET paths, ids are URL-encoded, list filters become query params", async () => {
  const rt = runtime();
  reply(200, { ...INFO, id: "a/b" });
  await rt.sandboxes.get("a/b");
  assert.equal(requests[0].method, "GET");
  assert.equal(requests[0].url, "/v1/sandboxes/a%2Fb");
  assert.equal(requests[0].body, undefined);
  assert.equal(requests[0].headers["content-type"], undefined);

  reply(200, { data: [INFO], nextCursor: null });
  const page = await rt.sandboxes.list({ state: ["running", "paused"], labels: { suite: "unit" }, limit: 5 });
  assert.equal(page.data.length, 1);
  assert.equal(page.hasMore, false);
  assert.equal(requests[1].url, "/v1/sandboxes?state=running&state=paused&label=suite%3Aunit&limit=5");
});

// ---- 2. retries --------------------------------------------------------------

test("create: 409 no_capacity with Retry-After: 1 is re-sent with the SAME idempotency-key and body", async () => {
  const rt = runtime();
  reply(409, errorBody("no_capacity", 409, "no room"), { "retry-after": "1", "x-request-id": "req_cap" });
  reply(200, INFO);
  const waits = [];
  const sbx = await rt.sandboxes.create(
    { vcpu: 1, memoryMiB: 256 },
    { onCapacityWait: (err, ms) => waits.push({ err, ms }) },
  );
  assert.equal(sbx.id, "sbx_1");
  assert.equal(requests.length, 2);
  const [a, b] = requests;
  assert.equal(a.url, "/v1/sandboxes");
  assert.equal(b.url, "/v1/sandboxes");
  assert.match(a.headers["idempotency-key"], UUID);
  assert.equal(b.headers["idempotency-key"], a.headers["idempotency-key"]);
  assert.deepEqual(b.body, a.body);
  assert.deepEqual(a.body, { vcpu: 1, memoryMiB: 256 });
  assert.equal(a.headers["prefer"], "wait=120");
  assert.match(b.headers["prefer"], /^wait=(119|120)$/);
  // Retry-After: 1 is honoured: one wait of 1000 ms, reported with the refusal.
  assert.equal(waits.length, 1);
  assert.equal(waits[0].ms, 1000);
  assert.ok(waits[0].err instanceof CapacityError);
  assert.equal(waits[0].err.code, "no_capacity");
  assert.equal(waits[0].err.retryAfterMs, 1000);
  assert.equal(waits[0].err.requestId, "req_cap");
  const gap = b.at - a.at;
  assert.ok(gap >= 950 && gap < 1500, `gap ${gap} ms`);
});

test("create: waitForCapacityMs: 0 throws the CapacityError at once", async () => {
  const rt = runtime();
  reply(409, errorBody("no_capacity", 409, "no room"), { "retry-after": "1" });
  await assert.rejects(rt.sandboxes.create({ vcpu: 1 }, { waitForCapacityMs: 0 }), (e) => {
    assert.ok(e instanceof CapacityError);
    assert.ok(e instanceof ConflictError);
    assert.equal(e.code, "no_capacity");
    assert.equal(e.status, 409);
    assert.match(e.idempotencyKey, UUID);
    assert.equal(e.retryable, true);
    return true;
  });
  assert.equal(requests.length, 1);
  assert.equal(requests[0].headers["prefer"], "wait=0");
});

test("GET: a 503 is retried, then succeeds", async () => {
  const rt = runtime();
  reply(503, errorBody("internal_error", 503, "busy"));
  reply(200, INFO);
  const sbx = await rt.sandboxes.get("sbx_1");
  assert.equal(sbx.id, "sbx_1");
  assert.equal(requests.length, 2);
  assert.equal(requests[0].method, "GET");
  assert.equal(requests[1].url, "/v1/sandboxes/sbx_1");
  // backoff before retry 0 is 250 ms * U(0.5, 1.5)
  const gap = requests[1].at - requests[0].at;
  assert.ok(gap >= 100 && gap < 1000, `gap ${gap} ms`);
});

test("GET: a 503 is retried at most maxRetries times, then thrown as ServiceUnavailableError", async () => {
  const rt = runtime({ maxRetries: 1 });
  reply(503, errorBody("internal_error", 503, "busy"), { "retry-after": "0" });
  reply(503, errorBody("internal_error", 503, "still busy"), { "retry-after": "0", "x-request-id": "req_503" });
  await assert.rejects(rt.sandboxes.get("sbx_1"), (e) => {
    assert.ok(e instanceof ServiceUnavailableError);
    assert.equal(e.status, 503);
    assert.equal(e.message, "still busy");
    assert.equal(e.requestId, "req_503");
    return true;
  });
  assert.equal(requests.length, 2);
});

test("GET: a deliberate 503 (code unavailable) is not retried", async () => {
  const rt = runtime();
  reply(503, errorBody("unavailable", 503, "feature off"));
  await assert.rejects(rt.sandboxes.get("sbx_1"), (e) => {
    assert.ok(e instanceof ServiceUnavailableError);
    assert.equal(e.code, "unavailable");
    assert.equal(e.retryable, false);
    return true;
  });
  assert.equal(requests.length, 1);
});

test("a 400 is never retried (GET, create, exec)", async () => {
  const rt = runtime();
  reply(400, errorBody("invalid_request", 400, "bad"));
  await assert.rejects(rt.sandboxes.get("sbx_1"), InvalidRequestError);
  assert.equal(requests.length, 1);

  reply(400, errorBody("invalid_request", 400, "bad"));
  await assert.rejects(rt.sandboxes.create({ vcpu: 99 }), InvalidRequestError);
  assert.equal(requests.length, 2);

  const sbx = await sandbox(rt);
  reply(400, errorBody("invalid_request", 400, "bad"));
  await assert.rejects(sbx.exec("x"), InvalidRequestError);
  assert.equal(requests.length, 1);
});

test("exec: a 503 is NOT retried (POST without retry) and is thrown as ServiceUnavailableError", async () => {
  const sbx = await sandbox();
  reply(503, errorBody("internal_error", 503, "overloaded"), { "retry-after": "0", "x-request-id": "req_x" });
  reply(200, { processId: "p", exitCode: 0, stdout: "", stderr: "" }); // must stay unused
  await assert.rejects(sbx.exec("echo hi"), (e) => {
    assert.ok(e instanceof ServiceUnavailableError);
    assert.equal(e.code, "internal_error");
    assert.equal(e.status, 503);
    assert.equal(e.requestId, "req_x");
    assert.equal(e.retryable, true); // the caller may retry; the SDK does not
    return true;
  });
  assert.equal(requests.length, 1);
  assert.equal(queue.length, 1);
});

test("exec: a 503 server_busy (refused before acting) IS retried", async () => {
  const sbx = await sandbox();
  reply(503, errorBody("server_busy", 503, "busy"), { "retry-after": "0" });
  reply(200, { processId: "p", exitCode: 0, stdout: "ok", stderr: "" });
  const r = await sbx.exec("echo ok");
  assert.equal(r.stdout, "ok");
  assert.equal(requests.length, 2);
  assert.deepEqual(requests[1].body, { command: "echo ok" });
});

test("exec: a 429 is retried (refused before acting)", async () => {
  const sbx = await sandbox();
  reply(429, errorBody("rate_limited", 429, "slow down"), { "retry-after": "0" });
  reply(200, { processId: "p", exitCode: 0, stdout: "", stderr: "" });
  await sbx.exec("true");
  assert.equal(requests.length, 2);
});

test("stop (keyed POST): a 503 is retried with the same idempotency-key", async () => {
  const sbx = await sandbox();
  reply(503, errorBody("internal_error", 503, "busy"), { "retry-after": "0" });
  reply(200, { ...INFO, state: "stopped" });
  await sbx.stop();
  assert.equal(requests.length, 2);
  assert.equal(requests[1].headers["idempotency-key"], requests[0].headers["idempotency-key"]);
});

// ---- 3. errors ---------------------------------------------------------------

test("404 not_found → NotFoundError with code, status, requestId from x-request-id", async () => {
  const rt = runtime();
  reply(404, errorBody("not_found", 404, "no sandbox sbx_nope"), { "x-request-id": "req_404" });
  await assert.rejects(rt.sandboxes.get("sbx_nope"), (e) => {
    assert.ok(e instanceof NotFoundError);
    assert.ok(e instanceof RuntimeError);
    assert.equal(e.name, "NotFoundError");
    assert.equal(e.code, "not_found");
    assert.equal(e.status, 404);
    assert.equal(e.message, "no sandbox sbx_nope");
    assert.equal(e.requestId, "req_404");
    assert.equal(e.retryable, false);
    return true;
  });
  assert.equal(requests.length, 1);
});

test("a requestId in the error body wins over the header", async () => {
  const rt = runtime();
  reply(404, errorBody("not_found", 404, "gone", { requestId: "req_body" }), { "x-request-id": "req_header" });
  await assert.rejects(rt.sandboxes.get("x"), (e) => e instanceof NotFoundError && e.requestId === "req_body");
});

test("401 → AuthError (= AuthenticationError)", async () => {
  const rt = runtime();
  reply(401, errorBody("unauthorized", 401, "bad key"), { "x-request-id": "req_401" });
  await assert.rejects(rt.sandboxes.list(), (e) => {
    assert.equal(AuthError, AuthenticationError);
    assert.ok(e instanceof AuthError);
    assert.equal(e.code, "unauthorized");
    assert.equal(e.status, 401);
    assert.equal(e.requestId, "req_401");
    return true;
  });
  assert.equal(requests.length, 1);
});

test("409 conflict → ConflictError (not CapacityError), not retried", async () => {
  const sbx = await sandbox();
  reply(409, errorBody("not_running", 409, "the sandbox is stopped"));
  await assert.rejects(sbx.exec("echo"), (e) => {
    assert.ok(e instanceof ConflictError);
    assert.ok(!(e instanceof CapacityError));
    assert.equal(e.code, "not_running");
    assert.equal(e.status, 409);
    return true;
  });
  reply(409, errorBody("conflict", 409, "busy"));
  await assert.rejects(sbx.network.set({ internet: true }), (e) => e instanceof ConflictError && e.code === "conflict");
  assert.equal(requests.length, 2);
});

test("400 invalid_request → InvalidRequestError with details and hint", async () => {
  const rt = runtime();
  const details = { issues: [{ field: "vcpu", message: "must be ≤ 8" }] };
  reply(400, errorBody("invalid_request", 400, "vcpu too large", { details, hint: "use ≤ 8" }), {
    "x-request-id": "req_400",
  });
  await assert.rejects(rt.sandboxes.create({ vcpu: 99 }), (e) => {
    assert.ok(e instanceof InvalidRequestError);
    assert.equal(e.code, "invalid_request");
    assert.equal(e.status, 400);
    assert.equal(e.message, "vcpu too large");
    assert.deepEqual(e.details, details);
    assert.equal(e.hint, "use ≤ 8");
    assert.equal(e.requestId, "req_400");
    assert.match(e.idempotencyKey, UUID);
    return true;
  });
  assert.equal(requests.length, 1);
});

test("a non-JSON error body is described by its status", async () => {
  const rt = runtime();
  reply(500, "oops", { "content-type": "text/plain" });
  await assert.rejects(rt.sandboxes.get("x"), (e) => {
    assert.ok(e instanceof ServiceUnavailableError);
    assert.equal(e.code, "internal_error");
    assert.equal(e.status, 500);
    assert.equal(e.message, "oops");
    return true;
  });
  assert.equal(requests.length, 1); // 500 is not in 429/502/503/504
});

test("a dead port → ConnectionError (status 0, cause ECONNREFUSED)", async () => {
  const dead = createServer();
  await new Promise((resolve) => dead.listen(0, "127.0.0.1", resolve));
  const port = dead.address().port;
  await new Promise((resolve) => dead.close(resolve));
  const rt = new Runtime({ apiUrl: `http://127.0.0.1:${port}`, apiKey: "k_test", maxRetries: 0 });
  await assert.rejects(rt.sandboxes.get("sbx_1"), (e) => {
    assert.ok(e instanceof ConnectionError);
    assert.equal(e.name, "ConnectionError");
    assert.equal(e.code, "connection_error");
    assert.equal(e.status, 0);
    assert.equal(e.details?.cause, "ECONNREFUSED");
    assert.equal(e.retryable, true);
    return true;
  });
  // even an exec (POST, retry "never") is retried when the request provably never left
  const rt1 = new Runtime({ apiUrl: `http://127.0.0.1:${port}`, apiKey: "k_test", maxRetries: 1 });
  const sbx = new Sandbox(rt1, INFO);
  const t0 = Date.now();
  await assert.rejects(sbx.exec("echo hi"), ConnectionError);
  assert.ok(Date.now() - t0 >= 100, "one backoff (>= 125 ms) before giving up");
});
