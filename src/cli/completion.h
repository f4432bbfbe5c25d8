// Shell completion generated from the command table (command_table.h), so
// it never falls behind the commands: `kiln completion bash`.
#pragma once

#include <string>

namespace kiln::cli {

// The bash completion script: commands, verbs, flags and flag values.
std::string BashCompletionScript();

}  // namespace kiln::cli
