// The agent's vocabulary: every operation kilnd asks of a sandbox's agent,
// named once, with its request and answer as structs. kilnd encodes them
// (engine::AgentClient) and the agent decodes them from the same
// definitions, so the two ends cannot disagree on a name or a field (the
// model: Firecracker's rpc_interface.rs, gVisor's runsc/boot/controller.go).
//
// On the wire (src/proto/frame.h) a request is one JSON object, {"op":
// <name>, ...fields}, that opens a stream; the agent may send events and
// data on it and ends it with one response: the op's answer, or an
// AgentError. Keys are camelCase. Decoding a request with a required field
// missing or of the wrong type throws nlohmann::json::exception, which the
// agent answers as invalid_request.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::proto {

// The request member that names the operation.
inline constexpr std::string_view kOpKey = "op";

// Runs a command to completion: event ExecStarted (none if it could not
// start), data 1/2 its stdout/stderr (under the stream window), data 0 its
// stdin when ExecRequest::stdin_data; answers ExecExit.
inline constexpr std::string_view kExec = "exec";
// Liveness and the sandbox's clock: answers Pong.
inline constexpr std::string_view kPing = "ping";
// The sandbox passed its memory: kills its largest process; answers OomKilled.
inline constexpr std::string_view kOom = "oom";
// Settings the control plane gives a started or restored agent (a restored
// one keeps those of the sandbox it was captured from); answers Configured.
inline constexpr std::string_view kConfigure = "agent.configure";
// Readies a restored copy for its first command without running one: the
// agent forks a child that exits at once, so the Sentry creates the host
// stub process a new address space needs (systrap keeps it for reuse; the
// first command's exec takes it). No process stays, no file changes;
// answers Warmed.
inline constexpr std::string_view kWarm = "agent.warm";
// A file's content: event FileReadStart, data 1 the bytes (the last frame
// flagged end), answers FileReadDone.
inline constexpr std::string_view kFileRead = "file.read";
// Replaces a file atomically with data 0 up to its end flag; answers FileWritten.
inline constexpr std::string_view kFileWrite = "file.write";
// A directory's entries, depth levels down; answers FileList.
inline constexpr std::string_view kFileList = "file.list";
// One path's entry, or that it does not exist; answers FileStat.
inline constexpr std::string_view kFileStat = "file.stat";
// Makes a directory (with its parents); answers its FileEntry.
inline constexpr std::string_view kFileMkdir = "file.mkdir";
// Removes a file or a (non-empty if recursive) directory; answers FileRemoved.
inline constexpr std::string_view kFileRemove = "file.remove";
// Moves a path; answers the FileEntry at its new place.
inline constexpr std::string_view kFileRename = "file.rename";
// A directory as a tar stream: event ExecStarted, data 1 the tar, data 2
// tar's stderr; answers ExecExit (plus "path").
inline constexpr std::string_view kArchiveGet = "archive.get";
// Unpacks data 0 (a tar, gzip'ed or not) into a directory: event
// ExecStarted, data 1/2 tar's output; answers ExecExit (stdinBytes = what
// tar consumed, plus "path").
inline constexpr std::string_view kArchivePut = "archive.put";
// Starts a background process; answers its ProcessInfo at once.
inline constexpr std::string_view kProcStart = "proc.start";
// Every background process, oldest first; answers ProcessList.
inline constexpr std::string_view kProcList = "proc.list";
// One background process; answers ProcessInfo.
inline constexpr std::string_view kProcGet = "proc.get";
// A page of a process's kept output from a cursor, after waiting up to
// waitMs for some; answers OutputPage.
inline constexpr std::string_view kProcOutput = "proc.output";
// Bytes to a process's stdin (and/or its end); answers ProcWritten.
inline constexpr std::string_view kProcWrite = "proc.write";
// Sends a signal to a process's group; answers ProcessInfo.
inline constexpr std::string_view kProcSignal = "proc.signal";
// Sets the window size of a process's terminal (TIOCSWINSZ: the kernel
// sends it SIGWINCH); answers ProcessInfo. invalid_request without one.
inline constexpr std::string_view kProcResize = "proc.resize";
// The egress proxy's accepted connections: one event EgressConn each, until
// cancelled; never answers.
inline constexpr std::string_view kEgressListen = "egress.listen";
// Carries one accepted connection: data 1 from the sandbox's client, data 0
// to it, each way under a window (the agent announces its own); answers
// EgressClosed when both directions ended. Cancelling it at once refuses
// the connection.
inline constexpr std::string_view kEgressAttach = "egress.attach";
// Connects to 127.0.0.1:port inside (a server of the sandbox's): event
// PortOpened once connected (error port_closed if nothing listens), then
// data 0 to the server and data 1 from it as egress.attach carries them;
// answers EgressClosed when both directions ended.
inline constexpr std::string_view kPortDial = "port.dial";

