// kiln's JavaScript kernel: one interpreter context, started by kilnd as
// `node -e <this> kiln-context=<id> kiln-language=<javascript|typescript>`
// (src/interpreter/interpreter.cc).
// Requests come on stdin, one JSON line each; answers go to fd 1 as JSON
// lines keyed "k". Node cannot move fd 1, so process.stdout/stderr (and
// console) are what is captured; a child process writing to the inherited
// fd 1 lands on the protocol channel, whose reader skips what is not JSON.
// Cells are ES code as a notebook takes it: top-level await (node's own REPL
// rewrite, reached with --expose-internals) and `import ... from` (made a
// dynamic import, which a vm script cannot make itself).
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');
const readline = require('readline');

let processTopLevelAwait = null;
try {
  ({ processTopLevelAwait } = require('internal/repl/await'));
} catch (e) {
  // A node without it: cells run without top-level await.
}
globalThis.__kiln_import = (specifier) => import(specifier);

// `import X, { a as b } from 'm'` and the rest as `const ... = await import('m')`
// (Deno's `npm:` prefix dropped); `import(` as the kernel's own import.
function esModuleCell(code) {
  const statement =
    /^([ \t]*)import\s+(?:([\w$]+)\s*,?\s*)?(?:\*\s+as\s+([\w$]+)|\{([^}]*)\})?\s*(?:from\s*)?(['"])(?:npm:)?([^'"]+)\5[ \t]*;?/gm;
  const rewritten = code.replace(statement, (m, indent, def, ns, names, q, specifier) => {
    const load = `await __kiln_import(${JSON.stringify(specifier)})`;
    if (!def && !ns && names === undefined) return `${indent}${load};`;
    if (ns) return `${indent}const ${ns} = ${load};` + (def ? ` const ${def} = ${ns}.default;` : '');
    const parts = def ? [`default: ${def}`] : [];
    for (const name of (names || '').split(',').map((n) => n.trim()).filter(Boolean)) {
      const as = name.match(/^([\w$]+)(?:\s+as\s+([\w$]+))?$/);
      if (as) parts.push(as[2] ? `${as[1]}: ${as[2]}` : as[1]);
    }
    return `${indent}const { ${parts.join(', ')} } = ${load};`;
  });
  return rewritten.replace(/(^|[^.\w$])import\s*\(/g, '$1__kiln_import(');
}

const STREAM_CAP = 4 << 20;
const send = (msg) => fs.writeSync(1, JSON.stringify(msg) + '\n');
const argument = (name) => (process.argv.find((a) => a.startsWith(`${name}=`)) || '=').split('=')[1];
const context = argument('kiln-context');
const language = argument('kiln-language') === 'typescript' ? 'typescript' : 'javascript';

// TypeScript cells are JavaScript cells once the image's `typescript`
// package has stripped their types (no type check, as Deno's kernel does
// not either); a cell is a module, so top-level await parses.
let typescript = null;
function loadTypeScript() {
  const path = require('path');
  const places = [process.cwd(), '/usr/local/lib/node_modules', '/usr/lib/node_modules',
    path.join(require('os').homedir(), 'node_modules'), ...(process.env.NODE_PATH || '').split(':')];
  return require(require.resolve('typescript', { paths: places.filter(Boolean) }));
}
function fromTypeScript(code) {
  if (!typescript) {
    try {
      typescript = loadTypeScript();
      if (typeof typescript.transpileModule !== 'function') throw new Error('no transpileModule');
    } catch (e) {
      // typescript 7 and later are native programs, without the JS API.
      const err = new Error('TypeScript needs the `typescript` package, 5 or 6, in the image ' +
        '(npm install -g typescript@5; code-interpreter-v1 has it)');
      err.name = 'KernelError';
      throw err;
    }
  }
  const ts = typescript;
  const out = ts.transpileModule(code, {
    reportDiagnostics: true,
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
      moduleDetection: ts.ModuleDetectionKind ? ts.ModuleDetectionKind.Force : undefined },
  });
  const bad = (out.diagnostics || []).find((d) => d.category === ts.DiagnosticCategory.Error);
  if (bad) {
    const err = new SyntaxError(ts.flattenDiagnosticMessageText(bad.messageText, '\n'));
    throw err;
  }
  return out.outputText.replace(/^export \{\};\s*$/m, '');
}

// A run's own environment variables, over the context's and put back after.
function withEnv(env, fn) {
  const saved = {};
  for (const [key, value] of Object.entries(env || {})) {
    saved[key] = process.env[key];
    process.env[key] = String(value);
  }
  const restore = () => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  };
  return fn().finally(restore);
}

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
  // A string as it is (as notebooks' JS kernels show it), the rest inspected.
  data['text/plain'] = typeof value === 'string' ? value : util.inspect(value, { depth: 4 });
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
    const source = String(req.code || '');
    const code = esModuleCell(language === 'typescript' ? fromTypeScript(source) : source);
    const wrapped = processTopLevelAwait ? processTopLevelAwait(code) : null;
    const script = new vm.Script(wrapped || code, { filename: `<cell-${n}>` });
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (wrapped) {
      // {value} when the cell ends in an expression; else nothing.
      const settled = await value;
      value = settled && typeof settled === 'object' ? settled.value : undefined;
    }
    else if (value && typeof value.then === 'function') value = await value;
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
  else if (req.op === 'run') queue = queue.then(() => withEnv(req.env, () => run(req)));
});
rl.on('close', () => queue.then(() => process.exit(0)));
send({ k: 'ready', context, language, pid: process.pid, version: process.version });
