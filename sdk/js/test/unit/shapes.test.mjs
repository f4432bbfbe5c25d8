// The public runtime API's call shapes (issue 14) against a local fake HTTP
// server: create fields, wait: false, getOrCreate, pause/wake, limits, file
// listing filters, fork names, maxConnections, the exec answer's caps.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { after, before, beforeEach, test } from "node:test";

import {
  ConflictError,
  EXEC_LONG_CAP_AFTER_MS,
  EXEC_LONG_OUTPUT_CAP,
  EXEC_OUTPUT_CAP,
  Runtime,
  RuntimeError,
  Sandbox,
  execOutputCap,
} from "kiln";

let requests = [];
let queue = [];
let server;
let baseUrl;
let inFlight = 0;
let peak = 0;
let delayMs = 0;

function reply(status, body, headers = {}) {
  queue.push({ status, body, headers });
}

const err = (code, status) => ({ error: { code, status, message: code } });
const INFO = { id: "sbx_1", state: "running", labels: {} };

before(async () => {
  server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      inFlight--;
      const text = Buffer.concat(chunks).toString("utf8");
      const url = new URL(req.url, "http://x");
      requests.push({
        method: req.method,
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: req.headers,
        body: text ? JSON.parse(text) : undefined,
      });
      const next = queue.shift() ?? { status: 500, body: err("test_queue_empty", 500), headers: {} };
      res.writeHead(next.status, { "content-type": "application/json", ...next.headers });
      res.end(JSON.stringify(next.body ?? {}));
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
  peak = 0;
  delayMs = 0;
});

const rt = (extra = {}) => new Runtime({ baseUrl, apiKey: "k_test", maxRetries: 0, ...extra });

async function sandbox(r = rt()) {
  reply(200, INFO);
  const sbx = await r.sandboxes.get("sbx_1");
  requests = [];
  return sbx;
}

test("create sends the issue-14 fields in camelCase", async () => {
  reply(200, INFO);
  await rt().sandboxes.create({
    pausable: true,
    idlePauseSeconds: 900,
    autoWake: false,
    onLeaseEnd: "pause",
    persistent: true,
    maxTotalCostMicros: 5_000_000,
    sudo: false,
    funding: "trial",
    region: "local",
  });
  assert.deepEqual(requests[0].body, {
    pausable: true,
    idlePauseSeconds: 900,
    autoWake: false,
    onLeaseEnd: "pause",
    persistent: true,
    maxTotalCostMicros: 5_000_000,
    sudo: false,
    funding: "trial",
    region: "local",
  });
});

test("create with wait: false answers while starting and sends no Prefer", async () => {
  reply(200, { ...INFO, state: "starting" });
  const sbx = await rt().sandboxes.create({ wait: false });
  assert.equal(sbx.state, "starting");
  assert.equal(requests.length, 1);
  assert.equal(requests[0].headers["prefer"], undefined);
});

test("create follows a starting answer until running, or fails start_failed", async () => {
  reply(200, { ...INFO, state: "starting" });
  reply(200, INFO);
  const sbx = await rt().sandboxes.create();
  assert.equal(sbx.state, "running");
  assert.deepEqual(
    requests.map((r) => r.method),
    ["POST", "GET"],
  );
  reply(200, { ...INFO, state: "starting" });
  reply(200, { ...INFO, state: "stopped", stopReason: "startup_failed" });
  await assert.rejects(rt().sandboxes.create(), (e) => e instanceof RuntimeError && e.code === "start_failed");
});

test("getOrCreate sends name and getOrCreate; list filters by name", async () => {
  reply(200, { ...INFO, name: "dev", reused: true });
  const sbx = await rt().sandboxes.getOrCreate("dev", { idlePauseSeconds: 900 });
  assert.equal(sbx.info.reused, true);
  assert.deepEqual(requests[0].body, { idlePauseSeconds: 900, name: "dev", getOrCreate: true });
  reply(200, { ...INFO, name: "dev" });
  await Sandbox.getOrCreate("dev", {}, { client: rt() });
  assert.deepEqual(requests[1].body, { name: "dev", getOrCreate: true });
  reply(200, { data: [{ ...INFO, name: "dev" }], nextCursor: null });
  const page = await rt().sandboxes.list({ name: "dev" });
  assert.equal(page.data[0].id, "sbx_1");
  assert.equal(requests[2].query.name, "dev");
});

