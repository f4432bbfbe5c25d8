// sbx.ports, sbx.forwardPort, sbx.previews, sbx.interpreter and sbx.files.watch
// against kilnd. The server in the sandbox is tests/integration/port_server.py.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import { after, before, test } from "node:test";

import { NotFoundError, PermissionDeniedError } from "kiln";

import { SHAPE, runtime } from "./helpers.mjs";

const HTTP_PORT = 8000;
const ECHO_PORT = 9000;
const SERVER = readFileSync(new URL("../../../tests/integration/port_server.py", import.meta.url), "utf8");

let sbx;
before(async () => {
  sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "sdk-js", file: "ports" } });
  await sbx.files.write("/tmp/port_server.py", SERVER);
  await sbx.spawn(["python3", "/tmp/port_server.py", String(HTTP_PORT), String(ECHO_PORT)]);
  const deadline = Date.now() + 30_000;
  while ((await sbx.ports.request(HTTP_PORT, "GET", "/echo")).status !== 200) {
    assert.ok(Date.now() < deadline, "the port server did not come up");
    await new Promise((r) => setTimeout(r, 100));
  }
});
after(async () => {
  await sbx?.stop();
});

test("ports.url and ports.request", async () => {
  assert.equal(sbx.ports.url(HTTP_PORT), `${process.env.KILN_API_URL.replace(/\/$/, "")}/v1/sandboxes/${sbx.id}/ports/${HTTP_PORT}/`);
  const r = await sbx.ports.request(HTTP_PORT, "GET", "/echo?x=1", { headers: { "X-Custom": "yes" } });
  const got = JSON.parse(Buffer.from(r.body).toString());
  assert.equal(got.path, "/echo?x=1");
  assert.equal(got.headers["X-Custom"], "yes");
  assert.equal(got.headers["Authorization"], undefined);
  const closed = await sbx.ports.request(8999, "GET", "/");
  assert.equal(closed.status, 502);
  assert.throws(() => sbx.ports.url(0), RangeError);
});

function get(port, path) {
  return new Promise((resolve, reject) => {
    http.get({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
    }).on("error", reject);
  });
}

test("forwardPort: HTTP and a 3 MiB echo through the local port", async () => {
  const fwd = await sbx.forwardPort(HTTP_PORT, { localPort: 0 });
  try {
    assert.ok(fwd.localPort > 0);
    for (let i = 0; i < 3; i++) {
      const r = await get(fwd.localPort, `/echo?i=${i}`);
      assert.equal(JSON.parse(r.body.toString()).path, `/echo?i=${i}`);
    }
    assert.equal((await get(fwd.localPort, "/big?n=5000000")).body.length, 5_000_000);
  } finally {
    await fwd.close();
  }
  const echo = await sbx.forwardPort(ECHO_PORT, { localPort: 0 });
  try {
    const data = randomBytes(3 << 20);
    const got = await new Promise((resolve, reject) => {
      const chunks = [];
      const s = net.connect(echo.localPort, "127.0.0.1", () => s.end(data));
      s.on("data", (c) => chunks.push(c));
      s.on("end", () => resolve(Buffer.concat(chunks)));
      s.on("error", reject);
    });
    assert.equal(got.length, data.length);
    assert.equal(createHash("sha256").update(got).digest("hex"), createHash("sha256").update(data).digest("hex"));
  } finally {
    await echo.close();
  }
});

function previewGet(sid, token) {
  const u = new URL(process.env.KILN_API_URL);
  const headers = { Host: `${HTTP_PORT}-${sid}.localhost` };
  if (token) headers["x-kiln-preview-token"] = token;
  return new Promise((resolve, reject) => {
    http.get({ host: u.hostname, port: u.port, path: "/echo", headers, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    }).on("error", reject);
  });
}

