// E2B's clients name the sandbox user's home /home/user; kiln's base keeps it
// at /workspace. A symlink would do for paths, but not for getcwd(): a
// process started in /home/user would read /workspace back. So the base has
// an empty /home/user and PID 1 binds /workspace onto it at boot: the same
// folder under both names, each reading back as itself.
#pragma once

#include "agent/run_as.h"

namespace kiln::agent {

// Binds run_as.home onto /home/user when the home is kiln's /workspace and
// /home/user is an empty directory (kiln's base; an image with a home of its
// own there is left alone). Then drops CAP_SYS_ADMIN from PID 1 and from
// every process it will start: the sandbox's root gets no mount(2). Called
// once, before anything else runs; a restored copy keeps both.
void SetUpHomeAlias(const RunAs& run_as);

}  // namespace kiln::agent
