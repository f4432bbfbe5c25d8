// What the SDK adds to a call: median (and p90) of N sequential execs of
// `true` through the SDK vs the same request with raw fetch, alternating
// so both see the same daemon; the same for GET /v1/sandboxes/{id} (no
// process inside the sandbox, so the client's share shows); and a raw
// request on a new TCP connection each time, which is what keep-alive saves.
// Counts the TCP connections each phase opened (undici diagnostics channel).
//
//   KILN_API_URL=… KILN_API_KEY=… node bench/overhead.mjs      (KILN_BENCH_RUNS, default 200)
// Prints one JSON object per line.
import dc from "node:diagnostics_channel";
import http from "node:http";

import { Runtime, VERSION } from "kiln";

const RUNS = Number(process.env.KILN_BENCH_RUNS ?? 200);
const WARMUP = Math.min(20, RUNS);

let connections = 0;
dc.subscribe("undici:client:connected", () => connections++);

const runtime = new Runtime();
const base = runtime.apiUrl;
const key = runtime.transport.apiKey;
const auth = key ? { Authorization: `Bearer ${key}` } : {};

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { median_ms: +at(0.5).toFixed(3), p90_ms: +at(0.9).toFixed(3), min_ms: +s[0].toFixed(3) };
}

async function time(fn) {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

function print(figure, samples, extra = {}) {
  process.stdout.write(JSON.stringify({ figure, runs: samples.length, ...stats(samples), ...extra }) + "\n");
}

/** A request on a fresh TCP connection (node:http without an agent). */
function newConnectionRequest(method, url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false, headers: { ...auth, "Content-Type": "application/json" } }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const sbx = await runtime.sandboxes.create({ vcpu: 1, memoryMiB: 512, labels: { bench: "sdk-js-overhead" } });
try {
  const execUrl = `${base}/v1/sandboxes/${sbx.id}:exec`;
  const getUrl = `${base}/v1/sandboxes/${sbx.id}`;
  const body = JSON.stringify({ argv: ["true"] });
  const rawExec = async () => {
    const r = await fetch(execUrl, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body });
    const j = await r.json();
    if (j.exitCode !== 0) throw new Error(JSON.stringify(j));
  };
  const sdkExec = async () => {
    const r = await sbx.exec(["true"]);
    if (r.exitCode !== 0) throw new Error(JSON.stringify(r));
  };
  const rawGet = async () => {
    const r = await fetch(getUrl, { headers: auth });
    await r.json();
  };
  const sdkGet = () => sbx.refresh();

  for (let i = 0; i < WARMUP; i++) {
    await sdkExec();
    await rawExec();
    await sdkGet();
    await rawGet();
  }

  const sdkE = [], rawE = [];
  connections = 0;
  for (let i = 0; i < RUNS; i++) {
    sdkE.push(await time(sdkExec));
    rawE.push(await time(rawExec));
  }
  const execConnections = connections;
  const sdkG = [], rawG = [];
  connections = 0;
  for (let i = 0; i < RUNS; i++) {
    sdkG.push(await time(sdkGet));
    rawG.push(await time(rawGet));
  }
  const getConnections = connections;
  const freshE = [];
  for (let i = 0; i < RUNS; i++) freshE.push(await time(() => newConnectionRequest("POST", execUrl, body)));

  const meta = { sdk: `kiln-sdk-js/${VERSION}`, node: process.version };
  print("exec argv [true], SDK sandbox.exec", sdkE, { ...meta, tcp_connections_opened_both_loops: execConnections });
  print("exec argv [true], raw fetch (keep-alive)", rawE, meta);
  process.stdout.write(
    JSON.stringify({ figure: "exec: SDK minus raw fetch, median", ms: +(stats(sdkE).median_ms - stats(rawE).median_ms).toFixed(3) }) + "\n",
  );
  print("GET /v1/sandboxes/{id}, SDK sandbox.refresh", sdkG, { ...meta, tcp_connections_opened_both_loops: getConnections });
  print("GET /v1/sandboxes/{id}, raw fetch (keep-alive)", rawG, meta);
  process.stdout.write(
    JSON.stringify({ figure: "GET: SDK minus raw fetch, median", ms: +(stats(sdkG).median_ms - stats(rawG).median_ms).toFixed(3) }) + "\n",
  );
  print("exec argv [true], node:http with a new TCP connection per request", freshE, meta);
} finally {
  await sbx.stop();
}