test("previews: create, list, get, rotate, delete", async () => {
  const p = await sbx.previews.create(HTTP_PORT, { ttlSeconds: 600 });
  assert.equal(p.visibility, "private");
  assert.equal(await previewGet(sbx.id, p.token), 200);
  assert.equal(await previewGet(sbx.id, undefined), 401);
  assert.deepEqual((await sbx.previews.list()).map((x) => x.port), [HTTP_PORT]);
  assert.equal((await sbx.previews.get(HTTP_PORT, 120)).id, p.id);
  const rotated = await sbx.previews.rotate(HTTP_PORT);
  assert.equal(await previewGet(sbx.id, p.token), 401);
  assert.equal(await previewGet(sbx.id, rotated.token), 200);
  await assert.rejects(sbx.previews.create(HTTP_PORT, { visibility: "public" }), PermissionDeniedError);
  assert.deepEqual(await sbx.previews.delete(HTTP_PORT), { id: p.id, sandboxId: sbx.id, port: HTTP_PORT, deleted: true });
  await assert.rejects(sbx.previews.get(HTTP_PORT), NotFoundError);
});

test("interpreter: state, streamed callbacks, errors, timeouts and contexts", async () => {
  assert.equal((await sbx.interpreter.run("x = 20")).status, "ok");
  const r = await sbx.interpreter.run("x * 2 + 2");
  assert.equal(r.results[0].data["text/plain"], "42");
  const out = [];
  const err = [];
  const results = [];
  const ex = await sbx.interpreter.run("import sys\nprint('a')\nprint('b', file=sys.stderr)\nx", {
    onStdout: (t) => out.push(t),
    onStderr: (t) => err.push(t),
    onResult: (x) => results.push(x),
  });
  assert.equal(ex.status, "ok");
  assert.equal(out.join(""), "a\n");
  assert.equal(err.join(""), "b\n");
  assert.equal(results[0].data["text/plain"], "20");
  const errors = [];
  const bad = await sbx.interpreter.run("1 / 0", { onError: (e) => errors.push(e) });
  assert.equal(bad.status, "error");
  assert.equal(errors[0].name, "ZeroDivisionError");
  assert.equal((await sbx.interpreter.run("import time\ntime.sleep(20)", { timeoutMs: 400 })).status, "timeout");
  assert.equal((await sbx.interpreter.run("[1, 2].length * 21", { language: "javascript" })).results[0].data["text/plain"], "42");
  const ctx = await sbx.interpreter.contexts.create({ id: "js-other", language: "python" });
  assert.equal(ctx.id, "js-other");
  assert.equal((await sbx.interpreter.run("x", { context: "js-other" })).error.name, "NameError");
  assert.ok((await sbx.interpreter.contexts.list()).some((c) => c.id === "js-other"));
  assert.equal(await sbx.interpreter.contexts.interrupt("js-other"), false);
  await sbx.interpreter.contexts.restart("python");
  assert.equal((await sbx.interpreter.run("x")).error.name, "NameError");
  assert.equal(await sbx.interpreter.contexts.delete("js-other"), true);
  await assert.rejects(sbx.interpreter.run("1", { context: "nope" }), NotFoundError);
});

test("files.watch: polled and followed events, stop", async () => {
  await sbx.files.mkdir("/workspace/jw");
  const w = await sbx.files.watch("/workspace/jw", { recursive: true, batchMs: 50 });
  assert.deepEqual((await sbx.files.watches.list()).filter((x) => x.state === "running").map((x) => x.id), [w.id]);
  await sbx.files.write("/workspace/jw/a.txt", "1");
  let events = [];
  const deadline = Date.now() + 20_000;
  while (!events.some((e) => e.path === "/workspace/jw/a.txt")) {
    assert.ok(Date.now() < deadline, JSON.stringify(events));
    events = events.concat(await w.getNewEvents(2000));
  }
  assert.equal(events[0].type, "create");
  const renamed = (async () => {
    for await (const e of w) if (e.type === "rename") return e;
  })();
  await sbx.files.rename("/workspace/jw/a.txt", "/workspace/jw/b.txt");
  const e = await renamed;
  assert.equal(e.oldPath, "/workspace/jw/a.txt");
  assert.equal(e.path, "/workspace/jw/b.txt");
  assert.equal(await w.stop(), true);
  assert.deepEqual(await w.getNewEvents(), []);
  assert.equal(w.exitReason, "stopped");
});
