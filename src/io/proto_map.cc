#include "io/proto_map.h"

#include <utility>

namespace kiln::io {

namespace {

void FillCommand(const Command& c, const std::map<std::string, std::string>& env,
                 proto::CommandSpec* out) {
  out->argv = c.argv;
  out->command = c.command;
  out->env = env;
  for (const auto& [k, v] : c.env) out->env[k] = v;
  out->cwd = c.cwd;
  out->as_root = c.as_root;
}

ProcessState ParseState(const std::string& s) {
  if (s == "running") return ProcessState::kRunning;
  if (s == "exited") return ProcessState::kExited;
  if (s == "timed_out") return ProcessState::kTimedOut;
  return ProcessState::kKilled;
}

FileType ParseType(const std::string& s) {
  if (s == "file") return FileType::kFile;
  if (s == "directory") return FileType::kDirectory;
  if (s == "symlink") return FileType::kSymlink;
  return FileType::kOther;
}

}  // namespace

std::string_view StreamName(OutputStream stream) {
  return stream == OutputStream::kStderr ? "stderr" : "stdout";
}

std::string_view StateName(ProcessState state) {
  switch (state) {
    case ProcessState::kRunning:
      return "running";
    case ProcessState::kExited:
      return "exited";
    case ProcessState::kKilled:
      return "killed";
    case ProcessState::kTimedOut:
      return "timed_out";
  }
  return "killed";
}

std::string_view TypeName(FileType type) {
  switch (type) {
    case FileType::kFile:
      return "file";
    case FileType::kDirectory:
      return "directory";
    case FileType::kSymlink:
      return "symlink";
    case FileType::kOther:
      return "other";
  }
  return "other";
}

proto::ExecRequest ToProto(const Command& command, const ExecOptions& options,
                           const std::map<std::string, std::string>& env) {
  proto::ExecRequest r;
  FillCommand(command, env, &r);
  r.timeout_ms = options.timeout_ms;
  r.stdin_data = options.stdin_bytes.has_value();
  r.capture_limit = options.capture_cap;
  r.kill_past_limit = options.kill_past_cap;
  return r;
}

proto::ProcStartRequest ToProto(const ProcessSpec& spec,
                                const std::map<std::string, std::string>& env) {
  proto::ProcStartRequest r;
  FillCommand(spec.command, env, &r);
  r.stdin_pipe = spec.stdin_pipe;
  r.timeout_ms = spec.timeout_ms;
  if (spec.pty) r.pty = ToProto(*spec.pty);
  return r;
}

proto::TerminalSize ToProto(TerminalSize size) {
  return proto::TerminalSize{.cols = size.cols, .rows = size.rows};
}

ExitStatus FromProto(const proto::ExecExit& e) {
  return ExitStatus{.exit_code = e.exit_code,
                    .signal = e.signal,
                    .timed_out = e.timed_out,
                    .duration_ms = e.duration_ms,
                    .stdout_bytes = e.stdout_bytes,
                    .stderr_bytes = e.stderr_bytes,
                    .stdin_bytes = e.stdin_bytes,
                    .stdout_truncated = e.stdout_truncated,
                    .stderr_truncated = e.stderr_truncated,
                    .start_error = e.start_error};
}

TerminalSize FromProto(const proto::TerminalSize& size) {
  return TerminalSize{.cols = size.cols, .rows = size.rows};
}

ProcessInfo FromProto(proto::ProcessInfo p) {
  ProcessInfo out{.id = std::move(p.id),
                  .seq = p.seq,
                  .pid = p.pid,
                  .state = ParseState(p.state),
                  .exit_code = p.exit_code,
                  .signal = std::move(p.signal),
                  .command = std::move(p.command),
                  .argv = std::move(p.argv),
                  .cwd = std::move(p.cwd),
                  .stdin_open = p.stdin_open,
                  .stdin_offset = p.stdin_offset,
                  .timeout_ms = p.timeout_ms,
                  .started_ms = p.started_ms,
                  .ended_ms = p.ended_ms,
                  .output_bytes = p.output_bytes,
                  .first_offset = p.first_offset};
  if (p.pty) out.pty = FromProto(*p.pty);
  return out;
}

OutputPage FromProto(proto::OutputPage page) {
  OutputPage out{.next_cursor = page.next_cursor,
                 .first_offset = page.first_offset,
                 .dropped_bytes = page.dropped_bytes,
                 .complete = page.complete,
                 .process = FromProto(std::move(page.process))};
  out.chunks.reserve(page.chunks.size());
  for (auto& c : page.chunks) {
    out.chunks.push_back(
        OutputChunk{.offset = c.offset,
                    .stream = c.stream == "stderr" ? OutputStream::kStderr : OutputStream::kStdout,
                    .data = std::move(c.data)});
  }
  return out;
}

FileEntry FromProto(proto::FileEntry e, std::string_view xattr_prefix) {
  std::map<std::string, std::string> xattrs;
  if (!xattr_prefix.empty())
    for (auto& [name, value] : e.xattrs) {
      if (xattrs.size() >= proto::kMaxXattrs) break;
      if (name.size() > xattr_prefix.size() && name.starts_with(xattr_prefix) &&
          value.size() <= proto::kMaxXattrValue)
        xattrs[name.substr(xattr_prefix.size())] = std::move(value);
    }
  return FileEntry{.name = std::move(e.name),
                   .path = std::move(e.path),
                   .type = ParseType(e.type),
                   .size = e.size,
                   .mode = std::move(e.mode),
                   .modified_ms = e.modified_ms,
                   .uid = e.uid,
                   .gid = e.gid,
                   .symlink_target = std::move(e.symlink_target),
                   .xattrs = std::move(xattrs)};
}

FileStat FromProto(proto::FileStat stat, std::string_view xattr_prefix) {
  return FileStat{.exists = stat.exists, .entry = FromProto(std::move(stat.entry), xattr_prefix)};
}

proto::WatchStartRequest ToProto(const WatchSpec& spec) {
  return proto::WatchStartRequest{.id = spec.id,
                                  .path = spec.path,
                                  .recursive = spec.recursive,
                                  .events = spec.events,
                                  .include = spec.include,
                                  .exclude = spec.exclude,
                                  .batch_ms = spec.batch_ms,
                                  .timeout_ms = spec.timeout_ms,
                                  .max_watches = spec.max_watches,
                                  .entries = spec.entries,
                                  .xattr_prefix = spec.xattr_prefix};
}

WatchInfo FromProto(proto::WatchInfo w) {
  return WatchInfo{.spec = WatchSpec{.id = std::move(w.id),
                                     .path = std::move(w.path),
                                     .recursive = w.recursive,
                                     .events = std::move(w.events),
                                     .include = std::move(w.include),
                                     .exclude = std::move(w.exclude),
                                     .batch_ms = w.batch_ms,
                                     .timeout_ms = w.timeout_ms,
                                     .max_watches = w.max_watches},
                   .watched = w.watched,
                   .cursor = w.cursor,
                   .first_cursor = w.first_cursor,
                   .running = w.state == "running",
                   .end_reason = std::move(w.end_reason),
                   .started_ms = w.started_ms,
                   .ended_ms = w.ended_ms};
}

WatchPage FromProto(proto::WatchPage page, std::string_view xattr_prefix) {
  WatchPage out{.next_cursor = page.next_cursor,
                .dropped = page.dropped,
                .ended = page.ended,
                .watch = FromProto(std::move(page.watch))};
  out.items.reserve(page.items.size());
  for (auto& item : page.items) {
    WatchItem i{.seq = item.seq};
    if (item.event) {
      auto& e = *item.event;
      i.event = WatchEvent{.type = std::move(e.type),
                           .path = std::move(e.path),
                           .is_dir = e.is_dir,
                           .old_path = std::move(e.old_path),
                           .count = e.count};
      if (e.entry) i.event->entry = FromProto(std::move(*e.entry), xattr_prefix);
    } else if (item.notice) {
      auto& n = *item.notice;
      i.notice = WatchNotice{.kind = std::move(n.kind),
                             .dropped = n.dropped,
                             .reason = std::move(n.reason),
                             .watches = n.watches};
    } else {
      continue;  // neither: nothing to say
    }
    out.items.push_back(std::move(i));
  }
  return out;
}

}  // namespace kiln::io
