// Egress rules of a sandbox: `sbx.network.get/set/on/off/log`.
import type { Sandbox } from "./sandbox.js";
import type { EgressEntry, NetworkPolicy, NetworkRules, RequestOptions } from "./types.js";

/**
 * Egress rules of a sandbox (`GET/PUT /v1/sandboxes/{id}/network`,
 * `GET …/network/log`). A PUT replaces every rule and applies at once, also
 * to open connections.
 */
export class Network {
  constructor(private readonly sandbox: Sandbox) {}

  async get(options: RequestOptions = {}): Promise<NetworkPolicy> {
    return this.sandbox.call<NetworkPolicy>({ method: "GET", path: "/network", signal: options.signal, timeoutMs: options.timeoutMs });
  }

  /** Replaces every rule: `{internet, allow?, deny?, connect?}`. */
  async set(rules: NetworkRules, options: RequestOptions = {}): Promise<NetworkPolicy> {
    return this.sandbox.call<NetworkPolicy>({
      method: "PUT",
      path: "/network",
      json: rules,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  off(options: RequestOptions = {}): Promise<NetworkPolicy> {
    return this.set({ internet: false }, options);
  }

  on(options: RequestOptions = {}): Promise<NetworkPolicy> {
    return this.set({ internet: true }, options);
  }

  /** One page of the egress log (connections allowed and refused), oldest first. */
  async log(
    query: { limit?: number; cursor?: string } = {},
    options: RequestOptions = {},
  ): Promise<{ data: EgressEntry[]; nextCursor: string | null }> {
    return this.sandbox.call({ method: "GET", path: "/network/log", query, signal: options.signal, timeoutMs: options.timeoutMs });
  }
}
