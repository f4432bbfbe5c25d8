// The terminal's wire format, apart from any socket: the `pty` member of a
// process start, the window size of :resize and of the terminal WebSocket's
// query, and the JSON text frames of GET /v1/sandboxes/{id}/terminal.
// Binary frames carry terminal bytes both ways and need no parsing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/validate.h"
#include "common/status.h"
#include "io/types.h"

namespace kiln::api::v1 {

// A window is 1..1000 cells each way: a bound on what a client may ask the
// agent to lay out, far past any real screen.
inline constexpr int kTerminalMaxCells = 1000;
inline constexpr io::TerminalSize kDefaultTerminalSize{.cols = 80, .rows = 24};

// `pty` of POST .../processes: true (80x24), false or null (none), or
// {"cols", "rows"}. Problems go to `f` under "pty", "pty.cols", "pty.rows".
std::optional<io::TerminalSize> ReadPtyField(FieldReader& f);

// `cols` and `rows` of a :resize body, both required; issues go to `f`.
io::TerminalSize ReadTerminalSize(FieldReader& f);

// What a client's text frame asks. Only {"type": "resize", "cols", "rows"}
// is known; anything else is an error the session reports and ignores.
struct TerminalControl {
  std::optional<io::TerminalSize> resize;
  std::string error;  // non-empty: why the frame was not understood
};
TerminalControl ParseTerminalControl(std::string_view text);

// The server's text frames.
std::string TerminalReadyFrame(const std::string& process_id);
// exitCode is null when a signal ended it (then "signal" names it).
std::string TerminalExitFrame(const io::ProcessInfo& info);
std::string TerminalErrorFrame(const Status& status);

// Whether the request asks for a WebSocket (RFC 6455 section 4.2.1):
// Upgrade: websocket and a Connection header listing "upgrade".
bool IsWebSocketUpgrade(std::string_view upgrade, std::string_view connection);

}  // namespace kiln::api::v1
