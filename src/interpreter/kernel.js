// kiln's JavaScript kernel: one interpreter context, started by kilnd as
// `node -e <this> kiln-context=<id>` (src/interpreter/interpreter.cc).
// Requests come on stdin, one JSON line each; answers go to fd 1 as JSON
// lines keyed "k". Node cannot move fd 1, so process.stdout/stderr (and
// console) are what is captured; a child process writing to the inherited
// fd 1 lands on the protocol channel, whose reader skips what is not JSON.
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');
const readline = require('readline');

const STREAM_CAP = 4 << 20;
const send = (msg) => fs.writeSync(1, JSON.stringify(msg) + '\n');
const context = (process.argv.find((a) => a.startsWith('kiln-context=')) || '=').split('=')[1];

let sent = { stdout: 0, stderr: 0 };
let dropped = { stdout: 0, stderr: 0 };
function capture(name) {
  return (chunk, encoding, cb) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const room = Math.max(0, STREAM_CAP - sent[name]);
    const kept = text.length > room ? text.slice(0, room) : text;
    dropped[name] += text.length - kept.length;
    sent[name] += kept.length;
    if (kept) send({ k: name, text: kept });
    if (typeof encoding === 'function') encoding();
    else if (typeof cb === 'function') cb();
    return true;
  };
}
process.stdout.write = capture('stdout');
process.stderr.write = capture('stderr');
// Between runs a SIGINT is a no-op; during one, breakOnSigint stops the script.
process.on('SIGINT', () => {});

function bundle(value) {
  const data = {};
  if (value && typeof value === 'object' && typeof value._repr_html_ === 'function') {
    try {
      data['text/html'] = String(value._repr_html_());
    } catch (e) {}
  }
  data['text/plain'] = util.inspect(value, { depth: 4 });
  return data;
}
globalThis.display = (...values) => {
  for (const v of values) send({ k: 'result', main: false, data: bundle(v) });
};

function userStack(err) {
  const lines = String((err && err.stack) || err).split('\n');
  // Frames of this kernel ([eval]) and of node's own modules are not the user's.
  return lines.filter((l) => !/\[eval\]|node:/.test(l)).join('\n');
}

let count = 0;
async function run(req) {
  count += 1;
  const n = count;
  send({ k: 'start', id: req.id || '', n });
  let status = 'ok';
  try {
    const script = new vm.Script(String(req.code || ''), { filename: `<cell-${n}>` });
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) send({ k: 'result', main: true, data: bundle(value) });
  } catch (err) {
    const interrupted = err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
    status = interrupted ? 'interrupted' : 'error';
    const name = interrupted ? 'KeyboardInterrupt' : (err && err.name) || 'Error';
    const value = err && err.message !== undefined ? String(err.message) : String(err);
    send({ k: 'error', name, value, traceback: userStack(err) });
  }
  send({ k: 'done', id: req.id || '', n, status, dropped });
  sent = { stdout: 0, stderr: 0 };
  dropped = { stdout: 0, stderr: 0 };
}

let queue = Promise.resolve();
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    return;
  }
  if (req.op === 'exit') queue = queue.then(() => process.exit(0));
  else if (req.op === 'run') queue = queue.then(() => run(req));
});
rl.on('close', () => queue.then(() => process.exit(0)));
send({ k: 'ready', context, language: 'javascript', pid: process.pid, version: process.version });
