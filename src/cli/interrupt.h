// Ctrl-C handling for commands that must clean up (stop the sandbox) before
// exiting: the handler only records the signal; interruptible requests
// notice it and abort, and the command decides what to do.
#pragma once

namespace kiln::cli {

// SIGINT, SIGTERM and SIGHUP are recorded instead of killing us. Each
// handler fires once: a second Ctrl-C kills as usual, an escape hatch if
// the cleanup itself hangs. Also ignores SIGPIPE, so a closed stdout pipe
// becomes a write error (see ExecStreamPrinter) and the sandbox still stops.
void InstallInterruptHandlers();

bool InterruptRequested();
int InterruptSignal();  // the recorded signal number, 0 if none

// Test hook; also usable by a command that has handled the signal.
void ClearInterrupt();

}  // namespace kiln::cli
