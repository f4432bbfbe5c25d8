// io's words to the agent's wire structs (src/proto/ops.h) and back: the
// one place they meet. Only io's own files and its tests include this.
#pragma once

#include <map>
#include <string>

#include "io/types.h"
#include "proto/ops.h"

namespace kiln::io {

// `env` (the sandbox's) goes under the command's own variables.
proto::ExecRequest ToProto(const Command& command, const ExecOptions& options,
                           const std::map<std::string, std::string>& env);
proto::ProcStartRequest ToProto(const ProcessSpec& spec,
                                const std::map<std::string, std::string>& env);
proto::TerminalSize ToProto(TerminalSize size);
proto::WatchStartRequest ToProto(const WatchSpec& spec);

// What the agent said, in io's words. A state, stream or file type this
// kilnd does not know (an agent that root inside replaced) reads as
// killed, stdout, other.
ExitStatus FromProto(const proto::ExecExit& exit);
TerminalSize FromProto(const proto::TerminalSize& size);
ProcessInfo FromProto(proto::ProcessInfo info);
OutputPage FromProto(proto::OutputPage page);
// The agent's attributes are kept only under `xattr_prefix` (stripped of
// it, and within proto::kMaxXattrs and kMaxXattrValue): the agent is the
// sandbox's, and sends what it likes.
FileEntry FromProto(proto::FileEntry entry, std::string_view xattr_prefix = {});
FileStat FromProto(proto::FileStat stat, std::string_view xattr_prefix = {});
WatchInfo FromProto(proto::WatchInfo info);
WatchPage FromProto(proto::WatchPage page, std::string_view xattr_prefix = {});

}  // namespace kiln::io
