// Dockerfiles parsed into typed instructions, the one place their text is read.
//
// The rules are Docker's, as BuildKit documents them: parser directives
// (`# escape=`), comments, line continuations, JSON exec form with fallback to
// shell form, and variable expansion (`$V`, `${V}`, `${V:-word}`, `${V:+word}`,
// `${V-word}`, `${V+word}`, `${V:?msg}`, `${V?msg}`) with ENV before ARG.
// What kiln's builder cannot do safely or at all is refused here, with the line
// number, rather than half-done later: RUN --mount, ONBUILD, ADD from URLs or
// git, COPY --exclude, heredocs, platforms other than linux/amd64.
//
// Expansion happens here, so the builder sees final values: FROM uses the
// global ARGs (those before the first FROM); COPY/ADD/ENV/WORKDIR/USER/LABEL/
// EXPOSE/ARG/STOPSIGNAL/VOLUME use the stage's ENV and ARG values. RUN, CMD and
// ENTRYPOINT are left alone: the shell expands them at run time, with the ARG
// values in RunInstr.build_args in its environment. The parser only knows the
// ENV, WORKDIR and SHELL a stage inherits when its base is an earlier stage;
// for an external base it asks BaseScope (the builder knows kiln's images),
// and starts from empty ENV, WORKDIR "/" and ["/bin/sh", "-c"] when that has
// no answer (a registry image, unknown until it is pulled).
//
// Everything here is pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace kiln::images {

// A command given as a shell line (RUN make) or as JSON exec form (RUN ["make"]).
// Exec form: argv as written, shell empty. Shell form: shell is the text as
// written (continuations joined) and argv the full command to execute, the
// SHELL in effect followed by it (["/bin/sh", "-c", "make"] by default).
struct CommandForm {
  bool exec_form = false;
  std::vector<std::string> argv;
  std::string shell;
};
struct FromInstr {  // FROM x [AS name]; kept in Stage, not as a Step
  std::string image;
  std::optional<std::string> stage_name;
};
struct RunInstr {
  CommandForm command;
  // The ARG values in scope at this RUN (declared in the stage, or a global ARG
  // redeclared without value there; build_args override): they are the RUN's
  // environment. An ARG with no value anywhere is left out, and so is one the
  // stage's ENV overrides (ENV wins, as in Docker).
  std::map<std::string, std::string> build_args;
};
struct CopyInstr {
  bool add = false;  // ADD (local tar archives are extracted) vs COPY
  // Context paths (may hold globs), or paths in the --from stage/image.
  std::vector<std::string> sources;
  std::string dest;                  // as written, after variable expansion
  std::optional<std::string> from;   // --from=<stage name|stage index|image ref>, after expansion
  std::optional<std::string> chown;  // --chown=user[:group]
  std::optional<uint32_t> chmod;     // --chmod=0755 (octal)
  // Set when `from` names an earlier stage (by name or index): its index; a
  // stage name in `from` is then lower-cased, as Stage::name is. Otherwise
  // `from`, when set, is an image reference.
  std::optional<int> from_stage;
};
struct EnvInstr {
  std::vector<std::pair<std::string, std::string>> vars;
};
// `value` is the one in effect: build_args, else the default as written
// (expanded), else the global ARG's value; nullopt when none.
struct ArgInstr {
  std::string name;
  std::optional<std::string> value;
};
struct WorkdirInstr {
  // Expanded; relative paths are resolved against the previous WORKDIR by the parser.
  std::string path;
};
struct UserInstr {
  std::string user;  // user[:group]
};
struct LabelInstr {
  std::vector<std::pair<std::string, std::string>> labels;
};
struct CmdInstr {
  CommandForm command;
};
struct EntrypointInstr {
  CommandForm command;
};
struct ExposeInstr {
  std::vector<std::string> ports;  // "8000/tcp" (default /tcp added)
};
struct ShellInstr {
  std::vector<std::string> argv;  // SHELL ["bash","-c"]
};
struct VolumeInstr {
  std::vector<std::string> paths;  // recorded only
};
struct StopSignalInstr {
  std::string signal;
};
using Instruction =
    std::variant<RunInstr, CopyInstr, EnvInstr, ArgInstr, WorkdirInstr, UserInstr, LabelInstr,
                 CmdInstr, EntrypointInstr, ExposeInstr, ShellInstr, VolumeInstr, StopSignalInstr>;
// text: the instruction as written, continuations joined, for logs and cache keys.
// An ARG naming several variables (ARG a=1 b) gives one Step per variable.
struct Step {
  int line = 0;
  std::string text;
  Instruction instruction;
};
struct Stage {
  int index = 0;
  int line = 0;  // line of its FROM
  // FROM's image after ARG expansion: a kiln image, an OCI ref, or an earlier stage's name.
  std::string base;
  std::optional<std::string> name;  // AS name (lower-cased)
  std::optional<int> base_stage;    // set when base names an earlier stage
  std::vector<Step> steps;
};
struct Dockerfile {
  std::vector<Stage> stages;
};

// What an external base image (a FROM that is not an earlier stage) gives
// the stage built on it: its config's ENV ("K=V") and working directory.
struct BaseConfig {
  std::vector<std::string> env;
  std::string workdir;
};
using BaseScope = std::function<std::optional<BaseConfig>(const std::string& base)>;

// max_steps counts every instruction, FROM, global ARGs and HEALTHCHECK included.
struct DockerfileLimits {
  size_t max_bytes = 256 * 1024;
  int max_steps = 200;
  int max_stages = 16;
};
// Parses and expands variables. Errors: Code::kInvalidRequest with a message starting
// "Dockerfile line N: ..." and details {"line": N} (and "instruction" when known);
// Code::kPayloadTooLarge for the size limit. An unknown build_arg is not an error.
Result<Dockerfile> ParseDockerfile(std::string_view text,
                                   const std::map<std::string, std::string>& build_args,
                                   const DockerfileLimits& limits = {},
                                   const BaseScope& base_scope = nullptr);
// The stages a build of `target` (default: the last stage) needs, in build order: the target, the
// stages its FROM and COPY --from name, transitively. Build order is ascending index (a stage only
// names earlier ones), so the target comes last and unused stages are left out.
// kInvalidRequest "unknown target" naming the valid stage names.
Result<std::vector<int>> StagesFor(const Dockerfile& file,
                                   const std::optional<std::string>& target);

}  // namespace kiln::images
