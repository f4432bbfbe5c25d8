// Unit tests of `runtime.images` against a local fake HTTP server (no
// daemon), and of the build-context packing all clients share.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { gunzipSync } from "node:zlib";
import { after, before, beforeEach, test } from "node:test";

import { DockerIgnore, ImageBuildError, InvalidRequestError, NotFoundError, Runtime, packContext } from "kiln";

// The same tree and digest as sdk/python/tests/test_images_client.py and tests/unit/cli/image_test.cc.
const GOLDEN_DIGEST = "sha256:503240a6176a064c996f3ac1b1bcbcf8e935eabd5a831e008af9220ff3b6c68d";
const IID = "0b0e6a7e-1c5a-4c39-9a43-2f1d8e0c9a11";

function makeTree(root) {
  const put = (rel, data, mode = 0o644) => {
    const path = join(root, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, data);
    chmodSync(path, mode);
  };
  put("Dockerfile", "FROM base\nCOPY . /app\n");
  put(".dockerignore", "# comment\n*.log\nbuild/\n!keep.log\nsecret*\n**/tmp\n");
  put("app.py", "print(1)\n", 0o755);
  put("a.log", "x");
  put("keep.log", "k");
  put("build/out.bin", "out");
  put("src/main.c", "int main(){}\n");
  put("src/tmp/x", "x");
  put("secret.txt", "s");
  put("big.bin", Buffer.from(Array.from({ length: 70000 }, (_, i) => i % 251)), 0o600);
  const d = "d".repeat(60);
  put(`src/deep/${d}/${"e".repeat(60)}.txt`, "long");
  symlinkSync("app.py", join(root, "link"));
  for (const dir of ["build", "src", "src/tmp", "src/deep", `src/deep/${d}`]) chmodSync(join(root, dir), 0o755);
  chmodSync(root, 0o755);
}

function tarNames(tar) {
  const names = [];
  for (let off = 0; off + 512 <= tar.length; ) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const cstr = (a, b) => h.subarray(a, b).toString("utf8").replace(/\0.*$/s, "");
    const prefix = cstr(345, 500);
    names.push((prefix ? prefix + "/" : "") + cstr(0, 100));
    const size = parseInt(cstr(124, 136).trim(), 8);
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return names;
}

let requests = [];
let queue = [];
let server;
let baseUrl;
const reply = (status, body) => queue.push({ status, body });
const info = (state = "queued", extra = {}) => ({ id: IID, kind: "image", name: "web", version: 1, tags: [], state, error: null, ...extra });

