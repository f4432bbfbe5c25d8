// Files of a sandbox: `sbx.files.write/readText/readBytes/list/stat/remove/
// mkdir/rename`, whole folders with `upload` / `download` (tar streams).
import { createHash, randomBytes } from "node:crypto";
import { lstat, mkdir, open, rename as renameLocal, rm } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { gzipSync } from "node:zlib";

import type { Transport } from "./client.js";
import { RuntimeError } from "./errors.js";
import { type TarStats, extractTar, tarDirectory } from "./tar.js";
import { type WatchHandle, type WatchOptions, Watches } from "./watch.js";
import type { FileEntry, FileStat, ListFilesOptions, RequestOptions } from "./types.js";

export interface WriteOptions extends RequestOptions {
  /** Permission bits: 0o755 or "755" (default 644). */
  mode?: number | string;
}

export interface TransferResult {
  /** The destination. */
  path: string;
  /** Regular files copied. */
  files: number;
  /** Content bytes copied. */
  bytes: number;
}

function modeString(mode: number | string): string {
  return typeof mode === "number" ? (mode & 0o7777).toString(8) : mode;
}

function toBytes(data: string | Uint8Array): Uint8Array {
  return typeof data === "string" ? new TextEncoder().encode(data) : data;
}

function fromGenerator(gen: AsyncGenerator<Uint8Array, void, undefined>): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const r = await gen.next();
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      } catch (e) {
        controller.error(e);
      }
    },
    async cancel() {
      await gen.return();
    },
  });
}

