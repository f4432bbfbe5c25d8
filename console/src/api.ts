// kiln's public HTTP API, with the key from this tab's sessionStorage as a Bearer token.
const KEY = "kiln.console.key";

export function getKey(): string | null {
  return sessionStorage.getItem(KEY);
}
export function setKey(key: string): void {
  sessionStorage.setItem(KEY, key);
}
export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string, public requestId?: string) {
    super(message);
  }
  /** What a person reads: the server's message and its code, never a stack. */
  get text(): string {
    if (this.status === 0) return this.message;
    return `${this.message} (${this.code}, HTTP ${this.status}${this.requestId ? `, request ${this.requestId}` : ""})`;
  }
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.text;
  if (e instanceof DOMException && e.name === "AbortError") return "The request was cancelled.";
  if (e instanceof Error) return e.message;
  return String(e);
}

let onUnauthorized: (e: ApiError) => void = () => {};
export function setUnauthorizedHandler(f: (e: ApiError) => void): void {
  onUnauthorized = f;
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined | null>;
  signal?: AbortSignal;
  raw?: boolean; // answer the Response itself (file downloads)
  keyOverride?: string; // sign-in checks a key before keeping it
  quiet401?: boolean;
}

export function url(path: string, query?: RequestOptions["query"]): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const qs = q.toString();
  return path + (qs ? `?${qs}` : "");
}

export async function api<T = any>(path: string, opts: RequestOptions = {}): Promise<T> {
  const key = opts.keyOverride ?? getKey();
  const headers: Record<string, string> = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(opts.body);
  }
  let res: Response;
  try {
    res = await fetch(url(path, opts.query), { method: opts.method || "GET", headers, body, signal: opts.signal,
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(0, "network_error", "Cannot reach kilnd: the network request failed.");
  }
  if (!res.ok) {
    let code = "http_error", message = `HTTP ${res.status}`, requestId = res.headers.get("x-request-id") || undefined;
    try {
      const j = await res.json();
      if (j && j.error) {
        code = j.error.code || code;
        message = j.error.message || message;
        requestId = j.error.requestId || requestId;
      }
    } catch { /* not JSON */ }
    const err = new ApiError(res.status, code, message, requestId);
    if (res.status === 401 && !opts.quiet401) onUnauthorized(err);
    throw err;
  }
  if (opts.raw) return res as unknown as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : null) as T;
}

export const post = <T = any>(path: string, body: unknown = {}, signal?: AbortSignal) =>
  api<T>(path, { method: "POST", body, signal });
