// Per-invocation state handed to every verb: output mode and the client,
// which is only built when a verb actually talks to the daemon.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cli/http_client.h"
#include "cli/url.h"

namespace kiln::cli {

struct ClientConfig {
  ApiUrl url;
  std::optional<std::string> api_key;
};

// KILN_API_URL / KILN_API_KEY values (null or empty = unset).
ClientConfig ConfigFromEnv(const char* api_url, const char* api_key);

// Where kilnd keeps the local admin key it creates for zero-configuration use.
inline constexpr std::string_view kDefaultAdminKeyFile = "/var/lib/kiln/admin.key";

// The key every request sends, from KILN_API_KEY, else RUNTIME_API_KEY,
// else the key file at KILN_ADMIN_KEY_FILE (default kDefaultAdminKeyFile)
// if readable; else none. Arguments are the variables' values (null or
// empty = unset).
std::optional<std::string> SelectApiKey(const char* kiln_api_key, const char* runtime_api_key,
                                        const char* admin_key_file);

// The key in a key file: its first line without surrounding white space.
// Null when the file is unreadable, empty or holds more than a token
// (anything but printable ASCII), so a stray file never breaks a request.
std::optional<std::string> ReadKeyFile(const std::string& path);

class Context {
 public:
  explicit Context(bool json, bool quiet = false) : json_(json), quiet_(quiet) {}

  bool json() const { return json_; }
  bool quiet() const { return quiet_; }
  // Whether long operations show a progress line (see progress.h).
  bool progress() const;
  HttpClient& http();  // reads the environment on first use

 private:
  bool json_;
  bool quiet_;
  std::unique_ptr<HttpClient> http_;
};

// The answer as one JSON line under --json, else `text` as is; returns 0,
// the command's exit status.
int PrintAnswer(const Context& ctx, const nlohmann::json& answer, std::string_view text);

}  // namespace kiln::cli
