// Values of the API contract the SDK relies on, each written once here.
// test/unit/contract.test.mjs checks them against src/api/openapi.json.

/** The server's default `timeoutMs` of an exec (ExecRequest.timeoutMs default). */
export const DEFAULT_EXEC_TIMEOUT_MS = 60_000;
/** The largest `timeoutMs` an exec may ask for (ExecRequest.timeoutMs maximum). */
export const MAX_EXEC_TIMEOUT_MS = 86_400_000;
/**
 * How long past its command's own timeout kilnd may take to answer an exec
 * (killing a large process tree is not instant); a call waits that much
 * longer before giving up (ExecRequest.timeoutMs x-kiln-grace-ms).
 */
export const EXEC_GRACE_MS = 30_000;
