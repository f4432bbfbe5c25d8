// Builds the console into OUTDIR (default dist/): index.html, app.js, app.css.
// Usage: npm run build -- OUTDIR   (after npm ci). Type-checks first (tsc --noEmit).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] || path.join(here, "dist"));

try {
  execFileSync(path.join(here, "node_modules", ".bin", "tsc"), ["--noEmit", "-p", here], { stdio: "inherit" });
} catch {
  console.error("console: type check failed");
  process.exit(1);
}
fs.mkdirSync(out, { recursive: true });
const common = { bundle: true, minify: true, logLevel: "warning", absWorkingDir: here, legalComments: "eof" };
// One classic script (no modules, no eval) and one stylesheet (xterm's css merged in).
await esbuild.build({ ...common, entryPoints: ["src/main.ts"], outfile: path.join(out, "app.js"),
  format: "iife", target: ["es2022"], charset: "utf8" });
await esbuild.build({ ...common, entryPoints: ["src/app.css"], outfile: path.join(out, "app.css") });
fs.copyFileSync(path.join(here, "src", "index.html"), path.join(out, "index.html"));
// Each also gzipped beside it: kilnd answers a browser that accepts gzip
// with it (a quarter of the bytes; xterm is most of app.js).
for (const f of ["index.html", "app.js", "app.css"]) {
  const file = path.join(out, f);
  const gz = zlib.gzipSync(fs.readFileSync(file), { level: 9 });
  fs.writeFileSync(file + ".gz", gz);
  console.log(`${file}  ${fs.statSync(file).size} bytes, ${gz.length} gzipped`);
}
