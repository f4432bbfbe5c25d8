// The package answers to the import name of the public runtime SDK.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import * as kiln from "kiln";
import { NotFoundError, Runtime, Sandbox, VERSION } from "withruntime";

test("withruntime is the same module as kiln", () => {
  assert.equal(Runtime, kiln.Runtime);
  assert.equal(Sandbox, kiln.Sandbox);
  assert.equal(NotFoundError, kiln.NotFoundError);
  assert.equal(VERSION, kiln.VERSION);
});

test("a sandbox through withruntime, configured from the environment", async () => {
  const runtime = new Runtime();
  assert.equal(runtime.apiUrl, process.env.KILN_API_URL.replace(/\/+$/, ""));
  const sbx = await Sandbox.create({ vcpu: 1, memoryMiB: 512 }, { client: runtime });
  try {
    const r = await sbx.exec(["python3", "-c", "print(6 * 7)"], { check: true });
    assert.equal(r.stdout, "42\n");
  } finally {
    await sbx.stop();
  }
});

test("RUNTIME_API_* configure it when KILN_* are unset; else the default URL and the admin key file", async () => {
  const saved = { ...process.env };
  try {
    process.env.RUNTIME_API_URL = process.env.KILN_API_URL;
    process.env.RUNTIME_API_KEY = process.env.KILN_API_KEY;
    delete process.env.KILN_API_URL;
    delete process.env.KILN_API_KEY;
    const runtime = new Runtime();
    assert.equal(runtime.apiUrl, saved.KILN_API_URL.replace(/\/+$/, ""));
    await runtime.sandboxes.list();
    // With nothing set it goes to the local default, with the admin key file when readable.
    delete process.env.RUNTIME_API_URL;
    delete process.env.RUNTIME_API_KEY;
    process.env.KILN_ADMIN_KEY_FILE = "/nonexistent/admin.key";
    const local = new Runtime();
    assert.equal(local.apiUrl, "http://127.0.0.1:7070");
    assert.equal(local.transport.apiKey, undefined);
    // A readable key file is used when no key is set.
    const dir = await mkdtemp(join(tmpdir(), "kiln-key-"));
    try {
      await writeFile(join(dir, "admin.key"), `${saved.KILN_API_KEY}\n`, { mode: 0o600 });
      process.env.KILN_ADMIN_KEY_FILE = join(dir, "admin.key");
      process.env.KILN_API_URL = saved.KILN_API_URL;
      const fromFile = new Runtime();
      assert.equal(fromFile.transport.apiKey, saved.KILN_API_KEY);
      await fromFile.sandboxes.list();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  } finally {
    for (const k of ["KILN_API_URL", "KILN_API_KEY", "RUNTIME_API_URL", "RUNTIME_API_KEY", "KILN_ADMIN_KEY_FILE"]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
});
