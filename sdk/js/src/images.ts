// `runtime.images`: build images from a recipe, a Dockerfile (with its
// context folder) or an OCI image, then start sandboxes from them
// (`sandboxes.create({ image })`).
//
// The context folder is packed exactly as the Python SDK and the CLI pack it
// (one tree, one digest, one upload): a ustar archive (entries sorted by
// path bytes, directories included, mtime 0, uid/gid 0, no user/group names,
// mode & 0o7777, symlinks kept, .dockerignore honoured) in one gzip member
// of stored deflate blocks (mtime 0, no name). Stored, because Node's zlib
// (Chromium's fork) deflates differently from the system zlib.
import { createHash } from "node:crypto";
import { lstat, readFile, readdir, readlink } from "node:fs/promises";
import { join } from "node:path";

import type { Runtime } from "./runtime.js";
import { Page } from "./page.js";
import { newIdempotencyKey } from "./client.js";
import { RuntimeError, TimeoutError } from "./errors.js";
import { ustarHeader } from "./tar.js";
import type {
  BuildImage,
  BuildOptions,
  ImageInfo,
  ImageLogLine,
  ImageLogs,
  ImageState,
  PruneResult,
  RegistryCredential,
  RequestOptions,
} from "./types.js";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const END_STATES: ReadonlySet<string> = new Set(["ready", "failed", "deleted"]);
const ALWAYS_KEPT: ReadonlySet<string> = new Set([".dockerignore", "Dockerfile"]);
const BLOCK = 512;

/** A build that ended `failed`; `image` is the final ImageInfo, the rest comes from its `error`. */
export class ImageBuildError extends RuntimeError {
  readonly image: ImageInfo;
  readonly step: number | undefined;
  readonly line: number | undefined;
  readonly instruction: string | undefined;
  readonly exitCode: number | undefined;
  readonly logTail: string[];

  constructor(image: ImageInfo) {
    const err = image.error ?? { code: "build_failed", message: "no message" };
    let where = "";
    if (err.step != null) where += ` at step ${err.step}`;
    if (err.line != null) where += ` (Dockerfile line ${err.line})`;
    super({
      code: err.code || "build_failed",
      status: 0,
      message: `image '${image.name}' build failed${where}: ${err.message || "no message"}`,
    });
    this.image = image;
    this.step = err.step ?? undefined;
    this.line = err.line ?? undefined;
    this.instruction = err.instruction ?? undefined;
    this.exitCode = err.exitCode ?? undefined;
    this.logTail = err.logTail ?? [];
  }
}

// ---- .dockerignore -----------------------------------------------------------

function cleanPattern(path: string): string {
  const parts: string[] = [];
  for (const p of path.split("/")) {
    if (p === "" || p === ".") continue;
    if (p === ".." && parts.length > 0 && parts[parts.length - 1] !== "..") parts.pop();
    else parts.push(p);
  }
  return parts.join("/");
}

const META = "\\^$.|?*+()[]{}/-";

function escapeChar(ch: string): string {
  return META.includes(ch) ? "\\" + ch : ch;
}

/** The regular expression a Docker (moby/patternmatcher) pattern becomes. */
export function dockerPatternRegex(pattern: string): string {
  let out = "^";
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === "*") {
      if (pattern[i + 1] === "*") {
        i += 2;
        if (pattern[i] === "/") i++;
        out += i >= pattern.length ? "[\\s\\S]*" : "([\\s\\S]*/)?";
        i--;
        continue;
      }
      out += "[^/]*";
    } else if (ch === "?") out += "[^/]";
    else if (ch === "\\") out += i + 1 < pattern.length ? escapeChar(pattern[++i]!) : "\\\\";
    else if (ch === "[") {
      // A class, as Go's filepath.Match: "^" negates, "\\x" is x, "-" a range; a
      // negated class never matches "/" (nor does any, within one part).
      let j = i + 1;
      let body = "";
      if (pattern[j] === "^") {
        body = "^/";
        j++;
      }
      for (; j < pattern.length && pattern[j] !== "]"; j++) {
        let c = pattern[j]!;
        if (c === "\\" && j + 1 < pattern.length) {
          c = pattern[++j]!;
          body += "\\]^-[".includes(c) ? "\\" + c : c;
        } else body += "\\[".includes(c) ? "\\" + c : c;
      }
      if (j >= pattern.length || body === "" || body === "^/")
        throw new SyntaxError("unterminated or empty character class");
      out += "[" + body + "]";
      i = j;
    } else out += escapeChar(ch);
  }
  return out + "$";
}

