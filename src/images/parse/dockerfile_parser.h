// The Dockerfile parser behind ParseDockerfile (dockerfile.h): one pass over
// the logical lines (dockerfile_lex.h), keeping the stages so far and the
// variables in scope. Internal to kiln_images_parse.
//
// It is one class in two files, by concept: dockerfile.cc reads each
// instruction (the dispatch, RUN, COPY/ADD, ENV, EXPOSE, ...), and
// dockerfile_stages.cc evaluates stages (FROM and what a stage inherits,
// ARG, the variables a word sees, COPY --from naming a stage). Not
// thread-safe; one Parser per ParseDockerfile call.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "images/parse/dockerfile.h"
#include "images/parse/dockerfile_lex.h"

namespace kiln::images::dockerfile_internal {

class Parser {
 public:
  // The references must outlive the Parser.
  Parser(const std::map<std::string, std::string>& build_args, const DockerfileLimits& limits,
         char escape, const BaseScope& base_scope)
      : build_args_(build_args), limits_(limits), escape_(escape), base_scope_(base_scope) {}

  // The Dockerfile of `lines`; errors as ParseDockerfile's.
  Result<Dockerfile> Parse(const std::vector<LogicalLine>& lines);

 private:
  // What a stage carries, and what a stage built on it inherits (not its ARGs).
  struct Scope {
    std::map<std::string, std::string> env;
    std::map<std::string, std::optional<std::string>> args;
    std::string workdir = "/";
    std::vector<std::string> shell = {"/bin/sh", "-c"};
  };
  // A COPY --from naming no earlier stage: an image, or (an error once the
  // file is read) a later stage.
  struct PendingFrom {
    int line;
    int stage;
    std::string instruction;
    std::string from;
  };

  // Errors and steps (dockerfile.cc).
  // kInvalidRequest "Dockerfile line N: message", details {"line", "instruction"}.
  Status Error(std::string message) const;
  // A word's error (dockerfile_lex.h) under the instruction's name.
  Status WordError(const Status& s) const;
  void AddStep(Instruction instruction);
  Status NoFlags(const std::vector<Flag>& flags) const;

  // Instructions (dockerfile.cc).
  Status Dispatch(const std::string& name, std::string_view rest);
  Result<CommandForm> Command(std::string_view rest);
  Status Run(const std::vector<Flag>& flags, std::string_view rest);
  // A JSON array or whitespace-separated words, each expanded.
  Result<std::vector<std::string>> List(std::string_view rest);
  Status Copy(bool add, const std::vector<Flag>& flags, std::string_view rest);
  Status Workdir(std::string_view rest);
  Status Expose(std::string_view rest);
  // ENV and LABEL: "k v" (legacy: the rest of the line is the value) or "k=v k2="v 2"".
  // Values are expanded against the variables before the instruction.
  Result<std::vector<std::pair<std::string, std::string>>> Pairs(std::string_view rest);

  // Stages and variables (dockerfile_stages.cc).
  // The current stage's variables (ENV before ARG), and the global ARGs.
  Lookup StageLookup() const;
  Lookup MetaLookup() const;
  WordProcessor Words() const { return WordProcessor(escape_, StageLookup()); }
  Status From(const std::vector<Flag>& flags, std::string_view rest);
  Status Arg(std::string_view rest);
  // Sets copy->from_stage when --from names an earlier stage; else pending.
  Status ResolveFrom(CopyInstr* copy);
  // Once every stage is known: a pending --from that names a later stage.
  Status CheckPendingFroms();

  const std::map<std::string, std::string>& build_args_;
  const DockerfileLimits& limits_;
  const char escape_;
  const BaseScope& base_scope_;
  int line_ = 0;
  std::string text_;
  std::string instruction_;
  std::map<std::string, std::string> meta_;  // global ARGs that have a value
  Dockerfile file_;
  std::vector<Scope> scopes_;  // of the finished stages, by index
  Scope scope_;                // of the current stage
  std::vector<PendingFrom> pending_;
};

}  // namespace kiln::images::dockerfile_internal
