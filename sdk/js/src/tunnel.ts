// `sbx.forwardPort(port)`: a local TCP listener whose connections ride the
// sandbox's tunnel WebSocket (`GET /v1/sandboxes/{id}/tunnel?port=P`).
// Frames both ways: a kind byte, a 32-bit big-endian stream number, a
// payload. This side keeps at most TUNNEL_WINDOW data bytes past the count
// the last `a` frame acknowledged (more would end the tunnel). Node 20 has
// no WebSocket client, so a minimal RFC 6455 one is here (node:http upgrade).
import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import type { Duplex } from "node:stream";

import { ConnectionError, RuntimeError, errorFromAnswer } from "./errors.js";
import type { Transport } from "./client.js";

export const TUNNEL_WINDOW = 1 << 20;
export const WS_MAX_MESSAGE = 16 << 20;
const INBOX_CAP = 8 << 20;

export type TunnelKind = "o" | "d" | "e" | "c" | "a";
const KINDS = new Set(["o", "d", "e", "c", "a"]);

export function encodeTunnelFrame(kind: TunnelKind, stream: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  if (!KINDS.has(kind) || !Number.isInteger(stream) || stream < 0 || stream > 0xffffffff)
    throw new RangeError(`bad tunnel frame: ${kind} ${stream}`);
  const out = Buffer.allocUnsafe(5 + payload.length);
  out.write(kind, 0, "latin1");
  out.writeUInt32BE(stream, 1);
  out.set(payload, 5);
  return out;
}

export function decodeTunnelFrame(message: Uint8Array): { kind: TunnelKind; stream: number; payload: Buffer } {
  const b = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  const kind = String.fromCharCode(b[0] ?? 0);
  if (b.length < 5 || !KINDS.has(kind)) throw new RangeError(`bad tunnel frame of ${b.length} bytes`);
  return { kind: kind as TunnelKind, stream: b.readUInt32BE(1), payload: b.subarray(5) };
}

export function decodeTunnelAck(payload: Uint8Array): number {
  if (payload.length !== 8) throw new RangeError(`an ack of ${payload.length} bytes (8 expected)`);
  return Number(Buffer.from(payload).readBigUInt64BE(0));
}

/** Data bytes sent against the server's acknowledged count. */
export class CreditWindow {
  sent = 0;
  acked = 0;
  constructor(readonly window = TUNNEL_WINDOW) {}
  fits(n: number): boolean {
    return this.sent + n - this.acked <= this.window;
  }
  spend(n: number): void {
    this.sent += n;
  }
  /** False for a count past what was sent. */
  ack(count: number): boolean {
    if (count > this.sent) return false;
    this.acked = Math.max(this.acked, count);
    return true;
  }
}

/** One masked client frame (FIN set). */
export function encodeWsFrame(opcode: number, payload: Uint8Array, mask: Uint8Array = randomBytes(4)): Buffer {
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const out = Buffer.allocUnsafe(head + 4 + n);
  out[0] = 0x80 | opcode;
  if (n < 126) out[1] = 0x80 | n;
  else if (n < 65536) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(n, 2);
  } else {
    out[1] = 0x80 | 127;
    out.writeBigUInt64BE(BigInt(n), 2);
  }
  out.set(mask, head);
  for (let i = 0; i < n; i++) out[head + 4 + i] = payload[i]! ^ mask[i & 3]!;
  return out;
}

/** Incremental parser of server frames: whole messages out, with a size cap. */
export class WsParser {
  private buf: Buffer = Buffer.alloc(0);
  private parts: Buffer[] = [];
  private size = 0;
  private op = 0;

  constructor(
    private readonly onMessage: (data: Buffer, text: boolean) => void,
    private readonly onControl: (op: number, payload: Buffer) => void,
  ) {}

  /** Throws RangeError past WS_MAX_MESSAGE. */
  feed(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0]!;
      const b1 = this.buf[1]!;
      let n = b1 & 0x7f;
      let off = 2;
      if (n === 126) {
        if (this.buf.length < 4) return;
        n = this.buf.readUInt16BE(2);
        off = 4;
      } else if (n === 127) {
        if (this.buf.length < 10) return;
        const big = this.buf.readBigUInt64BE(2);
        if (big > BigInt(WS_MAX_MESSAGE)) throw new RangeError(`a WebSocket frame over ${WS_MAX_MESSAGE} bytes`);
        n = Number(big);
        off = 10;
      }
      const masked = (b1 & 0x80) !== 0;
      if (this.size + n > WS_MAX_MESSAGE) throw new RangeError(`a WebSocket message over ${WS_MAX_MESSAGE} bytes`);
      const total = off + (masked ? 4 : 0) + n;
      if (this.buf.length < total) return;
      let payload = this.buf.subarray(off + (masked ? 4 : 0), total);
      if (masked) {
        const mask = this.buf.subarray(off, off + 4);
        payload = Buffer.from(payload.map((x, i) => x ^ mask[i & 3]!));
      }
      this.buf = this.buf.subarray(total);
      const op = b0 & 0x0f;
      if (op >= 8) {
        this.onControl(op, Buffer.from(payload));
        continue;
      }
      if (op !== 0) this.op = op;
      this.parts.push(Buffer.from(payload));
      this.size += n;
      if (b0 & 0x80) {
        const data = Buffer.concat(this.parts);
        this.parts = [];
        this.size = 0;
        this.onMessage(data, this.op === 1);
      }
    }
  }
}

