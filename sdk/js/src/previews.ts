// `sbx.previews`: share a port at its own host name, private (a token) or public.
import { newIdempotencyKey } from "./client.js";
import { checkPort } from "./ports.js";
import type { Sandbox } from "./sandbox.js";

export interface Preview {
  id: string;
  sandboxId: string;
  port: number;
  visibility: "private" | "public";
  url: string;
  token: string | null;
  tokenExpiresAt: string | null;
  urlWithToken: string;
  disabled: boolean;
  embedOrigins: string[];
  createdAt: string;
}

export class Previews {
  constructor(private readonly sandbox: Sandbox) {}

  /** Shares `port` (again: changes its visibility and token lifetime). */
  create(
    port: number,
    options: { visibility?: "private" | "public"; ttlSeconds?: number; expiresAt?: string } = {},
  ): Promise<Preview> {
    return this.sandbox.call<Preview>({
      method: "POST",
      path: "/previews",
      json: { port: checkPort(port), ...options },
      idempotencyKey: newIdempotencyKey(),
      retry: "safe",
    });
  }

  /** Every shared port, each private one with a fresh token. */
  async list(): Promise<Preview[]> {
    return (await this.sandbox.call<{ data: Preview[] }>({ method: "GET", path: "/previews" })).data;
  }

  /** The preview with a new token of that lifetime (the earlier bound wins). */
  get(port: number, ttlSeconds?: number, options: { expiresAt?: string } = {}): Promise<Preview> {
    return this.sandbox.call<Preview>({
      method: "GET",
      path: `/previews/${checkPort(port)}`,
      query: { ttlSeconds, expiresAt: options.expiresAt },
    });
  }

  /** A new secret: every earlier token is refused and open connections are cut. */
  rotate(port: number): Promise<Preview> {
    return this.sandbox.call<Preview>({
      method: "POST",
      path: `/previews/${checkPort(port)}:rotate`,
      json: {},
      idempotencyKey: newIdempotencyKey(),
      retry: "safe",
    });
  }

  delete(port: number): Promise<{ id: string; sandboxId: string; port: number; deleted: true }> {
    return this.sandbox.call({ method: "DELETE", path: `/previews/${checkPort(port)}` });
  }
}
