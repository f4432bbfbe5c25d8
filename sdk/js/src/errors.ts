// Error classes: one per kind of answer, chosen from the HTTP status and the
// error code of the API's error body
// `{"error": {code, status, message, requestId, hint?, details?, retryAfterMs?}}`.

/** Fields every SDK error carries. */
export interface ErrorInit {
  code: string;
  status: number;
  message: string;
  requestId?: string | undefined;
  hint?: string | undefined;
  details?: Record<string, unknown> | undefined;
  idempotencyKey?: string | undefined;
  retryAfterMs?: number | undefined;
  cause?: unknown;
}

/** Codes of refusals that clear on their own: a create waits them out. */
export const CAPACITY_CODES: ReadonlySet<string> = new Set([
  "no_capacity",
  "quota_exceeded",
  "trial_busy",
  "trial_domain_limit",
  "trial_capacity",
  "volume_releasing",
]);

/** 503 codes the server sends on purpose: retrying cannot help. */
export const DELIBERATE_CODES: ReadonlySet<string> = new Set([
  "unavailable",
  "unsupported",
  "fork_unavailable",
  "previews_unavailable",
  "network_unavailable",
  "network_rules_unavailable",
  "secrets_unavailable",
  "identity_unavailable",
  "env_unavailable",
  "resize_unavailable",
]);

/**
 * Base class of every error the SDK throws (the reference SDK's
 * `RuntimeError`; also exported as `KilnError`). `status` is the HTTP status,
 * 0 when no answer came.
 */
export class RuntimeError extends Error {
  readonly code: string;
  readonly status: number;
  readonly requestId: string | undefined;
  readonly hint: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  readonly idempotencyKey: string | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(init: ErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.hint = init.hint;
    this.details = init.details;
    this.idempotencyKey = init.idempotencyKey;
    this.retryAfterMs = init.retryAfterMs;
  }

  /** Whether the same call may succeed if sent again later. */
  get retryable(): boolean {
    if (DELIBERATE_CODES.has(this.code)) return false;
    if (CAPACITY_CODES.has(this.code)) return this.details?.["field"] !== "count";
    return [0, 429, 502, 503, 504].includes(this.status);
  }

  override toString(): string {
    let s = `${this.name}: [${this.code} ${this.status}] ${this.message}`;
    if (this.hint) s += `\nHint: ${this.hint}`;
    if (this.requestId) s += `\nRequest: ${this.requestId}`;
    return s;
  }
}

/** 401: the key is missing, unknown or revoked. */
export class AuthenticationError extends RuntimeError {}
/** 403. */
export class PermissionDeniedError extends RuntimeError {}
/** 404: unknown sandbox, process, snapshot, file or route. */
export class NotFoundError extends RuntimeError {}
/** 409: the resource's state forbids the call (e.g. `not_running`). */
export class ConflictError extends RuntimeError {}
/** 409 `no_capacity` / `quota_exceeded`: no room, even after waiting. */
export class CapacityError extends ConflictError {}
/** 400, 413, 422: the request itself is wrong; `details.issues` names fields. */
export class InvalidRequestError extends RuntimeError {}
/** 429. */
export class RateLimitError extends RuntimeError {}
/** 5xx. */
export class ServiceUnavailableError extends RuntimeError {}
/** `account_blocked`. */
export class AccountBlockedError extends RuntimeError {}
/** No answer: the connection failed or broke (code `connection_error`). */
export class ConnectionError extends RuntimeError {}
/** The call's deadline passed before the answer was complete (code `timeout`). */
export class TimeoutError extends ConnectionError {}

/** Thrown by `exec(..., { check: true })` for a non-zero exit or a timeout. */
export class CommandError extends RuntimeError {
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;

  constructor(
    init: ErrorInit & { exitCode: number | null; stdout: string; stderr: string; timedOut: boolean },
  ) {
    super(init);
    this.exitCode = init.exitCode;
    this.stdout = init.stdout;
    this.stderr = init.stderr;
    this.timedOut = init.timedOut;
  }
}

/** Short names: `AuthError` = `AuthenticationError`, `KilnError` = `RuntimeError`. */
export { AuthenticationError as AuthError, RuntimeError as KilnError };

type ErrorClass = new (init: ErrorInit) => RuntimeError;

/** The class for an answer's status and code. */
export function errorClassFor(status: number, code: string): ErrorClass {
  if (code === "account_blocked") return AccountBlockedError;
  if (CAPACITY_CODES.has(code) && (status === 409 || status === 503)) return CapacityError;
  if (status === 401) return AuthenticationError;
  if (status === 403) return PermissionDeniedError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 400 || status === 413 || status === 422) return InvalidRequestError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return ServiceUnavailableError;
  return RuntimeError;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/**
 * The error for a non-2xx answer: `body` is its text (any shape), `headers`
 * give `x-request-id` and `Retry-After` when the body lacks them.
 */
export function errorFromAnswer(
  status: number,
  bodyText: string,
  headers: Headers | undefined,
  idempotencyKey?: string,
): RuntimeError {
  let e: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(bodyText);
    if (parsed && typeof parsed === "object" && "error" in parsed) {
      const inner = (parsed as { error: unknown }).error;
      if (inner && typeof inner === "object") e = inner as Record<string, unknown>;
    }
  } catch {
    // not JSON: described by the status alone
  }
  const code = str(e["code"]) ?? (status >= 500 ? "internal_error" : `http_${status}`);
  let retryAfterMs: number | undefined;
  if (typeof e["retryAfterMs"] === "number" && Number.isInteger(e["retryAfterMs"])) {
    retryAfterMs = e["retryAfterMs"];
  } else {
    const h = headers?.get("retry-after");
    if (h && /^\d+$/.test(h.trim())) retryAfterMs = Number(h.trim()) * 1000;
  }
  const details = e["details"];
  const message =
    str(e["message"]) ?? (bodyText.trim().slice(0, 300) || `HTTP ${status} without an error body`);
  const Cls = errorClassFor(status, code);
  return new Cls({
    code,
    status,
    message,
    requestId: str(e["requestId"]) ?? headers?.get("x-request-id") ?? undefined,
    hint: str(e["hint"]),
    details: details && typeof details === "object" ? (details as Record<string, unknown>) : undefined,
    idempotencyKey,
    retryAfterMs,
  });
}
