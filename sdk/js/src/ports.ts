// `sbx.ports`: a server listening in the sandbox, reached through kilnd by
// path (`/v1/sandboxes/{id}/ports/{port}/...`) with the client's key.
import type { Transport } from "./client.js";
import { ConnectionError } from "./errors.js";

export interface PortAnswer {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

export function checkPort(port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port must be 1-65535, not ${port}`);
  return port;
}

export class Ports {
  constructor(
    private readonly t: Transport,
    private readonly sandboxPath: string,
  ) {}

  /** `…/v1/sandboxes/{id}/ports/{port}/` (send the kiln key with it). */
  url(port: number): string {
    return this.t.url(`${this.sandboxPath}/ports/${checkPort(port)}/`);
  }

  /**
   * One HTTP request to the server on `port`. Whatever comes back is
   * answered, errors too: the server's own and kilnd's refusals (502
   * `port_closed` when nothing listens, 409 `not_running`). Never retried.
   */
  async request(
    port: number,
    method: string,
    path = "/",
    options: { body?: string | Uint8Array; headers?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<PortAnswer> {
    const target = this.t.url(`${this.sandboxPath}/ports/${checkPort(port)}${path.startsWith("/") ? path : "/" + path}`);
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (this.t.apiKey) headers["Authorization"] = `Bearer ${this.t.apiKey}`;
    try {
      const init: RequestInit = { method: method.toUpperCase(), headers, redirect: "manual" };
      if (options.body !== undefined) init.body = options.body;
      if (options.signal) init.signal = options.signal;
      const r = await fetch(target, init);
      return { status: r.status, headers: r.headers, body: new Uint8Array(await r.arrayBuffer()) };
    } catch (e) {
      throw new ConnectionError({ code: "connection_error", status: 0, message: `${method} port ${port}${path}: ${String(e)}`, cause: e });
    }
  }
}