test("pause and wake; an awake sandbox's not_paused is success without a new lease", async () => {
  const sbx = await sandbox();
  reply(200, { ...INFO, state: "paused" });
  await sbx.pause();
  assert.equal(sbx.state, "paused");
  assert.equal(sbx.paused, true);
  reply(200, INFO);
  await sbx.wake({ timeoutSeconds: 1200 });
  assert.equal(sbx.state, "running");
  assert.deepEqual(
    requests.map((r) => [r.path, r.body]),
    [
      ["/v1/sandboxes/sbx_1:pause", {}],
      ["/v1/sandboxes/sbx_1:wake", { timeoutSeconds: 1200 }],
    ],
  );
  requests = [];
  reply(409, err("not_paused", 409));
  reply(200, INFO);
  await sbx.wake();
  assert.deepEqual(
    requests.map((r) => r.method),
    ["POST", "GET"],
  );
  reply(409, err("not_paused", 409));
  await assert.rejects(sbx.wake({ timeoutSeconds: 60 }), (e) => e instanceof ConflictError && e.code === "not_paused");
});

test("stop sends Prefer: wait=60 unless wait: false", async () => {
  const sbx = await sandbox();
  reply(200, { ...INFO, state: "stopped" });
  await sbx.stop();
  reply(200, { ...INFO, state: "stopped" });
  await sbx.stop({ wait: false });
  assert.equal(requests[0].headers["prefer"], "wait=60");
  assert.equal(requests[1].headers["prefer"], undefined);
});

test("limits.get", async () => {
  const limits = { access: "full", daily: { limitMicros: null, usedMicros: 0, remainingMicros: null, window: "24h" }, trial: null };
  reply(200, limits);
  assert.deepEqual(await rt().limits.get(), limits);
  assert.equal(requests[0].path, "/v1/limits");
});

test("files.list passes glob, hidden and limit; glob lists under a root", async () => {
  const sbx = await sandbox();
  reply(200, { data: [] });
  await sbx.files.list("/workspace", { depth: 3, glob: "**/*.csv", hidden: false, limit: 10 });
  assert.deepEqual(requests[0].query, { path: "/workspace", depth: "3", glob: "**/*.csv", hidden: "false", limit: "10" });
  reply(200, { data: [] });
  await sbx.files.glob("*.py", "/workspace/src");
  assert.deepEqual(requests[1].query, { path: "/workspace/src", glob: "*.py" });
});

test("fork sends name, not funding", async () => {
  const sbx = await sandbox();
  reply(200, { sandboxes: [{ ...INFO, id: "c1", name: "copy" }] });
  const copy = await sbx.fork({ name: "copy", funding: "trial" });
  assert.equal(copy.id, "c1");
  assert.deepEqual(requests[0].body, { name: "copy" });
});

test("maxConnections caps whole-body calls in flight", async () => {
  const r = rt({ maxConnections: 2 });
  assert.equal(r.transport.maxConnections, 2);
  delayMs = 40;
  for (let i = 0; i < 6; i++) reply(200, INFO);
  await Promise.all(Array.from({ length: 6 }, () => r.sandboxes.get("sbx_1")));
  assert.equal(peak, 2);
  assert.throws(() => rt({ maxConnections: 0 }), RangeError);
});

test("a long exec without callbacks is one JSON answer (1 MiB caps), not a stream", async () => {
  const sbx = await sandbox();
  reply(200, { exitCode: 0, stdout: "x", stderr: "", timedOut: false, stdoutTruncated: false, stderrTruncated: false, durationMs: 1 });
  const r = await sbx.exec("long", { timeoutMs: 120_000 });
  assert.equal(r.stdout, "x");
  assert.deepEqual(requests[0].body, { command: "long", timeoutMs: 120_000 });
});

test("the exec answer's caps are the document's", () => {
  const doc = JSON.parse(readFileSync(new URL("../../../../src/api/kiln/openapi.json", import.meta.url), "utf8"));
  for (const stream of ["stdout", "stderr"]) {
    const prop = doc.components.schemas.CommandResult.properties[stream];
    assert.equal(EXEC_OUTPUT_CAP, prop["x-kiln-max-bytes"]);
    assert.equal(EXEC_LONG_OUTPUT_CAP, prop["x-kiln-long-max-bytes"]);
    assert.equal(EXEC_LONG_CAP_AFTER_MS, prop["x-kiln-long-after-timeout-ms"]);
  }
  assert.equal(execOutputCap(), 65536);
  assert.equal(execOutputCap(60_000), 65536);
  assert.equal(execOutputCap(60_001), 1 << 20);
});
