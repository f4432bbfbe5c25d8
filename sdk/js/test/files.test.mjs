// Files: write/read/list/stat/mkdir/rename/remove, and whole folders with
// upload (a local tree through the tar archive route) and download.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { chmod, lstat, mkdir, mkdtemp, readFile, readlink, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { ConflictError, NotFoundError } from "kiln";

import { SHAPE, runtime } from "./helpers.mjs";

let sbx;
let local;
before(async () => {
  sbx = await runtime.sandboxes.create({ ...SHAPE, labels: { suite: "sdk-js", file: "files" } });
  local = await mkdtemp(join(tmpdir(), "kiln-sdk-js-"));
});
after(async () => {
  await sbx?.stop();
  if (local) await rm(local, { recursive: true, force: true });
});

const sha = (data) => createHash("sha256").update(data).digest("hex");

test("write, readText, readBytes, stat, list", async () => {
  const w = await sbx.files.write("/workspace/notes/a.txt", "hello\nworld\n");
  assert.deepEqual(w, { path: "/workspace/notes/a.txt", size: 12 });
  assert.equal(await sbx.files.readText("/workspace/notes/a.txt"), "hello\nworld\n");
  const bin = new Uint8Array([0, 1, 2, 253, 254, 255]);
  await sbx.files.write("/workspace/notes/b.bin", bin, { mode: 0o600 });
  assert.deepEqual(await sbx.files.readBytes("/workspace/notes/b.bin"), bin);
  const st = await sbx.files.stat("/workspace/notes/b.bin");
  assert.equal(st.exists, true);
  assert.equal(st.type, "file");
  assert.equal(st.size, 6);
  assert.equal(st.mode, "600");
  assert.deepEqual(await sbx.files.stat("/workspace/nothing"), { exists: false, path: "/workspace/nothing" });
  assert.equal(await sbx.files.exists("/workspace/notes/a.txt"), true);
  const names = (await sbx.files.list("/workspace/notes")).map((e) => e.name).sort();
  assert.deepEqual(names, ["a.txt", "b.bin"]);
  // What the SDK wrote is what a command in the sandbox sees.
  assert.equal((await sbx.exec("cat /workspace/notes/a.txt")).stdout, "hello\nworld\n");
});

test("mkdir, rename, remove", async () => {
  const d = await sbx.files.mkdir("/workspace/x/y/z");
  assert.equal(d.type, "directory");
  await sbx.files.write("/workspace/x/y/z/f", "f");
  const moved = await sbx.files.rename("/workspace/x/y/z/f", "/workspace/x/g");
  assert.equal(moved.path, "/workspace/x/g");
  await assert.rejects(sbx.files.remove("/workspace/x"), (e) => e instanceof ConflictError || e.status === 409 || e.status === 400);
  assert.equal(await sbx.files.remove("/workspace/x", { recursive: true }), true);
  assert.equal(await sbx.files.remove("/workspace/x", { recursive: true }), false);
  assert.equal(await sbx.files.exists("/workspace/x"), false);
  await assert.rejects(sbx.files.readText("/workspace/x/g"), (e) => e instanceof NotFoundError && e.code === "file_not_found");
});

test("upload copies a local folder (nested, long names, modes, symlink, binary, 3 MiB) in one archive", async () => {
  const src = join(local, "project");
  const deep = join(src, "src", "d".repeat(80), "e".repeat(80));
  await mkdir(deep, { recursive: true });
  await mkdir(join(src, "empty"));
  await writeFile(join(src, "README.md"), "# project\n");
  await writeFile(join(src, "src", "run.sh"), "#!/bin/sh\necho ran \"$@\"\n");
  await chmod(join(src, "src", "run.sh"), 0o755);
  const bin = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7) % 256));
  await writeFile(join(deep, "data.bin"), bin);
  const big = Buffer.alloc(3 * 1024 * 1024 + 3, 0x5a);
  await writeFile(join(src, "big.dat"), big);
  await symlink("README.md", join(src, "readme-link"));

  const r = await sbx.files.upload(src, "/workspace/project");
  assert.equal(r.path, "/workspace/project");
  assert.equal(r.files, 4);
  assert.equal(r.bytes, 10 + 24 + bin.length + big.length);

  const rel = `src/${"d".repeat(80)}/${"e".repeat(80)}/data.bin`;
  const check = await sbx.exec(
    `cd /workspace/project && ./src/run.sh ok && readlink readme-link && test -d empty && echo empty-dir && sha256sum big.dat ${rel} | cut -c1-64 && stat -c '%U %a' src/run.sh`,
    { check: true },
  );
  assert.equal(check.stdout, `ran ok\nREADME.md\nempty-dir\n${sha(big)}\n${sha(bin)}\nuser 755\n`);

  // A single file keeps its permission bits.
  await sbx.files.upload(join(src, "src", "run.sh"), "/workspace/bin/run.sh");
  assert.equal((await sbx.exec("/workspace/bin/run.sh single")).stdout, "ran single\n");

  // gzip'ed upload goes through the same route.
  await sbx.files.upload(src, "/workspace/project-gz", { gzip: true });
  assert.equal((await sbx.exec(`sha256sum /workspace/project-gz/big.dat | cut -c1-64`)).stdout, `${sha(big)}\n`);
});

test("download copies a folder and a file back", async () => {
  await sbx.exec("mkdir -p /workspace/out/sub && printf 'α\\n' > /workspace/out/sub/u.txt && head -c 100000 /dev/urandom > /workspace/out/r.bin && chmod 750 /workspace/out/sub && ln -s sub/u.txt /workspace/out/l", { check: true });
  const remoteSum = (await sbx.exec("sha256sum /workspace/out/r.bin | cut -c1-64")).stdout.trim();
  const dest = join(local, "out");
  const r = await sbx.files.download("/workspace/out", dest);
  assert.equal(r.files, 2);
  assert.equal(await readFile(join(dest, "sub", "u.txt"), "utf8"), "α\n");
  assert.equal(sha(await readFile(join(dest, "r.bin"))), remoteSum);
  assert.equal(await readlink(join(dest, "l")), "sub/u.txt");
  assert.equal((await lstat(join(dest, "sub"))).mode & 0o777, 0o750);

  const one = await sbx.files.download("/workspace/out/r.bin", join(local, "single", "r.bin"));
  assert.equal(one.bytes, 100000);
  assert.equal(sha(await readFile(join(local, "single", "r.bin"))), remoteSum);
  await assert.rejects(sbx.files.download("/workspace/none", join(local, "none")), (e) => e.code === "file_not_found");
});
