// A small tar writer (ustar + pax long names) for uploads and a reader
// (ustar, pax, GNU long names) for downloads. No dependency.
import { lstat, mkdir, open, readdir, readlink, chmod, symlink, link, utimes, rm } from "node:fs/promises";
import { join, posix, resolve, sep } from "node:path";

import { RuntimeError } from "./errors.js";

const BLOCK = 512;
const CHUNK = 1 << 20;
const encoder = new TextEncoder();

function octal(value: number, digits: number, tail: string): Uint8Array {
  const text = Math.max(0, Math.floor(value)).toString(8);
  if (text.length > digits) throw new TypeError(`value ${value} does not fit a tar header field`);
  return encoder.encode(text.padStart(digits, "0") + tail);
}

export interface UstarFields {
  name: string;
  type: "0" | "2" | "5" | "x";
  mode: number;
  size?: number;
  mtime?: number;
  linkname?: string;
}

/**
 * One ustar header block, laid out as libarchive's ustar writer lays it out
 * (so a context packed here has the bytes kiln's CLI packs: one digest). A
 * name over 100 bytes is split into prefix and name at a slash ("split"), or
 * cut to 100 bytes ("truncate": a pax record before it carries the whole
 * name); a link target over 100 bytes is refused, or cut likewise.
 */
export function ustarHeader(f: UstarFields, long: "split" | "truncate" = "split"): Uint8Array {
  let name = encoder.encode(f.name);
  let prefix = new Uint8Array(0);
  if (name.length > 100 && long === "truncate") {
    name = name.subarray(0, 100);
  } else if (name.length > 100) {
    let cut = name.indexOf(0x2f, Math.max(name.length - 101, 0));
    if (cut === 0) cut = name.indexOf(0x2f, 1);
    if (cut < 0 || cut + 1 === name.length || cut > 155)
      throw new TypeError(`path too long for a ustar archive: ${f.name}`);
    prefix = name.subarray(0, cut);
    name = name.subarray(cut + 1);
  }
  let link = encoder.encode(f.linkname ?? "");
  if (link.length > 100) {
    if (long === "split") throw new TypeError(`symlink target too long for a ustar archive: ${f.name} -> ${f.linkname}`);
    link = link.subarray(0, 100);
  }
  const h = new Uint8Array(BLOCK);
  h.set(name, 0);
  h.set(octal(f.mode & 0o7777, 6, " \0"), 100);
  h.set(octal(0, 6, " \0"), 108);
  h.set(octal(0, 6, " \0"), 116);
  h.set(octal(f.size ?? 0, 11, " "), 124);
  h.set(octal(f.mtime ?? 0, 11, " "), 136);
  h.fill(0x20, 148, 156);
  h.set(encoder.encode(f.type), 156);
  h.set(link, 157);
  h.set(encoder.encode("ustar\u000000"), 257);
  h.set(octal(0, 6, " \0"), 329);
  h.set(octal(0, 6, " \0"), 337);
  h.set(prefix, 345);
  let sum = 0;
  for (const byte of h) sum += byte;
  h.set(octal(sum, 6, "\0 "), 148);
  return h;
}

function paxRecord(key: string, value: string): string {
  // "<len> key=value\n", where <len> counts every byte of the record, itself included
  const bodyLen = encoder.encode(` ${key}=${value}\n`).length;
  let len = bodyLen + 1;
  while (String(len).length + bodyLen !== len) len = bodyLen + String(len).length;
  return `${len} ${key}=${value}\n`;
}

function padding(size: number): Uint8Array {
  const rest = size % BLOCK;
  return new Uint8Array(rest === 0 ? 0 : BLOCK - rest);
}

/** Header blocks of one entry (a pax header first when a name does not fit ustar). */
function entryHeaders(f: UstarFields): Uint8Array[] {
  const records: string[] = [];
  if (encoder.encode(f.name).length > 100) records.push(paxRecord("path", f.name));
  if (f.linkname && encoder.encode(f.linkname).length > 100) records.push(paxRecord("linkpath", f.linkname));
  if (records.length === 0) return [ustarHeader(f)];
  const data = encoder.encode(records.join(""));
  return [
    ustarHeader({ name: "PaxHeader", mode: 0o644, size: data.length, mtime: f.mtime, type: "x" }),
    data,
    padding(data.length),
    ustarHeader(f, "truncate"),
  ];
}

export interface TarStats {
  files: number;
  directories: number;
  symlinks: number;
  bytes: number;
}

/**
 * The tar of `dir`'s contents (paths relative to it), as chunks. Regular
 * files, directories and symlinks; other kinds are skipped. A file that
 * shrinks while being read fails the archive.
 */