/** A connected client WebSocket on a raw socket. */
class MiniWebSocket {
  closed = false;
  onMessage: (data: Buffer, text: boolean) => void = () => undefined;
  onClose: (why: string) => void = () => undefined;

  constructor(
    readonly socket: Duplex,
    private readonly head: Buffer,
  ) {}

  /**
   * Starts reading, once the caller's handlers are set: the first message
   * (`ready`) often arrives in the same packet as the 101, i.e. in `head`.
   */
  start(): void {
    const parser = new WsParser(
      (d, t) => this.onMessage(d, t),
      (op, p) => {
        if (op === 9) this.write(encodeWsFrame(10, p));
        else if (op === 8) this.close("closed by the daemon");
      },
    );
    this.socket.on("data", (chunk: Buffer) => {
      try {
        parser.feed(chunk);
      } catch (e) {
        this.close((e as Error).message);
      }
    });
    this.socket.on("close", () => this.close("the connection closed"));
    this.socket.on("error", (e) => this.close(e.message));
    if (this.head.length) this.socket.emit("data", this.head);
  }

  static connect(t: Transport, path: string): Promise<MiniWebSocket> {
    const url = new URL(t.url(path));
    const key = randomBytes(16).toString("base64");
    const headers: Record<string, string> = {
      Connection: "Upgrade",
      Upgrade: "websocket",
      "Sec-WebSocket-Key": key,
      "Sec-WebSocket-Version": "13",
      "User-Agent": "kiln-sdk-js",
    };
    if (t.apiKey) headers["Authorization"] = `Bearer ${t.apiKey}`;
    const mod = url.protocol === "https:" ? https : http;
    return new Promise((resolve, reject) => {
      const req = mod.request(url, { method: "GET", headers });
      req.on("upgrade", (res, socket, head) => {
        const want = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
        if (res.headers["sec-websocket-accept"] !== want) {
          socket.destroy();
          return reject(new ConnectionError({ code: "connection_error", status: 0, message: `${path}: bad handshake` }));
        }
        (socket as net.Socket).setNoDelay?.(true);
        resolve(new MiniWebSocket(socket, head));
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          if ((size += c.length) <= 1 << 20) chunks.push(c);
        });
        res.on("end", () =>
          reject(
            errorFromAnswer(
              res.statusCode ?? 500,
              Buffer.concat(chunks).toString("utf8"),
              new Headers(Object.entries(res.headers).map(([k, v]) => [k, String(v)])),
            ),
          ),
        );
      });
      req.on("error", (e) =>
        reject(new ConnectionError({ code: "connection_error", status: 0, message: `GET ${path}: ${e.message}`, cause: e })),
      );
      req.end();
    });
  }

  write(frame: Buffer): void {
    if (!this.closed) this.socket.write(frame);
  }

  send(data: Uint8Array): void {
    this.write(encodeWsFrame(2, data));
  }

  close(why = "closed"): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.socket.write(encodeWsFrame(8, Buffer.from([0x03, 0xe8])));
    } catch {
      // already gone
    }
    this.socket.end();
    this.socket.destroy();
    this.onClose(why);
  }
}

interface Conn {
  sock: net.Socket;
  opened: boolean;
  waitingBytes: number;
  parked: boolean;
}

export interface ForwardOptions {
  /** The local port (default: the same number; 0 picks a free one, see `localPort`). */
  localPort?: number;
  /** The local address to listen on (default 127.0.0.1). */
  host?: string;
}

/** A local port forwarded into a sandbox; `close()` (or `await using`) ends it. */
export class PortForward implements AsyncDisposable {
  localPort = 0;
  /** Why the tunnel ended, once it did. */
  error: string | undefined;
  private readonly conns = new Map<number, Conn>();
  private next = 1;
  private readonly window = new CreditWindow();
  private server: net.Server | undefined;
  private ws!: MiniWebSocket;

  private constructor(
    readonly port: number,
    readonly host: string,
  ) {}