async function* chunksOf(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array, void, undefined> {
  const reader = body.getReader();
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) return;
      yield r.value;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

export class Files {
  /** The sandbox's watches: `start`, `list`, `stop(id)`. */
  readonly watches: Watches;

  constructor(
    private readonly t: Transport,
    readonly sandboxId: string,
  ) {
    this.watches = new Watches(t, sandboxId);
  }

  /**
   * Starts a watch of `path` (a folder or a file): `getNewEvents(waitMs)`
   * polls, `for await (const e of handle)` follows, `stop()` ends it.
   */
  watch(path: string, options: WatchOptions = {}): Promise<WatchHandle> {
    return this.watches.start(path, options);
  }

  private path(route: string): string {
    return `/v1/sandboxes/${encodeURIComponent(this.sandboxId)}/${route}`;
  }

  private incomplete(path: string, received: number, expected: number): RuntimeError {
    return new RuntimeError({
      code: "download_incomplete",
      status: 0,
      message: `${path}: received ${received} of ${expected} bytes`,
      details: { received, expected },
    });
  }

  /** The file's bytes, checked against `x-content-length` and `x-content-sha256`. */
  async read(path: string, options: RequestOptions = {}): Promise<Uint8Array> {
    const { data, headers } = await this.t.bytes({
      method: "GET",
      path: this.path("files/content"),
      query: { path },
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    const expected = headers.get("x-content-length");
    if (expected !== null && Number(expected) !== data.length) throw this.incomplete(path, data.length, Number(expected));
    const sha = headers.get("x-content-sha256");
    if (sha && createHash("sha256").update(data).digest("hex") !== sha.toLowerCase())
      throw new RuntimeError({ code: "download_incomplete", status: 0, message: `${path}: the content does not match its SHA-256` });
    return data;
  }

  /** Same as `read`. */
  readBytes(path: string, options: RequestOptions = {}): Promise<Uint8Array> {
    return this.read(path, options);
  }

  async readText(path: string, options: RequestOptions & { encoding?: string } = {}): Promise<string> {
    return new TextDecoder(options.encoding ?? "utf-8").decode(await this.read(path, options));
  }

  /** The file's bytes as a stream (for large files). */
  async readStream(path: string, options: RequestOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const { response } = await this.t.stream({
      method: "GET",
      path: this.path("files/content"),
      query: { path },
      accept: "application/octet-stream",
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? 0,
    });
    if (!response.body) return new ReadableStream({ start: (c) => c.close() });
    return response.body;
  }

  /** Writes a whole file atomically (parents created); answers `{path, size}`. */
  async write(path: string, data: string | Uint8Array, options: WriteOptions = {}): Promise<{ path: string; size: number }> {
    return this.t.json({
      method: "PUT",
      path: this.path("files/content"),
      query: { path, mode: options.mode === undefined ? undefined : modeString(options.mode) },
      body: toBytes(data),
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** Entries of a folder; `glob`, `hidden: false` and `limit` filter them (see ListFilesOptions). */
  async list(path = "/workspace", options: RequestOptions & ListFilesOptions = {}): Promise<FileEntry[]> {
    const answer = await this.t.json<{ data: FileEntry[] }>({
      method: "GET",
      path: this.path("files/list"),
      query: { path, depth: options.depth, glob: options.glob, hidden: options.hidden, limit: options.limit },
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return answer.data;
  }

  /** Entries under `root` whose relative path matches `pattern`, e.g. "**\/*.csv". */
  async glob(pattern: string, root = "/workspace", options: RequestOptions = {}): Promise<FileEntry[]> {
    return this.list(root, { ...options, glob: pattern });
  }

  /** The entry, or `{exists: false, path}`. */
  async stat(path: string, options: RequestOptions = {}): Promise<FileStat> {
    return this.t.json<FileStat>({
      method: "GET",
      path: this.path("files/stat"),
      query: { path },
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  async exists(path: string, options: RequestOptions = {}): Promise<boolean> {
    return (await this.stat(path, options)).exists;
  }

  async mkdir(path: string, options: RequestOptions & { parents?: boolean } = {}): Promise<FileEntry> {
    return this.t.json<FileEntry>({
      method: "POST",
      path: this.path("files:mkdir"),
      json: { path, parents: options.parents ?? true },
      retry: "safe", // creating a folder twice leaves the same state
      idempotencyKey: options.idempotencyKey,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** Removes a file (or a folder with `recursive`); answers whether something was removed. */
  async remove(path: string, options: RequestOptions & { recursive?: boolean } = {}): Promise<boolean> {
    const answer = await this.t.json<{ removed: boolean }>({
      method: "POST",
      path: this.path("files:remove"),
      json: { path, recursive: options.recursive ?? false },
      retry: "safe",
      idempotencyKey: options.idempotencyKey,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return answer.removed;
  }

  async rename(from: string, to: string, options: RequestOptions & { overwrite?: boolean } = {}): Promise<FileEntry> {
    return this.t.json<FileEntry>({
      method: "POST",
      path: this.path("files:rename"),
      json: { from, to, overwrite: options.overwrite ?? false },
      idempotencyKey: options.idempotencyKey,
      retry: options.idempotencyKey ? "safe" : "never",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** A tar (gzip'ed with `gzip`) of a folder's contents. */
  async archive(path: string, options: RequestOptions & { gzip?: boolean } = {}): Promise<Uint8Array> {
    const { data } = await this.t.bytes({
      method: "GET",
      path: this.path("files/archive"),
      query: { path, gzip: options.gzip ? "true" : "false" },
      accept: options.gzip ? "application/gzip" : "application/x-tar",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return data;
  }

  /** Unpacks a tar or tar.gz (detected) into a folder (created). */
  async unarchive(path: string, data: Uint8Array, options: RequestOptions = {}): Promise<{ path: string; bytes: number }> {
    return this.t.json({
      method: "PUT",
      path: this.path("files/archive"),
      query: { path },
      body: data,
      contentType: "application/x-tar",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /**
   * Copies a local file or folder into the sandbox. A folder goes as one tar
   * stream through `PUT files/archive` (merged into `remotePath`, created);
   * a file through `PUT files/content`, keeping its permission bits.
   */
  async upload(localPath: string, remotePath: string, options: RequestOptions & { gzip?: boolean } = {}): Promise<TransferResult> {
    const st = await lstat(localPath);
    if (st.isFile()) {
      const fh = await open(localPath, "r");
      let data: Uint8Array;
      try {
        data = new Uint8Array(await fh.readFile());
      } finally {
        await fh.close();
      }
      await this.write(remotePath, data, { ...options, mode: st.mode & 0o777 });
      return { path: remotePath, files: 1, bytes: data.length };
    }
    if (!st.isDirectory())
      throw new RuntimeError({ code: "invalid_request", status: 0, message: `${localPath} is neither a file nor a folder` });
    const stats: TarStats = { files: 0, directories: 0, symlinks: 0, bytes: 0 };
    let body: Uint8Array | ReadableStream<Uint8Array>;
    if (options.gzip) {
      const parts: Uint8Array[] = [];
      for await (const c of tarDirectory(localPath, stats)) parts.push(c);
      body = gzipSync(Buffer.concat(parts));
    } else {
      body = fromGenerator(tarDirectory(localPath, stats));
    }
    await this.t.json({
      method: "PUT",
      path: this.path("files/archive"),
      query: { path: remotePath },
      body,
      contentType: options.gzip ? "application/gzip" : "application/x-tar",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return { path: remotePath, files: stats.files, bytes: stats.bytes };
  }

  /**
   * Copies a file or folder out of the sandbox. A folder arrives as a tar
   * stream unpacked as it comes (entries escaping `localPath` are refused);
   * a file is written to a temporary name, length-checked, then renamed.
   */
  async download(remotePath: string, localPath: string, options: RequestOptions = {}): Promise<TransferResult> {
    const st = await this.stat(remotePath, options);
    if (!st.exists)
      throw new RuntimeError({ code: "file_not_found", status: 404, message: `${remotePath} does not exist in the sandbox` });
    if (st.type === "directory") {
      const { response, deadline } = await this.t.stream({
        method: "GET",
        path: this.path("files/archive"),
        query: { path: remotePath, gzip: "false" },
        accept: "application/x-tar",
        signal: options.signal,
        timeoutMs: options.timeoutMs ?? 0,
      });
      if (!response.body) throw this.incomplete(remotePath, 0, 1);
      try {
        const x = await extractTar(chunksOf(response.body), localPath);
        return { path: localPath, files: x.files, bytes: x.bytes };
      } catch (e) {
        throw deadline.failure(e, `download ${remotePath}`);
      } finally {
        deadline.done();
      }
    }
    const target = resolve(localPath);
    await mkdir(dirname(target), { recursive: true });
    const partial = `${target}.kiln-partial-${randomBytes(4).toString("hex")}`;
    const { response, deadline } = await this.t.stream({
      method: "GET",
      path: this.path("files/content"),
      query: { path: remotePath },
      accept: "application/octet-stream",
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? 0,
    });
    const expected = Number(response.headers.get("x-content-length") ?? NaN);
    let received = 0;
    const fh = await open(partial, "w", Number.parseInt(st.mode, 8) & 0o777);
    try {
      if (response.body) {
        for await (const chunk of chunksOf(response.body)) {
          await fh.write(chunk);
          received += chunk.length;
        }
      }
    } catch (e) {
      await fh.close();
      await rm(partial, { force: true });
      throw deadline.failure(e, `download ${remotePath}`);
    } finally {
      deadline.done();
    }
    await fh.close();
    if (Number.isFinite(expected) && expected !== received) {
      await rm(partial, { force: true });
      throw this.incomplete(remotePath, received, expected);
    }
    await renameLocal(partial, target);
    return { path: localPath, files: 1, bytes: received };
  }
}