export async function* tarDirectory(dir: string, stats?: TarStats): AsyncGenerator<Uint8Array, void, undefined> {
  const root = resolve(dir);
  async function* walk(rel: string): AsyncGenerator<Uint8Array, void, undefined> {
    const names = (await readdir(rel ? join(root, rel) : root)).sort();
    for (const name of names) {
      const relPath = rel ? `${rel}/${name}` : name;
      const full = join(root, relPath);
      const st = await lstat(full);
      const mtime = st.mtimeMs / 1000;
      if (st.isDirectory()) {
        yield* entryHeaders({ name: relPath + "/", mode: st.mode, size: 0, mtime, type: "5" });
        if (stats) stats.directories++;
        yield* walk(relPath);
      } else if (st.isSymbolicLink()) {
        const target = await readlink(full);
        yield* entryHeaders({ name: relPath, mode: 0o777, size: 0, mtime, type: "2", linkname: target });
        if (stats) stats.symlinks++;
      } else if (st.isFile()) {
        yield* entryHeaders({ name: relPath, mode: st.mode, size: st.size, mtime, type: "0" });
        const fh = await open(full, "r");
        try {
          let left = st.size;
          while (left > 0) {
            const buf = new Uint8Array(Math.min(CHUNK, left));
            const { bytesRead } = await fh.read(buf, 0, buf.length, null);
            if (bytesRead === 0)
              throw new RuntimeError({
                code: "upload_incomplete",
                status: 0,
                message: `${full} shrank while it was read (${st.size - left} of ${st.size} bytes)`,
              });
            left -= bytesRead;
            yield bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
          }
        } finally {
          await fh.close();
        }
        yield padding(st.size);
        if (stats) {
          stats.files++;
          stats.bytes += st.size;
        }
      }
    }
  }
  yield* walk("");
  yield new Uint8Array(BLOCK * 2);
}

/** Reads exact byte counts from a stream of chunks. */
class ByteReader {
  private buf: Uint8Array = new Uint8Array(0);
  private done = false;

  constructor(private readonly it: AsyncIterator<Uint8Array>) {}

  private async fill(n: number): Promise<void> {
    while (this.buf.length < n && !this.done) {
      const r = await this.it.next();
      if (r.done) {
        this.done = true;
        break;
      }
      const merged = new Uint8Array(this.buf.length + r.value.length);
      merged.set(this.buf);
      merged.set(r.value, this.buf.length);
      this.buf = merged;
    }
  }

  /** Exactly n bytes; null at a clean end; throws at a short one. */
  async read(n: number): Promise<Uint8Array | null> {
    await this.fill(n);
    if (this.buf.length === 0 && this.done) return null;
    if (this.buf.length < n) throw unsafe("the archive ended in the middle of an entry");
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** n bytes as they come. */
  async *take(n: number): AsyncGenerator<Uint8Array, void, undefined> {
    let left = n;
    while (left > 0) {
      if (this.buf.length === 0) await this.fill(1);
      if (this.buf.length === 0) throw unsafe("the archive ended in the middle of a file");
      const piece = this.buf.subarray(0, Math.min(left, this.buf.length));
      this.buf = this.buf.subarray(piece.length);
      left -= piece.length;
      yield piece;
    }
  }

  async skip(n: number): Promise<void> {
    for await (const _ of this.take(n)) void _;
  }
}

function unsafe(message: string): RuntimeError {
  return new RuntimeError({ code: "unsafe_archive", status: 0, message });
}

const decoder = new TextDecoder();

function cString(b: Uint8Array, offset: number, width: number): string {
  const field = b.subarray(offset, offset + width);
  const end = field.indexOf(0);
  return decoder.decode(end < 0 ? field : field.subarray(0, end));
}

function parseNumber(b: Uint8Array, offset: number, width: number): number {
  const field = b.subarray(offset, offset + width);
  if ((field[0] ?? 0) & 0x80) {
    // GNU base-256
    let v = (field[0] ?? 0) & 0x7f;
    for (let i = 1; i < field.length; i++) v = v * 256 + (field[i] ?? 0);
    return v;
  }
  const text = decoder.decode(field).replace(/\0.*$/s, "").trim();
  return text ? parseInt(text, 8) : 0;
}

function parsePax(data: Uint8Array): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < data.length) {
    const space = data.indexOf(0x20, i);
    if (space < 0) break;
    const len = parseInt(decoder.decode(data.subarray(i, space)), 10);
    if (!(len > 0)) break;
    const record = data.subarray(space + 1, i + len); // key=value\n
    const eq = record.indexOf(0x3d);
    const end = record[record.length - 1] === 0x0a ? record.length - 1 : record.length;
    if (eq > 0) out[decoder.decode(record.subarray(0, eq))] = decoder.decode(record.subarray(eq + 1, end));
    i += len;
  }
  return out;
}

