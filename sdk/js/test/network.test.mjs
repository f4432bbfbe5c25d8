// sbx.network: rules (get/set/on/off), the egress log, and copies' rules.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { InvalidRequestError } from "kiln";

import { SHAPE, runtime } from "./helpers.mjs";

let sbx;
before(async () => {
  sbx = await runtime.sandboxes.create({
    ...SHAPE,
    labels: { suite: "sdk-js", file: "network" },
    network: { internet: true, allow: ["pkgs.test"] },
  });
});
after(async () => {
  await sbx?.stop();
});

test("rules are set, versioned and read back", async () => {
  let p = await sbx.network.get();
  assert.deepEqual([p.internet, p.allow, p.deny, p.version], [true, ["pkgs.test"], [], 1]);
  p = await sbx.network.set({ internet: true, allow: ["*.example.test"], deny: ["bad.example.test"] });
  assert.deepEqual([p.allow, p.deny, p.version], [["*.example.test"], ["bad.example.test"], 2]);
  assert.equal((await sbx.network.off()).internet, false);
  assert.equal((await sbx.network.on()).version, 4);
});

test("a refused connection is answered at once and logged", async () => {
  await sbx.network.off();
  const r = await sbx.exec("curl -s -o /dev/null -w '%{http_code}' http://example.test/");
  assert.equal(r.stdout, "403");
  const page = await sbx.network.log();
  const last = page.data.at(-1);
  assert.deepEqual([last.host, last.port, last.verdict, last.method], ["example.test", 80, "internet-off", "GET"]);
  assert.equal(page.nextCursor, null);
});

test("bad rules name the field", async () => {
  await assert.rejects(
    sbx.network.set({ internet: true, allow: ["10.0.0.0/8"] }),
    (e) => e instanceof InvalidRequestError && e.details.issues[0].path === "body.allow[0]",
  );
});

test("a fork can be given its own rules", async () => {
  await sbx.network.set({ internet: true, allow: ["pkgs.test"] });
  const copy = await sbx.fork({ network: { internet: false } });
  try {
    assert.equal((await copy.network.get()).internet, false);
    assert.equal((await sbx.network.get()).internet, true);
  } finally {
    await copy.stop();
  }
});