  /** @internal */
  static async open(t: Transport, sandboxPath: string, port: number, options: ForwardOptions = {}): Promise<PortForward> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port must be 1-65535, not ${port}`);
    const f = new PortForward(port, options.host ?? "127.0.0.1");
    f.ws = await MiniWebSocket.connect(t, `${sandboxPath}/tunnel?port=${port}`);
    await new Promise<void>((resolve, reject) => {
      f.ws.onMessage = (data, text) => {
        let ok = false;
        try {
          ok = text && (JSON.parse(data.toString("utf8")) as { type?: string }).type === "ready";
        } catch {
          ok = false;
        }
        if (!ok) {
          f.ws.close();
          return reject(new RuntimeError({ code: "tunnel_failed", status: 0, message: "the tunnel did not start" }));
        }
        f.ws.onMessage = (d, txt) => f.onMessage(d, txt);
        resolve();
      };
      f.ws.onClose = (why) => reject(new ConnectionError({ code: "connection_error", status: 0, message: why }));
      f.ws.start();
    });
    f.ws.onClose = (why) => f.ended(why);
    // Half-open: a client that ends its side still reads the sandbox's answer.
    const server = net.createServer({ allowHalfOpen: true }, (sock) => f.accept(sock));
    f.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (e) => {
        f.ws.close();
        reject(e);
      });
      server.listen(options.localPort ?? port, f.host, () => resolve());
    });
    f.localPort = (server.address() as net.AddressInfo).port;
    return f;
  }

  private accept(sock: net.Socket): void {
    if (this.ws.closed) return void sock.destroy();
    const id = this.next++;
    const c: Conn = { sock, opened: false, waitingBytes: 0, parked: false };
    this.conns.set(id, c);
    sock.pause();
    sock.setNoDelay(true);
    sock.on("data", (data: Buffer) => {
      for (let off = 0; off < data.length; off += 65536) {
        const piece = data.subarray(off, off + 65536);
        this.window.spend(piece.length);
        this.ws.send(encodeTunnelFrame("d", id, piece));
      }
      if (!this.window.fits(65536)) {
        sock.pause();
        c.parked = true;
      }
    });
    sock.on("end", () => {
      if (this.conns.has(id)) this.ws.send(encodeTunnelFrame("e", id));
    });
    sock.on("error", () => this.drop(id, true));
    sock.on("close", () => this.drop(id, true));
    sock.on("drain", () => {
      c.waitingBytes = 0;
    });
    this.ws.send(encodeTunnelFrame("o", id));
  }

  private drop(id: number, tell: boolean): void {
    const c = this.conns.get(id);
    if (!c) return;
    this.conns.delete(id);
    c.sock.destroy();
    if (tell) this.ws.send(encodeTunnelFrame("c", id));
  }

  private onMessage(data: Buffer, text: boolean): void {
    if (text) {
      try {
        const ev = JSON.parse(data.toString("utf8")) as { type?: string; error?: { message?: string } };
        if (ev.type === "error") this.error = ev.error?.message ?? "the tunnel failed";
      } catch {
        // not ours to act on
      }
      return;
    }
    let f: ReturnType<typeof decodeTunnelFrame>;
    try {
      f = decodeTunnelFrame(data);
    } catch (e) {
      this.error = (e as Error).message;
      return this.ws.close();
    }
    if (f.kind === "a") {
      if (!this.window.ack(decodeTunnelAck(f.payload))) {
        this.error = "a bad credit frame";
        return this.ws.close();
      }
      for (const c of this.conns.values()) {
        if (c.parked && c.opened && this.window.fits(65536)) {
          c.parked = false;
          c.sock.resume();
        }
      }
      return;
    }
    const c = this.conns.get(f.stream);
    if (!c) return;
    if (!c.opened) {
      if (f.kind !== "o") {
        this.conns.delete(f.stream);
        return void c.sock.destroy();
      }
      c.opened = true;
      if (this.window.fits(65536)) c.sock.resume();
      else c.parked = true;
      return;
    }
    if (f.kind === "d") {
      // Bytes the local reader has not taken yet: past the cap the tunnel's
      // socket stops being read (every stream waits, as the cap demands).
      if (!c.sock.write(f.payload)) {
        c.waitingBytes += f.payload.length;
        if (c.waitingBytes > INBOX_CAP) {
          this.ws.socket.pause();
          c.sock.once("drain", () => this.ws.socket.resume());
        }
      }
    } else if (f.kind === "e") {
      c.sock.end();
    } else if (f.kind === "c") {
      this.conns.delete(f.stream);
      if (c.sock.writableFinished) c.sock.destroy();
      else c.sock.end(() => c.sock.destroy());
    }
  }

  private ended(why: string): void {
    this.error ??= why;
    for (const c of this.conns.values()) c.sock.destroy();
    this.conns.clear();
    this.server?.close();
  }

  /** Stops listening, cuts every forwarded connection and closes the tunnel. */
  async close(): Promise<void> {
    const server = this.server;
    this.ws.close();
    this.ended("closed");
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