// Starts a file watch (inotify in the agent, kept there with its event
// ring); answers its WatchInfo. quota_exceeded past kMaxWatches running,
// name_taken if a running watch has its id.
inline constexpr std::string_view kWatchStart = "watch.start";
// A watch's items (events and notices) from a cursor, after waiting up to
// waitMs for some; answers WatchPage. not_found for an unknown id.
inline constexpr std::string_view kWatchRead = "watch.read";
// Ends a watch (reason stopped) and forgets it; answers WatchStopped.
inline constexpr std::string_view kWatchStop = "watch.stop";
// Every watch kept, running or ended, oldest first; answers WatchList.
inline constexpr std::string_view kWatchList = "watch.list";

// Every name above (each must be unique: tests/unit/proto/ops_test.cc checks).
inline constexpr std::array kAllOps = {
    kExec,      kPing,       kOom,        kFileRead,   kFileWrite,  kFileList,     kFileStat,
    kFileMkdir, kFileRemove, kFileRename, kArchiveGet, kArchivePut, kProcStart,    kProcList,
    kProcGet,   kProcOutput, kProcWrite,  kProcSignal, kProcResize, kEgressListen, kEgressAttach,
    kConfigure, kPortDial,   kWatchStart, kWatchRead,  kWatchStop,  kWatchList,    kWarm};

// to_json/from_json of a struct, found by ADL as nlohmann expects.
#define KILN_PROTO_JSON(T)                     \
  void to_json(nlohmann::json& j, const T& v); \
  void from_json(const nlohmann::json& j, T& v)

// ---- The error answer: {"error": {"code", "message", "path"?}} ----

struct AgentError {
  std::string code = "internal_error";  // an API error name (src/common/status.h)
  std::string message = "the sandbox failed the request";
  std::optional<std::string> path;  // the path a file error is about
};
KILN_PROTO_JSON(AgentError);
// Whether an answer is an AgentError rather than the op's answer.
bool IsError(const nlohmann::json& answer);

// ---- Commands: exec and proc.start ----

// What to run: argv, or a command line for /bin/bash -c; env over the
// standard environment; cwd (default /workspace).
struct CommandSpec {
  std::optional<std::vector<std::string>> argv;
  std::optional<std::string> command;
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;
  // Run as root rather than the sandbox's user: only the API asks this
  // (a grader run by the trainer), never anything inside.
  bool as_root = false;
};

struct ExecRequest : CommandSpec {
  static constexpr std::string_view kOp = kExec;
  int64_t timeout_ms = 60000;  // 0 = none
  bool stdin_data = false;     // stdin comes as data 0 (else it is empty)
  // Forward at most this much of each stream (0 = all), and with
  // kill_past_limit, kill the command once a stream passes it.
  uint64_t capture_limit = 0;
  bool kill_past_limit = false;
};
KILN_PROTO_JSON(ExecRequest);

// The event that a command started (exec, archive.*): {"type": "start", pid}.
struct ExecStarted {
  int pid = 0;
};
KILN_PROTO_JSON(ExecStarted);

struct ExecExit {
  std::optional<int> exit_code;       // null when a signal ended it
  std::optional<std::string> signal;  // "SIGKILL", when a signal ended it
  bool timed_out = false;
  int64_t duration_ms = 0;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;              // written, captured or not
  uint64_t stdin_bytes = 0;                                 // consumed from data 0
  bool stdout_truncated = false, stderr_truncated = false;  // past capture_limit
  std::optional<std::string> start_error;                   // it did not start: the shell's words
};
KILN_PROTO_JSON(ExecExit);

// ---- Liveness ----

struct PingRequest {
  static constexpr std::string_view kOp = kPing;
};
KILN_PROTO_JSON(PingRequest);
struct Pong {
  bool ok = true;
  int64_t time_ms = 0;  // the sandbox's wall clock ("time")
};
KILN_PROTO_JSON(Pong);

