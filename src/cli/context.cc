#include "cli/context.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "cli/output.h"
#include "cli/progress.h"

namespace kiln::cli {
namespace {

bool IsSet(const char* value) { return value != nullptr && *value != '\0'; }

}  // namespace

ClientConfig ConfigFromEnv(const char* api_url, const char* api_key) {
  ClientConfig config;
  config.url = ParseApiUrl(IsSet(api_url) ? api_url : kDefaultApiUrl);
  if (IsSet(api_key)) config.api_key = api_key;
  return config;
}

std::optional<std::string> ReadKeyFile(const std::string& path) {
  // O_NONBLOCK: a FIFO at the path must not hang every kiln command.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string data(4096, '\0');
  ssize_t n;
  do {
    n = ::read(fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  data.resize(static_cast<std::size_t>(n));
  data.resize(std::min(data.size(), data.find('\n')));
  constexpr std::string_view kSpace = " \t\r";
  const std::size_t begin = data.find_first_not_of(kSpace);
  if (begin == std::string::npos) return std::nullopt;
  std::string key = data.substr(begin, data.find_last_not_of(kSpace) - begin + 1);
  for (unsigned char c : key) {
    if (c <= 0x20 || c >= 0x7f) return std::nullopt;
  }
  return key;
}

std::optional<std::string> SelectApiKey(const char* kiln_api_key, const char* runtime_api_key,
                                        const char* admin_key_file) {
  if (IsSet(kiln_api_key)) return std::string(kiln_api_key);
  if (IsSet(runtime_api_key)) return std::string(runtime_api_key);
  // Only root (or whoever the file was shared with) can read the default
  // file; everyone else simply sends no key.
  return ReadKeyFile(IsSet(admin_key_file) ? std::string(admin_key_file)
                                           : std::string(kDefaultAdminKeyFile));
}

bool Context::progress() const { return ProgressWanted(json_, quiet_, STDERR_FILENO); }

HttpClient& Context::http() {
  if (!http_) {
    const std::optional<std::string> key =
        SelectApiKey(std::getenv("KILN_API_KEY"), std::getenv("RUNTIME_API_KEY"),
                     std::getenv("KILN_ADMIN_KEY_FILE"));
    ClientConfig config = ConfigFromEnv(std::getenv("KILN_API_URL"), nullptr);
    http_ = std::make_unique<HttpClient>(std::move(config.url), key);
  }
  return *http_;
}

int PrintAnswer(const Context& ctx, const nlohmann::json& answer, std::string_view text) {
  if (ctx.json())
    PrintJson(answer);
  else
    PrintOut(text);
  return 0;
}

}  // namespace kiln::cli
