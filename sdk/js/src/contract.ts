// Values of the API contract the SDK relies on, each written once here.
// test/unit/contract.test.mjs checks them against src/api/kiln/openapi.json.

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
/**
 * What a non-streamed exec's answer keeps of stdout and of stderr (the rest
 * is dropped and `stdoutTruncated` / `stderrTruncated` set): 64 KiB, or 1 MiB
 * when `timeoutMs` is over 60 s (CommandResult.stdout x-kiln-max-bytes,
 * x-kiln-long-max-bytes, x-kiln-long-after-timeout-ms).
 */
export const EXEC_OUTPUT_CAP = 64 * 1024;
export const EXEC_LONG_OUTPUT_CAP = 1024 * 1024;
export const EXEC_LONG_CAP_AFTER_MS = 60_000;

/** The answer's cap per stream for an exec with this `timeoutMs` (undefined: the default). */
export function execOutputCap(timeoutMs: number = DEFAULT_EXEC_TIMEOUT_MS): number {
  return timeoutMs > EXEC_LONG_CAP_AFTER_MS ? EXEC_LONG_OUTPUT_CAP : EXEC_OUTPUT_CAP;
}