struct ConfigureRequest {
  static constexpr std::string_view kOp = kConfigure;
  bool sudo = true;  // false: the sudo shim refuses every request
};
KILN_PROTO_JSON(ConfigureRequest);
struct Configured {
  bool sudo = true;
};
KILN_PROTO_JSON(Configured);

struct OomRequest {
  static constexpr std::string_view kOp = kOom;
};
KILN_PROTO_JSON(OomRequest);
struct OomKilled {
  int killed = 0;  // the pid killed; 0 or 1 when there was none to kill
};
KILN_PROTO_JSON(OomKilled);

struct WarmRequest {
  static constexpr std::string_view kOp = kWarm;
};
KILN_PROTO_JSON(WarmRequest);
struct Warmed {
  int64_t fork_us = 0;  // the child's fork to its reaping
};
KILN_PROTO_JSON(Warmed);

// ---- Files ----

struct FileEntry {
  std::string name;  // the last component ("/" for the root)
  std::string path;
  std::string type;  // file, directory, symlink, other
  uint64_t size = 0;
  std::string mode;  // permission bits in octal, "644"
  int64_t modified_ms = 0;
  uint32_t uid = 0, gid = 0;
  std::optional<std::string> symlink_target;
  // Its extended attributes under the request's xattrPrefix, whole names
  // (at most kMaxXattrs; a value that is not UTF-8 is left out).
  std::map<std::string, std::string> xattrs;
};
KILN_PROTO_JSON(FileEntry);

// Extended attributes a file op reads or writes: only under a prefix in the
// user namespace ("user.e2b."), at most this many per file, each value at
// most kMaxXattrValue bytes.
inline constexpr size_t kMaxXattrs = 64;
inline constexpr size_t kMaxXattrValue = 4096;
inline constexpr size_t kMaxXattrPrefix = 64;

struct FileReadRequest {
  static constexpr std::string_view kOp = kFileRead;
  std::string path;
};
KILN_PROTO_JSON(FileReadRequest);
struct FileReadStart {
  uint64_t size = 0;  // when opened; the content may differ if it changes
  std::string mode;
};
KILN_PROTO_JSON(FileReadStart);
struct FileReadDone {
  uint64_t size = 0;  // bytes sent
};
KILN_PROTO_JSON(FileReadDone);

struct FileWriteRequest {
  static constexpr std::string_view kOp = kFileWrite;
  std::string path;
  int mode = 0644;
  // Written into the file itself (E2B's envd), not a temporary file renamed
  // over it: a watcher sees that file's create and writes. An agent that
  // predates it ignores it and writes atomically.
  bool in_place = false;
  // When set, the file is left with exactly `xattrs` under this prefix
  // (whole names, each starting with it): the prefix's others are removed.
  std::string xattr_prefix;
  std::map<std::string, std::string> xattrs;
};
KILN_PROTO_JSON(FileWriteRequest);
struct FileWritten {
  std::string path;
  uint64_t size = 0;
};
KILN_PROTO_JSON(FileWritten);

struct FileListRequest {
  static constexpr std::string_view kOp = kFileList;
  std::string path;
  int depth = 1;
  std::string xattr_prefix;  // each entry's attributes under it ("": none)
};
KILN_PROTO_JSON(FileListRequest);
struct FileList {
  std::vector<FileEntry> data;
};
KILN_PROTO_JSON(FileList);

struct FileStatRequest {
  static constexpr std::string_view kOp = kFileStat;
  std::string path;
  std::string xattr_prefix;  // the entry's attributes under it ("": none)
};
KILN_PROTO_JSON(FileStatRequest);
// On the wire the entry's members plus "exists", or {"exists": false, path}.
struct FileStat {
  bool exists = false;
  FileEntry entry;  // only entry.path when it does not exist
};
KILN_PROTO_JSON(FileStat);

struct FileMkdirRequest {
  static constexpr std::string_view kOp = kFileMkdir;
  std::string path;
  bool parents = true;
};
KILN_PROTO_JSON(FileMkdirRequest);

struct FileRemoveRequest {
  static constexpr std::string_view kOp = kFileRemove;
  std::string path;
  bool recursive = false;
};
KILN_PROTO_JSON(FileRemoveRequest);
struct FileRemoved {
  bool removed = false;  // false: there was nothing
};
KILN_PROTO_JSON(FileRemoved);

struct FileRenameRequest {
  static constexpr std::string_view kOp = kFileRename;
  std::string from, to;
  bool overwrite = false;
  std::string xattr_prefix;  // the answer's attributes under it ("": none)
};
KILN_PROTO_JSON(FileRenameRequest);

