// Wire shapes (camelCase, as the API sends them) and option types.

export type SandboxState =
  | "starting"
  | "running"
  | "pausing"
  | "paused"
  | "resuming"
  | "stopping"
  | "stopped";

/** Per-sandbox egress rules (`PUT /v1/sandboxes/{id}/network`). */
export interface NetworkRules {
  internet?: boolean;
  allow?: string[];
  deny?: string[];
  connect?: string[];
}

/** What `GET /v1/sandboxes/{id}/network` answers. */
export interface NetworkPolicy extends NetworkRules {
  sandboxId?: string;
  version?: number;
  enforced?: boolean;
  enforcedVersion?: number;
  updatedAt?: string;
  [field: string]: unknown;
}

/** One connection attempt in `GET /v1/sandboxes/{id}/network/log`. */
export interface EgressEntry {
  id: string;
  time: string;
  method: string;
  host: string;
  address: string | null;
  port: number;
  /** allowed | internet-off | not-allowed | denied | private-address | resolve-failed | connect-failed | bad-request */
  verdict: string;
  bytesOut: number;
  bytesIn: number;
  durationMs: number;
  open: boolean;
  closedBy: string | null;
}

/** The body of `POST /v1/sandboxes` (every field optional). */
export interface CreateSandbox {
  name?: string;
  labels?: Record<string, string>;
  env?: Record<string, string>;
  vcpu?: number;
  memoryMiB?: number;
  diskMiB?: number;
  timeoutSeconds?: number;
  onLeaseEnd?: "stop" | "pause" | "delete";
  maxCostMicros?: number;
  /** Start a copy of this snapshot (its shape wins). */
  snapshot?: string;
  /** Start from this image: id, name (its latest), name:tag or name@version. */
  image?: string;
  network?: NetworkRules;
  /** Whether it may be paused (default true). */
  pausable?: boolean;
  /** Pause after this many idle seconds (0 = never, else 10-86400). */
  idlePauseSeconds?: number;
  /** A command, file or process call on a paused sandbox wakes it first (default true). */
  autoWake?: boolean;
  persistent?: boolean;
  /** What a pause keeps unless it says: false keeps only the files (default true). */
  pauseMemory?: boolean;
  /** Lifetime cost cap in microdollars. */
  maxTotalCostMicros?: number;
  /** Whether the sandbox user may use sudo (default true). */
  sudo?: boolean;
  /** With `name`: answer the live sandbox of that name (woken if paused, `reused: true`). */
  getOrCreate?: boolean;
  /** Accepted for the public API's sake; a local daemon has no trial. */
  funding?: "trial" | "paid";
  /** Accepted and ignored: a local daemon has one region. */
  region?: string;
  /** Not supported by kiln (400 not_supported). */
  volumes?: Array<{ volumeId: string; path: string; mode?: "rw" | "snapshot" }>;
}

/** `GET /v1/limits`. */
export interface Limits {
  access: "full" | "read" | "selected";
  daily: { limitMicros: number | null; usedMicros: number; remainingMicros: number | null; window: "24h" };
  trial: null | Record<string, unknown>;
  [field: string]: unknown;
}

/** `files.list` options. */
export interface ListFilesOptions {
  /** Levels to descend (default 1; with `glob`, as deep as the pattern reaches). */
  depth?: number;
  /** Keep entries whose path below the folder matches: `*`, `?` within a name, `**` across folders. */
  glob?: string;
  /** false leaves out names starting with "." and what is under them. */
  hidden?: boolean;
  /** At most this many entries. */
  limit?: number;
}

export interface SandboxInfo {
  id: string;
  kind: "sandbox";
  name: string | null;
  labels: Record<string, string>;
  state: SandboxState;
  vcpu: number;
  memoryMiB: number;
  diskMiB: number;
  timeoutSeconds: number;
  createdAt: string;
  readyAt: string | null;
  expiresAt: string;
  endedAt: string | null;
  onLeaseEnd: string;
  maxCostMicros: number | null;
  chargedMicros: number;
  cpuSeconds: number;
  stopReason: string | null;
  envNames: string[];
  pausable?: boolean;
  idlePauseSeconds?: number;
  autoWake?: boolean;
  persistent?: boolean;
  pauseMemory?: boolean;
  pausedAt?: string | null;
  maxTotalCostMicros?: number | null;
  sudo?: boolean;
  /** True when `getOrCreate` found the sandbox instead of making one. */
  reused?: boolean;
  replayed?: boolean;
  [field: string]: unknown;
}

export interface DeletedSandbox {
  id: string;
  kind: "sandbox";
  status: "deleted";
  state: SandboxState;
  deletedAt: string;
  endedAt: string | null;
  replayed?: boolean;
}

export interface CommandResult {
  /** null when the command did not exit by itself (killed, timed out). */
  exitCode: number | null;
  /** The signal that ended it, e.g. "SIGKILL"; null after a normal exit. */
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  durationMs: number;
  processId?: string;
  replayed?: boolean;
}

export type OutputEvent =
  | { type: "start"; processId: string; replayed?: boolean }
  | { type: "stdout" | "stderr"; data: string; offset: number; base64?: boolean }
  | {
      type: "exit";
      exitCode: number | null;
      signal?: string | null;
      state: string;
      timedOut: boolean;
      durationMs?: number;
    }
  | { type: "truncated"; droppedBytes: number; resumeAt: number };

export interface ProcessInfo {
  id: string;
  kind: "process";
  pid: number;
  state: "running" | "exited" | "killed" | "timed_out" | "unknown";
  exitCode: number | null;
  signal: string | null;
  command: string | null;
  argv: string[] | null;
  cwd: string;
  stdinOpen: boolean;
  startedAt: string | null;
  endedAt: string | null;
  outputBytes: number;
  firstOffset: number;
  [field: string]: unknown;
}

