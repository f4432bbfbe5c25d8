// kiln's TypeScript SDK (import name `kiln`, also `withruntime`).
export { LimitsClient, Runtime, Sandboxes, Snapshots, defaultClient } from "./runtime.js";
export { Page } from "./page.js";
export type { CreateOptions, ListFilter, RuntimeOptions } from "./runtime.js";
export { Sandbox } from "./sandbox.js";
export { DockerIgnore, ImageBuildError, Images, Registries, packContext } from "./images.js";
export { Process, Processes } from "./process.js";
export { Network } from "./network.js";
export { Ports } from "./ports.js";
export type { PortAnswer } from "./ports.js";
export { Previews } from "./previews.js";
export type { Preview } from "./previews.js";
export { Contexts, Interpreter } from "./interpreter.js";
export type { Execution, ExecutionError, ExecutionResult, InterpreterContext, RunOptions } from "./interpreter.js";
export { WatchHandle, Watches } from "./watch.js";
export type { WatchEvent, WatchInfo, WatchOptions } from "./watch.js";
export { CreditWindow, PortForward, TUNNEL_WINDOW, decodeTunnelAck, decodeTunnelFrame, encodeTunnelFrame } from "./tunnel.js";
export type { ForwardOptions } from "./tunnel.js";
export type { Command, ExecOptions, ForkOptions, SandboxSettings, SnapshotOptions, SpawnOptions } from "./sandbox.js";
export { Files } from "./files.js";
export type { TransferResult, WriteOptions } from "./files.js";
export { Transport, DEFAULT_API_URL, DEFAULT_ADMIN_KEY_FILE, DEFAULT_MAX_CONNECTIONS } from "./client.js";
export {
  EXEC_LONG_CAP_AFTER_MS,
  EXEC_LONG_OUTPUT_CAP,
  EXEC_OUTPUT_CAP,
  execOutputCap,
} from "./contract.js";
export {
  AccountBlockedError,
  AuthError,
  AuthenticationError,
  CapacityError,
  CommandError,
  ConflictError,
  ConnectionError,
  InvalidRequestError,
  KilnError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  RuntimeError,
  ServiceUnavailableError,
  TimeoutError,
  errorFromAnswer,
} from "./errors.js";
export { RuntimeError as RuntimeAPIError } from "./errors.js";
export type * from "./types.js";
export { VERSION } from "./version.js";
