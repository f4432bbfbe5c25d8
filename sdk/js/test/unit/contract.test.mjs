// The SDK's API contract values (src/contract.ts) against src/api/kiln/openapi.json.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { DEFAULT_EXEC_TIMEOUT_MS, EXEC_GRACE_MS, MAX_EXEC_TIMEOUT_MS } from "../../dist/contract.js";

const doc = JSON.parse(readFileSync(new URL("../../../../src/api/kiln/openapi.json", import.meta.url), "utf8"));
const execTimeout = doc.components.schemas.ExecRequest.properties.timeoutMs;

test("the default exec timeout is the document's", () => {
  assert.equal(DEFAULT_EXEC_TIMEOUT_MS, execTimeout.default);
});

test("the longest exec timeout is the document's maximum", () => {
  assert.equal(MAX_EXEC_TIMEOUT_MS, execTimeout.maximum);
});

test("a call waits past the command's timeout as long as kilnd may take to answer", () => {
  assert.equal(EXEC_GRACE_MS, execTimeout["x-kiln-grace-ms"]);
});
