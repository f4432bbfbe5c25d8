// GET /ui, /ui/{file}: the web console (console/ in the repo), answered
// from the files kilnd read at start, without a key (the console asks for
// one and sends it on each API call), under a strict Content-Security-Policy.
#pragma once

#include "api/console/console_files.h"
#include "api/router.h"

namespace kiln::api {

// The policy every console answer carries: scripts, styles and calls from
// kilnd's own origin only; no inline code, frames, forms or plugins.
extern const char kConsoleCsp[];

// `files` must outlive the router. With no files, /ui answers 404 saying
// how to build the console.
void AddConsoleRoutes(Router& r, const ConsoleFiles& files);

}  // namespace kiln::api