struct ArchiveGetRequest {
  static constexpr std::string_view kOp = kArchiveGet;
  std::string path;
  bool gzip = false;
};
KILN_PROTO_JSON(ArchiveGetRequest);
struct ArchivePutRequest {
  static constexpr std::string_view kOp = kArchivePut;
  std::string path;
  bool gzip = false;
};
KILN_PROTO_JSON(ArchivePutRequest);

// ---- Background processes ----

// A terminal's window, in character cells ({"cols", "rows"}).
struct TerminalSize {
  int cols = 80;
  int rows = 24;
  bool operator==(const TerminalSize&) const = default;
};
KILN_PROTO_JSON(TerminalSize);

struct ProcStartRequest : CommandSpec {
  static constexpr std::string_view kOp = kProcStart;
  bool stdin_pipe = false;  // "stdin": "pipe" | "none"
  int64_t timeout_ms = 0;   // 0 = none
  // Run it on a pseudo-terminal of this size: its stdin, stdout and stderr
  // are the terminal (stdin always open), its output all "stdout". With
  // neither argv nor command it runs the login shell.
  std::optional<TerminalSize> pty;
};
KILN_PROTO_JSON(ProcStartRequest);

struct ProcessInfo {
  std::string id;     // "p3"
  uint64_t seq = 0;   // start order
  int pid = 0;        // 0 if it did not start
  std::string state;  // running, exited, killed, timed_out
  std::optional<int> exit_code;
  std::optional<std::string> signal;
  std::string command;
  std::vector<std::string> argv;
  std::string cwd;
  bool stdin_open = false;
  uint64_t stdin_offset = 0;  // stdin bytes taken so far
  int64_t timeout_ms = 0;
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
  uint64_t output_bytes = 0;        // output offset past the newest byte
  uint64_t first_offset = 0;        // offset of the oldest byte still kept
  std::optional<TerminalSize> pty;  // its terminal's size now; none without one
};
KILN_PROTO_JSON(ProcessInfo);

struct ProcListRequest {
  static constexpr std::string_view kOp = kProcList;
};
KILN_PROTO_JSON(ProcListRequest);
struct ProcessList {
  std::vector<ProcessInfo> data;
};
KILN_PROTO_JSON(ProcessList);

struct ProcGetRequest {
  static constexpr std::string_view kOp = kProcGet;
  std::string id;
};
KILN_PROTO_JSON(ProcGetRequest);

struct ProcOutputRequest {
  static constexpr std::string_view kOp = kProcOutput;
  std::string id;
  uint64_t cursor = 0;
  int64_t wait_ms = 0;                // the agent caps it at 60 s
  std::optional<uint64_t> max_bytes;  // default: all the ring holds
};
KILN_PROTO_JSON(ProcOutputRequest);
struct OutputChunk {
  uint64_t offset = 0;
  std::string stream;  // stdout, stderr
  std::string data;    // the bytes; base64 on the wire
};
KILN_PROTO_JSON(OutputChunk);
struct OutputPage {
  std::vector<OutputChunk> chunks;
  uint64_t next_cursor = 0;
  uint64_t first_offset = 0;
  uint64_t dropped_bytes = 0;  // lost between the cursor and first_offset
  bool complete = false;       // the process ended and all was read
  ProcessInfo process;
};
KILN_PROTO_JSON(OutputPage);

struct ProcWriteRequest {
  static constexpr std::string_view kOp = kProcWrite;
  std::string id;
  // Encoded as on the wire: the agent answers bad base64 itself.
  std::string base64;
  bool eof = false;  // close stdin after the bytes
};
KILN_PROTO_JSON(ProcWriteRequest);
struct ProcWritten {
  uint64_t offset = 0;  // stdin offset after these bytes
};
KILN_PROTO_JSON(ProcWritten);

struct ProcSignalRequest {
  static constexpr std::string_view kOp = kProcSignal;
  std::string id;
  std::string signal;  // "SIGTERM"
};
KILN_PROTO_JSON(ProcSignalRequest);

struct ProcResizeRequest {
  static constexpr std::string_view kOp = kProcResize;
  std::string id;
  TerminalSize size;  // on the wire "cols" and "rows" beside "id"
};
KILN_PROTO_JSON(ProcResizeRequest);

// ---- Egress ----