export interface FileEntry {
  name: string;
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  /** Octal permission bits, e.g. "644". */
  mode: string;
  modifiedAt: string;
  uid?: number;
  gid?: number;
  symlinkTarget?: string;
}

export type FileStat = (FileEntry & { exists: true }) | { exists: false; path: string };

export interface Snapshot {
  id: string;
  kind: "snapshot";
  mode: string;
  name: string | null;
  labels: Record<string, string>;
  state: string;
  sourceSandboxId: string;
  shape: { vcpu: number; memoryMiB: number; diskMiB: number };
  retentionDays: number;
  sizeBytes: number;
  captureMs: number;
  createdAt: string;
  expiresAt: string;
  pool?: { size: number; ready: number; memoryBytes: number };
  replayed?: boolean;
  [field: string]: unknown;
}

/** Options every call takes. */
export interface RequestOptions {
  /** Sent as `Idempotency-Key` (1-128 chars); the SDK makes one per logical call otherwise. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Deadline of the call, retries included (default: the client's `timeoutMs`). */
  timeoutMs?: number;
}

export type ImageState = "queued" | "building" | "ready" | "failed" | "deleting" | "deleted";

/** What an image runs when a sandbox starts from it. */
export interface ImageStart {
  command?: string;
  argv?: string[];
  cwd?: string;
  env?: Record<string, string>;
  readyCommand?: string;
  readyPort?: number;
  readyTimeoutSeconds?: number;
}

/** The builder's shape and limits. */
export interface ImageBuildShape {
  vcpu?: number;
  memoryMiB?: number;
  diskMiB?: number;
  maxImageMiB?: number;
  timeoutSeconds?: number;
}

export interface ImageRecipe {
  base?: string;
  apt?: string[];
  pip?: string[];
  npm?: string[];
  commands?: string[];
  files?: { path: string; content: string; encoding?: "utf8" | "base64"; mode?: number | string }[];
  env?: Record<string, string>;
  workdir?: string;
}

export interface ImageBuildFailure {
  code: string;
  message: string;
  step?: number | null;
  line?: number | null;
  instruction?: string | null;
  exitCode?: number | null;
  logTail?: string[];
}

export interface ImageInfo {
  id: string;
  kind: "image";
  name: string;
  version: number;
  tags: string[];
  labels: Record<string, string>;
  state: ImageState;
  source: "recipe" | "dockerfile" | "image" | "builtin";
  ref: string | null;
  digest: string | null;
  sizeBytes: number;
  stepsTotal: number;
  stepsCached: number;
  config: {
    user: string;
    workdir: string;
    env: Record<string, string>;
    cmd: string[] | null;
    entrypoint: string[] | null;
    exposedPorts: string[];
    labels: Record<string, string>;
  };
  start: ImageStart | null;
  build: ImageBuildShape;
  pool: { size: number; ready: number };
  error: ImageBuildFailure | null;
  createdAt: string;
  readyAt: string | null;
  endedAt: string | null;
  [field: string]: unknown;
}

/** The body of `POST /v1/images`, plus `contextDir` (packed and uploaded by the SDK). */
export interface BuildImage {
  name?: string;
  recipe?: ImageRecipe;
  dockerfile?: string;
  contextDir?: string;
  image?: string;
  tags?: string[];
  labels?: Record<string, string>;
  env?: Record<string, string>;
  start?: ImageStart | null;
  build?: ImageBuildShape;
  buildArgs?: Record<string, string>;
  target?: string;
  dockerignore?: string;
  network?: { allow?: string[]; deny?: string[] };
  cache?: boolean;
}

export interface BuildOptions extends RequestOptions {
  /** Each build log line as it comes (only while waiting). */
  onLog?: (line: ImageLogLine) => void;
  /** Follow the build to its end (default true); false answers the queued image. */
  wait?: boolean;
  /** Give up waiting after this long (TimeoutError; the build goes on). */
  buildTimeoutMs?: number;
}

export interface ImageLogLine {
  n: number;
  time: string;
  stream: "system" | "stdout" | "stderr";
  step: number | null;
  text: string;
}

export interface ImageLogs {
  lines: ImageLogLine[];
  nextAfter: number;
  state: ImageState;
  truncated: boolean;
  done: boolean;
}

export interface PruneResult {
  layersRemoved: number;
  cacheEntriesRemoved: number;
  bytesFreed: number;
}

export interface RegistryCredential {
  registry: string;
  username: string;
  createdAt: string;
}

/** `start` on a create answer from an image with a start command (later reads lack it). */
export interface SandboxStart {
  state: "started" | "ready" | "timeout" | "exited" | "not_running";
  processId?: string;
  exitCode?: number;
  readyMs?: number;
}

/** How far back `Sandbox.metrics` reaches. */
export type MetricsRange = "15m" | "1h" | "6h" | "24h" | "7d" | "30d";

/** One reading of a sandbox's meter. */
export interface MetricSample {
  at: string;
  /** Of all its vCPUs: 100 is each one busy. */
  cpuPercent: number;
  cpuCores: number;
  memoryBytes: number;
  memoryCacheBytes: number;
  memoryLimitBytes: number;
  /** What its root's writes take on the host. */
  diskBytes: number;
  diskLimitBytes: number;
}

/** Readings folded over a point's span: means, with the peaks in it. */
export interface MetricPoint extends MetricSample {
  cpuPeakPercent: number;
  memoryPeakBytes: number;
  samples: number;
}

export interface SandboxMetrics {
  latest: MetricSample | null;
  points: MetricPoint[];
}
