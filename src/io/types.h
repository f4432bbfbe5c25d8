// The words every front uses for I/O into a running sandbox: what to run,
// how a command ended, a background process, a page of its output, a file.
// They belong to io, not to the agent's protocol: io maps them to and from
// src/proto/ops.h (io/proto_map.cc) so a front never fills a wire struct,
// and the protocol can change without the fronts noticing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kiln::io {

// How a file write lands: atomically (a temporary file renamed over the
// target, so no reader sees half of it; kiln's own API) or into the file
// itself (E2B's envd, so a watcher sees that file created and written).
enum class WritePlacement { kAtomic, kInPlace };

// ---- Commands ----

// What to run: argv, or a command line for /bin/bash -c.
struct Command {
  std::optional<std::vector<std::string>> argv;
  std::optional<std::string> command;
  // The command's own variables; io puts the sandbox's env under them.
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;  // default /workspace
  // Run as root rather than the sandbox's user: only the API's caller may
  // ask this, never anything inside the sandbox.
  bool as_root = false;
};

struct ExecOptions {
  int64_t timeout_ms = 60000;  // 0 = none
  // The command's whole stdin; without it stdin is empty.
  std::optional<std::string> stdin_bytes;
  // Keep at most this much of each stream (0 = all), and with
  // kill_past_cap, kill the command once a stream passes it.
  uint64_t capture_cap = 0;
  bool kill_past_cap = false;
};

enum class OutputStream : uint8_t { kStdout = 1, kStderr = 2 };
// "stdout" or "stderr", as the API spells them.
std::string_view StreamName(OutputStream stream);

// How a command ended.
struct ExitStatus {
  std::optional<int> exit_code;       // none when a signal ended it
  std::optional<std::string> signal;  // "SIGKILL", when a signal ended it
  bool timed_out = false;
  int64_t duration_ms = 0;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;              // written, kept or not
  uint64_t stdin_bytes = 0;                                 // stdin it consumed
  bool stdout_truncated = false, stderr_truncated = false;  // the sandbox cut it at the cap
  std::optional<std::string> start_error;                   // it did not start: the shell's words
};

// What a running command brings: its start, output, end (exit, an error or
// a sandbox that went away).
struct ExecEvent {
  enum Kind { kStarted, kOutput, kExit, kError, kClosed } kind = kClosed;
  int pid = 0;                                  // kStarted
  OutputStream stream = OutputStream::kStdout;  // kOutput
  std::string data;                             // kOutput
  ExitStatus exit;                              // kExit
  Status error;                                 // kError
};

// A command run to its end, its output kept under ExecOptions::capture_cap.
struct ExecResult {
  enum class End {
    kExited,     // `exit` says how
    kDeadline,   // no exit within the timeout and its grace
    kAbandoned,  // the caller left; the command was stopped
  };
  End end = End::kExited;
  std::optional<int> pid;  // once it started
  ExitStatus exit;
  std::string stdout_data, stderr_data;  // raw bytes, at most the cap each
  // Cut at the cap, by the sandbox or by kilnd.
  bool stdout_truncated = false, stderr_truncated = false;
};

// ---- Background processes ----

// A terminal's window, in character cells.
struct TerminalSize {
  int cols = 80;
  int rows = 24;
  bool operator==(const TerminalSize&) const = default;
};

struct ProcessSpec {
  Command command;
  bool stdin_pipe = false;  // else its stdin is empty
  int64_t timeout_ms = 0;   // 0 = none
  // Run it on a pseudo-terminal of this size: stdin (always open), stdout
  // and stderr are the terminal. With no argv or command: the login shell.
  std::optional<TerminalSize> pty;
};

enum class ProcessState { kRunning, kExited, kKilled, kTimedOut };
// running, exited, killed, timed_out.
std::string_view StateName(ProcessState state);