struct EgressListenRequest {
  static constexpr std::string_view kOp = kEgressListen;
};
KILN_PROTO_JSON(EgressListenRequest);
struct EgressConn {
  uint64_t conn = 0;  // the accepted connection, for egress.attach
};
KILN_PROTO_JSON(EgressConn);

struct EgressAttachRequest {
  static constexpr std::string_view kOp = kEgressAttach;
  uint64_t conn = 0;
};
KILN_PROTO_JSON(EgressAttachRequest);
struct EgressClosed {
  std::string closed;  // how it ended
};
KILN_PROTO_JSON(EgressClosed);

// ---- Ports ----

struct PortDialRequest {
  static constexpr std::string_view kOp = kPortDial;
  int port = 0;  // 1-65535
};
KILN_PROTO_JSON(PortDialRequest);
struct PortOpened {
  bool opened = true;
};
KILN_PROTO_JSON(PortOpened);

// ---- File watches ----

struct WatchStartRequest {
  static constexpr std::string_view kOp = kWatchStart;
  std::string id;  // given by the caller or made by kilnd: a safe token
  std::string path;
  bool recursive = false;
  std::vector<std::string> events;  // event types kept; empty: all
  std::vector<std::string> include, exclude;
  int64_t batch_ms = 100;
  int64_t timeout_ms = 3600000;  // 0 = until stopped
  uint32_t max_watches = 8192;   // inotify watch descriptors it may hold
  // Each event but a remove carries its path's entry as the batch ends
  // (when it is still there), with attributes under xattr_prefix.
  bool entries = false;
  std::string xattr_prefix;
};
KILN_PROTO_JSON(WatchStartRequest);

struct WatchInfo {
  std::string id;
  std::string path;
  bool recursive = false;
  std::vector<std::string> events, include, exclude;
  int64_t batch_ms = 0;
  int64_t timeout_ms = 0;
  uint32_t max_watches = 0;
  uint32_t watched = 0;                   // inotify watch descriptors it holds now
  uint64_t cursor = 0;                    // past the newest item
  uint64_t first_cursor = 0;              // the oldest item still kept
  std::string state;                      // running, ended
  std::optional<std::string> end_reason;  // stopped, timeout, root-removed, failed
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
};
KILN_PROTO_JSON(WatchInfo);

struct WatchList {
  std::vector<WatchInfo> data;
};
KILN_PROTO_JSON(WatchList);

struct WatchReadRequest {
  static constexpr std::string_view kOp = kWatchRead;
  std::string id;
  uint64_t cursor = 0;
  int64_t wait_ms = 0;  // the agent caps it at 60 s
};
KILN_PROTO_JSON(WatchReadRequest);

// One change: create, write, remove, rename, chmod; writes to one path in
// one batch are folded into one with a count.
struct WatchEvent {
  std::string type;
  std::string path;
  bool is_dir = false;
  std::optional<std::string> old_path;  // rename only
  uint64_t count = 1;
  std::optional<FileEntry> entry;  // when the watch asked for entries
};
KILN_PROTO_JSON(WatchEvent);

// Something the reader must know besides events: overflow {dropped,
// reason}, limit {watches}, end {reason}. On the wire keyed "k".
struct WatchNotice {
  std::string kind;
  uint64_t dropped = 0;
  std::string reason;
  uint64_t watches = 0;
};
KILN_PROTO_JSON(WatchNotice);

// One entry of a watch's ring: an event or a notice, at a cursor.
struct WatchItem {
  uint64_t seq = 0;
  std::optional<WatchEvent> event;
  std::optional<WatchNotice> notice;
};
KILN_PROTO_JSON(WatchItem);

struct WatchPage {
  std::vector<WatchItem> items;
  uint64_t next_cursor = 0;
  uint64_t dropped = 0;  // items lost between the cursor and the oldest kept
  bool ended = false;    // the watch ended and all was read
  WatchInfo watch;
};
KILN_PROTO_JSON(WatchPage);

struct WatchStopRequest {
  static constexpr std::string_view kOp = kWatchStop;
  std::string id;
};
KILN_PROTO_JSON(WatchStopRequest);
struct WatchStopped {
  bool stopped = false;  // false: it had ended already
};
KILN_PROTO_JSON(WatchStopped);

struct WatchListRequest {
  static constexpr std::string_view kOp = kWatchList;
};
KILN_PROTO_JSON(WatchListRequest);

#undef KILN_PROTO_JSON

}  // namespace kiln::proto