/** Docker's .dockerignore rules: last match wins, "!" re-includes, a matched directory takes its contents. */
export class DockerIgnore {
  readonly rules: { negate: boolean; re: RegExp }[] = [];
  readonly hasNegation: boolean;

  constructor(text: string) {
    text.split("\n").forEach((raw, index) => {
      let line = raw.trim();
      if (!line || line.startsWith("#")) return;
      const negate = line.startsWith("!");
      if (negate) line = line.slice(1).trim();
      line = cleanPattern(line);
      if (!line) return;
      try {
        this.rules.push({ negate, re: new RegExp(dockerPatternRegex(line), "u") });
      } catch (e) {
        throw new TypeError(`.dockerignore line ${index + 1}: bad pattern '${raw.trim()}': ${String(e)}`);
      }
    });
    this.hasNegation = this.rules.some((r) => r.negate);
  }

  excluded(rel: string): boolean {
    const parts = rel.split("/");
    const prefixes = parts.map((_, k) => parts.slice(0, k + 1).join("/"));
    let out = false;
    for (const rule of this.rules) if (prefixes.some((p) => rule.re.test(p))) out = !rule.negate;
    return out;
  }
}

// ---- context packing -----------------------------------------------------------

/** One ustar header as libarchive's ustar writer makes it (tar.ts). */
function tarHeader(rel: string, kind: "0" | "2" | "5", mode: number, size = 0, linkname = ""): Uint8Array {
  return ustarHeader({ name: rel + (kind === "5" ? "/" : ""), type: kind, mode, size, linkname });
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32(data: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of data) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A gzip member of stored deflate blocks (≤ 65535 bytes each), mtime 0, no name. */
export function storedGzip(data: Uint8Array): Buffer {
  const parts: Buffer[] = [Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3])];
  let pos = 0;
  do {
    const n = Math.min(0xffff, data.length - pos);
    pos += n;
    const head = Buffer.alloc(5);
    head[0] = pos >= data.length ? 1 : 0;
    head.writeUInt16LE(n, 1);
    head.writeUInt16LE(n ^ 0xffff, 3);
    parts.push(head, Buffer.from(data.buffer, data.byteOffset + pos - n, n));
  } while (pos < data.length);
  const tail = Buffer.alloc(8);
  tail.writeUInt32LE(crc32(data), 0);
  tail.writeUInt32LE(data.length % 2 ** 32, 4);
  parts.push(tail);
  return Buffer.concat(parts);
}

async function contextEntries(root: string, ignore: DockerIgnore | undefined): Promise<{ rel: string; full: string }[]> {
  const found: { rel: string; full: string }[] = [];
  const walk = async (dirAbs: string, dirRel: string): Promise<void> => {
    for (const name of await readdir(dirAbs)) {
      const rel = dirRel ? `${dirRel}/${name}` : name;
      const full = join(dirAbs, name);
      const st = await lstat(full);
      const skip = ignore !== undefined && !ALWAYS_KEPT.has(rel) && ignore.excluded(rel);
      if (st.isDirectory()) {
        if (!skip) found.push({ rel, full });
        if (!skip || ignore?.hasNegation) await walk(full, rel);
      } else if ((st.isFile() || st.isSymbolicLink()) && !skip) found.push({ rel, full });
    }
  };
  await walk(root, "");
  return found.sort((a, b) => Buffer.compare(Buffer.from(a.rel, "utf8"), Buffer.from(b.rel, "utf8")));
}

/** The gzip'd tar of `dir` and its digest "sha256:<hex>"; `dockerignore` replaces the folder's own. */
export async function packContext(dir: string, dockerignore?: string): Promise<{ bytes: Buffer; digest: string }> {
  let st;
  try {
    st = await lstat(dir);
  } catch {
    st = undefined;
  }
  if (!st?.isDirectory()) throw new TypeError(`contextDir '${dir}' is not a directory`);
  if (dockerignore === undefined) {
    try {
      dockerignore = await readFile(join(dir, ".dockerignore"), "utf8");
    } catch {
      dockerignore = undefined;
    }
  }
  const ignore = dockerignore ? new DockerIgnore(dockerignore) : undefined;
  const parts: Uint8Array[] = [];
  for (const { rel, full } of await contextEntries(dir, ignore)) {
    const s = await lstat(full);
    if (s.isDirectory()) parts.push(tarHeader(rel, "5", s.mode));
    else if (s.isSymbolicLink()) parts.push(tarHeader(rel, "2", s.mode, 0, await readlink(full)));
    else {
      const data = await readFile(full);
      parts.push(tarHeader(rel, "0", s.mode, data.length), data);
      if (data.length % BLOCK) parts.push(Buffer.alloc(BLOCK - (data.length % BLOCK)));
    }
  }
  parts.push(Buffer.alloc(2 * BLOCK));
  const bytes = storedGzip(Buffer.concat(parts));
  return { bytes, digest: "sha256:" + createHash("sha256").update(bytes).digest("hex") };
}