/** An archive member path made relative and checked to stay inside the destination. */
function safeRelative(name: string): string {
  const norm = posix.normalize(name.replace(/^(\.\/)+/, "")).replace(/\/+$/, "");
  if (norm === "." || norm === "") return "";
  if (norm.startsWith("/") || norm === ".." || norm.startsWith("../"))
    throw unsafe(`the archive entry '${name}' points outside the destination`);
  return norm;
}

export interface ExtractStats {
  files: number;
  directories: number;
  symlinks: number;
  bytes: number;
}

/**
 * Unpacks a tar stream into `dest` (created). Entries escaping `dest` fail
 * the whole extraction (`unsafe_archive`); symlinks are created last so that
 * no entry is written through one.
 */
export async function extractTar(chunks: AsyncIterable<Uint8Array>, dest: string): Promise<ExtractStats> {
  const root = resolve(dest);
  await mkdir(root, { recursive: true });
  const reader = new ByteReader(chunks[Symbol.asyncIterator]());
  const stats: ExtractStats = { files: 0, directories: 0, symlinks: 0, bytes: 0 };
  const links: { path: string; target: string }[] = [];
  const dirModes: { path: string; mode: number; mtime: number }[] = [];
  let longName: string | undefined;
  let longLink: string | undefined;
  let pax: Record<string, string> = {};
  const inside = (rel: string) => {
    const full = resolve(root, rel);
    if (full !== root && !full.startsWith(root + sep)) throw unsafe(`the archive entry '${rel}' points outside the destination`);
    return full;
  };
  for (;;) {
    const h = await reader.read(BLOCK);
    if (h === null) throw unsafe("the archive has no end marker (it was cut short)");
    if (h.every((x) => x === 0)) break;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : (h[i] ?? 0);
    if (sum !== parseNumber(h, 148, 8)) throw unsafe("a tar header's checksum does not match");
    const type = String.fromCharCode(h[156] ?? 0);
    const size = pax["size"] !== undefined ? Number(pax["size"]) : parseNumber(h, 124, 12);
    const magic = cString(h, 257, 6);
    let name = cString(h, 0, 100);
    const prefix = magic === "ustar" && h[262] === 0 ? cString(h, 345, 155) : "";
    if (prefix) name = `${prefix}/${name}`;
    name = pax["path"] ?? longName ?? name;
    const linkname = pax["linkpath"] ?? longLink ?? cString(h, 157, 100);
    const mode = parseNumber(h, 100, 8) & 0o7777;
    const mtime = parseNumber(h, 136, 12);
    if (type === "x" || type === "g" || type === "L" || type === "K") {
      let data = new Uint8Array(0);
      for await (const piece of reader.take(size)) {
        const merged = new Uint8Array(data.length + piece.length);
        merged.set(data);
        merged.set(piece, data.length);
        data = merged;
      }
      await reader.skip(padding(size).length);
      if (type === "x") pax = parsePax(data);
      if (type === "L") longName = cString(data, 0, data.length);
      if (type === "K") longLink = cString(data, 0, data.length);
      continue;
    }
    pax = {};
    longName = undefined;
    longLink = undefined;
    const rel = safeRelative(name);
    const full = inside(rel);
    if (type === "5") {
      await mkdir(full, { recursive: true });
      dirModes.push({ path: full, mode, mtime });
      stats.directories++;
    } else if (type === "0" || type === "\0" || type === "7") {
      await mkdir(resolve(full, ".."), { recursive: true });
      await rm(full, { force: true });
      const fh = await open(full, "w", 0o600);
      try {
        for await (const piece of reader.take(size)) await fh.write(piece);
      } finally {
        await fh.close();
      }
      await chmod(full, mode);
      await utimes(full, mtime, mtime);
      stats.files++;
      stats.bytes += size;
    } else if (type === "2") {
      links.push({ path: full, target: linkname });
    } else if (type === "1") {
      const target = inside(safeRelative(linkname));
      await mkdir(resolve(full, ".."), { recursive: true });
      await rm(full, { force: true });
      await link(target, full);
      stats.files++;
    }
    if (type !== "5") await reader.skip(type === "0" || type === "\0" || type === "7" ? padding(size).length : size + padding(size).length);
  }
  for (const l of links) {
    await mkdir(resolve(l.path, ".."), { recursive: true });
    await rm(l.path, { force: true });
    await symlink(l.target, l.path);
    stats.symlinks++;
  }
  // Directory modes last (deepest first), so a read-only one did not block its contents.
  for (const d of dirModes.reverse()) {
    await chmod(d.path, d.mode);
    await utimes(d.path, d.mtime, d.mtime);
  }
  return stats;
}