before(async () => {
  server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      let body;
      if (raw.length > 0) {
        try {
          body = JSON.parse(raw.toString("utf8"));
        } catch {
          body = raw;
        }
      }
      const u = new URL(req.url, "http://x");
      requests.push({ method: req.method, path: u.pathname, query: Object.fromEntries(u.searchParams), headers: req.headers, body });
      const next = queue.shift() ?? { status: 500, body: { error: { code: "unscripted", status: 500, message: req.url } } };
      res.writeHead(next.status, { "content-type": "application/json" });
      res.end(JSON.stringify(next.body));
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

const rt = () => new Runtime({ apiUrl: baseUrl, apiKey: "k", timeoutMs: 5000, maxRetries: 0 });

test("packContext matches the other clients byte for byte", async () => {
  const root = mkdtempSync(join(tmpdir(), "kiln-ctx-"));
  try {
    makeTree(root);
    const { bytes, digest } = await packContext(root);
    assert.equal(digest, "sha256:" + createHash("sha256").update(bytes).digest("hex"));
    assert.deepEqual([...bytes.subarray(0, 10)], [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
    const d = "d".repeat(60);
    assert.deepEqual(tarNames(gunzipSync(bytes)), [".dockerignore", "Dockerfile", "app.py", "big.bin", "keep.log", "link",
      "src/", "src/deep/", `src/deep/${d}/`, `src/deep/${d}/${"e".repeat(60)}.txt`, "src/main.c"]);
    assert.equal(digest, GOLDEN_DIGEST);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("DockerIgnore follows Docker's rules (the table kilnd and the Python SDK pass)", () => {
  const table = JSON.parse(readFileSync(new URL("../../../../tests/data/dockerignore_cases.json", import.meta.url), "utf8"));
  assert.ok(table.cases.length >= 30);
  for (const c of table.cases) assert.equal(new DockerIgnore(c.patterns).excluded(c.path), c.excluded, JSON.stringify(c));
});

test("build with contextDir uploads a missing context, follows logs, answers the final image", async () => {
  const root = mkdtempSync(join(tmpdir(), "kiln-ctx-"));
  try {
    makeTree(root);
    const { bytes, digest } = await packContext(root);
    reply(200, { missing: [digest] });
    reply(200, { digest, sizeBytes: bytes.length });
    reply(202, info());
    reply(200, { lines: [{ n: 1, text: "step 1/2" }], nextAfter: 1, state: "building", done: false });
    reply(200, { lines: [{ n: 2, text: "ok" }], nextAfter: 2, state: "ready", done: true });
    reply(200, info("ready"));
    const seen = [];
    const img = await rt().images.build(
      { name: "web", contextDir: root, tags: ["v1"], build: { memoryMiB: 2048 }, start: { command: "serve", readyPort: 8000 }, cache: false },
      { onLog: (l) => seen.push(l.text) },
    );
    assert.equal(img.state, "ready");
    assert.deepEqual(seen, ["step 1/2", "ok"]);
    assert.deepEqual(requests.map((r) => `${r.method} ${r.path}`), [
      "POST /v1/images/context/missing", `PUT /v1/images/context/${digest}`, "POST /v1/images",
      `GET /v1/images/${IID}/logs`, `GET /v1/images/${IID}/logs`, `GET /v1/images/${IID}`]);
    assert.deepEqual(requests[0].body, { digests: [digest] });
    assert.equal(requests[1].headers["content-type"], "application/gzip");
    assert.ok(Buffer.compare(requests[1].body, bytes) === 0);
    assert.deepEqual(requests[2].body, { name: "web", dockerfile: "FROM base\nCOPY . /app\n", context: digest, tags: ["v1"],
      build: { memoryMiB: 2048 }, start: { command: "serve", readyPort: 8000 }, cache: false });
    assert.ok(requests[2].headers["idempotency-key"]);
    assert.deepEqual(requests[3].query, { after: "0", follow: "true" });
    assert.deepEqual(requests[4].query, { after: "1", follow: "true" });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("a failed build rejects with ImageBuildError carrying the error fields", async () => {
  reply(202, info());
  reply(200, { lines: [], nextAfter: 0, state: "failed", done: true });
  reply(200, info("failed", { error: { code: "build_step_failed", message: "exit 2", step: 3, line: 7, instruction: "RUN make", exitCode: 2, logTail: ["x"] } }));
  await assert.rejects(rt().images.build({ name: "web", dockerfile: "FROM x\n" }), (e) => {
    assert.ok(e instanceof ImageBuildError);
    assert.equal(e.code, "build_step_failed");
    assert.equal(e.step, 3);
    assert.equal(e.line, 7);
    assert.equal(e.exitCode, 2);
    assert.deepEqual(e.logTail, ["x"]);
    assert.match(e.message, /step 3.*line 7/);
    return true;
  });
});

test("build refuses bad arguments before sending", async () => {
  const r = rt();
  await assert.rejects(r.images.build({ name: "x" }), /exactly one/);
  await assert.rejects(r.images.build({ name: "x", recipe: {}, image: "y" }), /exactly one/);
  await assert.rejects(r.images.build({ recipe: { base: "b" } }), /needs a name/);
  await assert.rejects(r.images.build({ name: "x", recipe: {}, target: "t" }), /dockerfile build/);
  assert.equal(requests.length, 0);
});

test("recipe and image builds; API errors keep their class", async () => {
  reply(202, info());
  await rt().images.build({ name: "data", recipe: { base: "python:3.12", pip: ["pandas"] } }, { wait: false });
  assert.deepEqual(requests[0].body, { name: "data", recipe: { base: "python:3.12", pip: ["pandas"] } });
  reply(422, { error: { code: "invalid_image", status: 422, message: "bad ref" } });
  await assert.rejects(rt().images.build({ image: "bad ref" }, { wait: false }), InvalidRequestError);
  assert.deepEqual(requests[1].body, { image: "bad ref" });
});

test("get/resolve/list/versions/tag/untag/delete/pool/prune/registries hit their routes", async () => {
  const r = rt();
  reply(200, info("ready"));
  await r.images.get(IID);
  reply(200, info("ready"));
  await r.images.get("web:v1");
  reply(200, { data: [info("ready", { version: 2 })], nextCursor: "c" });
  reply(200, { data: [info("ready", { version: 1 })], nextCursor: null });
  assert.deepEqual((await r.images.versions("web")).map((i) => i.version), [2, 1]);
  reply(200, info("ready"));
  reply(200, info("ready", { tags: ["v2"] }));
  await r.images.tag("web", "v2");
  reply(200, info());
  await r.images.untag(IID, "v2");
  reply(200, info("deleted"));
  await r.images.delete(IID);
  reply(200, { size: 2, ready: 1 });
  assert.deepEqual(await r.images.pool(IID, 2), { size: 2, ready: 1 });
  reply(200, { layersRemoved: 1, cacheEntriesRemoved: 0, bytesFreed: 9 });
  await r.images.prune();
  reply(200, { registry: "ghcr.io", username: "u", createdAt: "t" });
  await r.images.registries.set("ghcr.io", { username: "u", password: "p" });
  reply(200, { data: [] });
  assert.deepEqual(await r.images.registries.list(), []);
  reply(200, { registry: "ghcr.io", deleted: true });
  await r.images.registries.delete("ghcr.io");
  assert.deepEqual(requests.map((q) => `${q.method} ${q.path}`), [
    `GET /v1/images/${IID}`, "GET /v1/images/resolve", "GET /v1/images", "GET /v1/images",
    "GET /v1/images/resolve", `POST /v1/images/${IID}:tag`, `POST /v1/images/${IID}:untag`,
    `POST /v1/images/${IID}:delete`, `POST /v1/images/${IID}:pool`, "POST /v1/images:prune",
    "POST /v1/images/registries", "GET /v1/images/registries", "POST /v1/images/registries:delete"]);
  assert.deepEqual(requests[1].query, { ref: "web:v1" });
  assert.deepEqual(requests[2].query, { name: "web" });
  assert.deepEqual(requests[3].query, { name: "web", cursor: "c" });
  assert.deepEqual(requests[5].body, { tag: "v2" });
  assert.deepEqual(requests[8].body, { size: 2 });
  assert.deepEqual(requests[10].body, { registry: "ghcr.io", username: "u", password: "p" });
  assert.deepEqual(requests[12].body, { registry: "ghcr.io" });
});

test("an unknown ref is NotFoundError", async () => {
  reply(404, { error: { code: "image_not_found", status: 404, message: "no image" } });
  await assert.rejects(rt().images.delete("web:nope"), NotFoundError);
});

test("sandboxes.create passes image and keeps start", async () => {
  reply(200, { id: "sbx_1", state: "running", start: { state: "ready", processId: "p1", readyMs: 50 } });
  const sbx = await rt().sandboxes.create({ image: "web:v1" }, { waitForCapacityMs: 0 });
  assert.equal(requests[0].body.image, "web:v1");
  assert.deepEqual(sbx.start, { state: "ready", processId: "p1", readyMs: 50 });
});