// ---- the client -----------------------------------------------------------------

function enc(id: string): string {
  return encodeURIComponent(id);
}

/** `runtime.images.registries`: credentials for private registries. */
export class Registries {
  constructor(private readonly runtime: Runtime) {}

  async set(registry: string, creds: { username: string; password: string }, options: RequestOptions = {}): Promise<RegistryCredential> {
    return this.runtime.transport.json<RegistryCredential>({
      method: "POST",
      path: "/v1/images/registries",
      json: { registry, username: creds.username, password: creds.password },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  async list(options: RequestOptions = {}): Promise<RegistryCredential[]> {
    const answer = await this.runtime.transport.json<{ data: RegistryCredential[] }>({
      method: "GET",
      path: "/v1/images/registries",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    return answer.data ?? [];
  }

  async delete(registry: string, options: RequestOptions = {}): Promise<{ registry: string; deleted: boolean }> {
    return this.runtime.transport.json({
      method: "POST",
      path: "/v1/images/registries:delete",
      json: { registry },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }
}

export class Images {
  readonly registries: Registries;

  constructor(private readonly runtime: Runtime) {
    this.registries = new Registries(runtime);
  }

  /**
   * Builds an image from exactly one of `recipe`, `dockerfile` (or a
   * `contextDir` holding a Dockerfile) and `image`. With `wait` (default)
   * it follows the build log (each line to `onLog`) and resolves to the
   * final image; a failed build rejects with ImageBuildError.
   */
  async build(input: BuildImage, options: BuildOptions = {}): Promise<ImageInfo> {
    const { contextDir, ...fields } = input;
    let dockerfile = fields.dockerfile;
    if (dockerfile === undefined && contextDir !== undefined) {
      try {
        dockerfile = await readFile(join(contextDir, "Dockerfile"), "utf8");
      } catch {
        throw new TypeError(`images.build: contextDir '${contextDir}' has no Dockerfile and none was given`);
      }
    }
    const sources = (["recipe", "image"] as const).filter((k) => fields[k] !== undefined) as string[];
    if (dockerfile !== undefined) sources.push("dockerfile");
    if (sources.length !== 1)
      throw new TypeError(
        "images.build: needs exactly one of recipe, dockerfile (or contextDir) and image" +
          (sources.length ? `; got ${sources.join(", ")}` : ""),
      );
    if (fields.name === undefined && fields.image === undefined)
      throw new TypeError("images.build: needs a name (only an image build may omit it)");
    if (dockerfile === undefined && (fields.buildArgs !== undefined || fields.target !== undefined))
      throw new TypeError("images.build: buildArgs and target go with a dockerfile build");
    const body: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) body[k] = v;
    if (dockerfile !== undefined) body["dockerfile"] = dockerfile;
    if (body["cache"] === true) delete body["cache"];
    if (dockerfile !== undefined && contextDir !== undefined)
      body["context"] = await this.uploadContext(contextDir, { dockerignore: fields.dockerignore, signal: options.signal });
    const info = await this.runtime.transport.json<ImageInfo>({
      method: "POST",
      path: "/v1/images",
      json: body,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    if (options.wait === false) return info;
    const deadline = options.buildTimeoutMs === undefined ? undefined : Date.now() + options.buildTimeoutMs;
    await this.followLogs(info.id, options.onLog, { deadline, signal: options.signal });
    const final = await this.get(info.id, { signal: options.signal });
    if (final.state === "failed") throw new ImageBuildError(final);
    return final;
  }

  /** Packs `dir`, uploads it unless the daemon has it; resolves to its digest. */
  async uploadContext(dir: string, options: { dockerignore?: string | undefined; signal?: AbortSignal | undefined } = {}): Promise<string> {
    const { bytes, digest } = await packContext(dir, options.dockerignore);
    const { missing } = await this.runtime.transport.json<{ missing: string[] }>({
      method: "POST",
      path: "/v1/images/context/missing",
      json: { digests: [digest] },
      retry: "safe",
      signal: options.signal,
    });
    if ((missing ?? []).includes(digest)) {
      await this.runtime.transport.json({
        method: "PUT",
        path: `/v1/images/context/${digest}`,
        body: bytes,
        contentType: "application/gzip",
        signal: options.signal,
      });
    }
    return digest;
  }

  /** By id, else resolved as a ref (name, name:tag, name@version). */
  async get(idOrRef: string, options: RequestOptions = {}): Promise<ImageInfo> {
    if (!UUID_RE.test(idOrRef)) return this.resolve(idOrRef, options);
    return this.runtime.transport.json<ImageInfo>({
      method: "GET",
      path: `/v1/images/${enc(idOrRef)}`,
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  async resolve(ref: string, options: RequestOptions = {}): Promise<ImageInfo> {
    return this.runtime.transport.json<ImageInfo>({
      method: "GET",
      path: "/v1/images/resolve",
      query: { ref },
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** Images, newest first; `for await` walks every page. */
  async list(
    filter: { name?: string; state?: ImageState; limit?: number; cursor?: string } = {},
    options: RequestOptions = {},
  ): Promise<Page<ImageInfo>> {
    const fetchPage = async (cursor: string | undefined): Promise<Page<ImageInfo>> => {
      const answer = await this.runtime.transport.json<{ data: ImageInfo[]; nextCursor?: string | null }>({
        method: "GET",
        path: "/v1/images",
        query: { name: filter.name, state: filter.state, limit: filter.limit, cursor },
        signal: options.signal,
        timeoutMs: options.timeoutMs,
      });
      return new Page(answer.data, answer.nextCursor ?? null, fetchPage);
    };
    return fetchPage(filter.cursor);
  }

  /** Every version of `name`, newest first. */
  async versions(name: string, options: RequestOptions = {}): Promise<ImageInfo[]> {
    return (await this.list({ name }, options)).toArray();
  }

  private async id(ref: string, options: RequestOptions): Promise<string> {
    return UUID_RE.test(ref) ? ref : (await this.resolve(ref, options)).id;
  }

  private async post<T>(ref: string, verb: string, json: unknown, options: RequestOptions): Promise<T> {
    const id = await this.id(ref, options);
    return this.runtime.transport.json<T>({
      method: "POST",
      path: `/v1/images/${enc(id)}${verb}`,
      json,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  async tag(ref: string, tag: string, options: RequestOptions = {}): Promise<ImageInfo> {
    return this.post(ref, ":tag", { tag }, options);
  }

  async untag(ref: string, tag: string, options: RequestOptions = {}): Promise<ImageInfo> {
    return this.post(ref, ":untag", { tag }, options);
  }

  async delete(ref: string, options: RequestOptions = {}): Promise<ImageInfo> {
    return this.post(ref, ":delete", {}, options);
  }

  /** Keeps `size` warm sandboxes of the image ready (0 = off). */
  async pool(ref: string, size: number, options: RequestOptions = {}): Promise<{ size: number; ready: number }> {
    return this.post(ref, ":pool", { size }, options);
  }

  async prune(options: RequestOptions = {}): Promise<PruneResult> {
    return this.runtime.transport.json<PruneResult>({
      method: "POST",
      path: "/v1/images:prune",
      json: {},
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      retry: "safe",
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** One read of the build log (with `follow`, the server waits up to 20 s for a line). */
  async logs(
    id: string,
    query: { after?: number; limit?: number; follow?: boolean } = {},
    options: RequestOptions = {},
  ): Promise<ImageLogs> {
    return this.runtime.transport.json<ImageLogs>({
      method: "GET",
      path: `/v1/images/${enc(id)}/logs`,
      query: { after: query.after ?? 0, limit: query.limit, follow: query.follow ? "true" : undefined },
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
  }

  /** Reads the log until the build ends, each line to `onLog`; resolves to the final state. */
  async followLogs(
    id: string,
    onLog?: (line: ImageLogLine) => void,
    options: { after?: number; deadline?: number | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<ImageState> {
    let after = options.after ?? 0;
    for (;;) {
      if (options.deadline !== undefined && Date.now() >= options.deadline)
        throw new TimeoutError({ code: "timeout", status: 0, message: `image ${id}: the build did not end in time` });
      const page = await this.logs(id, { after, follow: true }, { signal: options.signal });
      for (const line of page.lines ?? []) onLog?.(line);
      if (typeof page.nextAfter === "number") after = page.nextAfter;
      if (page.done || END_STATES.has(page.state)) return page.state;
    }
  }
}