struct ProcessInfo {
  std::string id;  // "p3"
  uint64_t seq = 0;
  int pid = 0;  // 0 if it did not start
  ProcessState state = ProcessState::kRunning;
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
  uint64_t output_bytes = 0;  // output offset past the newest byte
  uint64_t first_offset = 0;  // offset of the oldest byte still kept
  std::optional<TerminalSize> pty;
};

struct OutputChunk {
  uint64_t offset = 0;
  OutputStream stream = OutputStream::kStdout;
  std::string data;
};

// A process's kept output from a cursor.
struct OutputPage {
  std::vector<OutputChunk> chunks;
  uint64_t next_cursor = 0;
  uint64_t first_offset = 0;
  uint64_t dropped_bytes = 0;  // lost between the cursor and first_offset
  bool complete = false;       // the process ended and all was read
  ProcessInfo process;
};

// ---- Files ----

enum class FileType { kFile, kDirectory, kSymlink, kOther };
// file, directory, symlink, other.
std::string_view TypeName(FileType type);

struct FileEntry {
  std::string name;  // the last component ("/" for the root)
  std::string path;
  FileType type = FileType::kFile;
  uint64_t size = 0;
  std::string mode;  // permission bits in octal, "644"
  int64_t modified_ms = 0;
  uint32_t uid = 0, gid = 0;
  std::optional<std::string> symlink_target;
  // Extended attributes under the prefix the call asked for, named without
  // it (E2B's file metadata: user.e2b.author → author).
  std::map<std::string, std::string> xattrs;
};

// What a write leaves on the file: exactly `values` under `prefix` (names
// without it), the prefix's other attributes removed.
struct XattrWrite {
  std::string prefix;  // "user." and more (src/agent/xattrs.h)
  std::map<std::string, std::string> values;
};

struct FileStat {
  bool exists = false;
  FileEntry entry;  // only entry.path when it does not exist
};

// How an archive upload ended: tar's exit (stdin_bytes: what it took) and
// the start of what it said.
struct ArchiveUnpacked {
  ExitStatus exit;
  std::string stderr_head;
};

// ---- File watches (kept in the sandbox: src/agent/watches.h) ----

struct WatchSpec {
  std::string id;
  std::string path;
  bool recursive = false;
  std::vector<std::string> events, include, exclude;  // empty: all / none
  int64_t batch_ms = 100;
  int64_t timeout_ms = 3600000;  // 0 = until stopped
  uint32_t max_watches = 8192;   // inotify watch descriptors it may hold
  // Each event but a remove carries the entry at its path, with the
  // attributes under xattr_prefix ("": none).
  bool entries = false;
  std::string xattr_prefix;
};

struct WatchInfo {
  WatchSpec spec;
  uint32_t watched = 0;  // inotify watch descriptors it holds now
  uint64_t cursor = 0;   // past the newest item
  uint64_t first_cursor = 0;
  bool running = true;
  std::optional<std::string> end_reason;  // stopped, timeout, root-removed
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
};

struct WatchEvent {
  std::string type;  // create, write, remove, rename, chmod
  std::string path;
  bool is_dir = false;
  std::optional<std::string> old_path;
  uint64_t count = 1;
  std::optional<FileEntry> entry;  // when the spec asked for entries
};

// overflow {dropped, reason}, limit {watches}, end {reason}.
struct WatchNotice {
  std::string kind;
  uint64_t dropped = 0;
  std::string reason;
  uint64_t watches = 0;
};

// One item of a watch: an event or a notice, in the order they came.
struct WatchItem {
  uint64_t seq = 0;
  std::optional<WatchEvent> event;
  std::optional<WatchNotice> notice;
};

struct WatchPage {
  std::vector<WatchItem> items;
  uint64_t next_cursor = 0;
  uint64_t dropped = 0;  // items lost between the cursor and the oldest kept
  bool ended = false;    // the watch ended and all was read
  WatchInfo watch;
};

}  // namespace kiln::io
