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

bool is_set(const char* value) { return value != nullptr && *value != '\0'; }

}  // namespace

ClientConfig config_from_env(const char* api_url, const char* api_key) {
  ClientConfig config;
  config.url = parse_api_url(is_set(api_url) ? api_url : kDefaultApiUrl);
  if (is_set(api_key)) config.api_key = api_key;
  return config;
}

std::optional<std::string> read_key_file(const std::string& path) {
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

std::optional<std::string> select_api_key(const char* kiln_api_key, const char* runtime_api_key,
                                          const char* admin_key_file) {
  if (is_set(kiln_api_key)) return std::string(kiln_api_key);
  if (is_set(runtime_api_key)) return std::string(runtime_api_key);
  // Only root (or whoever the file was shared with) can read the default
  // file; everyone else simply sends no key.
  return read_key_file(is_set(admin_key_file) ? std::string(admin_key_file)
                                              : std::string(kDefaultAdminKeyFile));
}

bool Context::progress() const { return progress_wanted(json_, quiet_, STDERR_FILENO); }

HttpClient& Context::http() {
  if (!http_) {
    const std::optional<std::string> key =
        select_api_key(std::getenv("KILN_API_KEY"), std::getenv("RUNTIME_API_KEY"),
                       std::getenv("KILN_ADMIN_KEY_FILE"));
    ClientConfig config = config_from_env(std::getenv("KILN_API_URL"), nullptr);
    http_ = std::make_unique<HttpClient>(std::move(config.url), key);
  }
  return *http_;
}

int print_answer(const Context& ctx, const nlohmann::json& answer, std::string_view text) {
  if (ctx.json())
    print_json(answer);
  else
    print_out(text);
  return 0;
}

}  // namespace kiln::cli
