#include "images/manager/front_image_recipes.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/strings.h"
#include "images/parse/recipe.h"

namespace kiln::images {

namespace fs = std::filesystem;
using nlohmann::json;

namespace front_image_recipes {
namespace {

constexpr const char* kInterpreter = "code-interpreter-v1";
constexpr const char* kHostCa = "/etc/ssl/certs/kiln-host-ca.pem";
// What examples/images/sandboxfusion.py calls its core set: the languages
// the tests use.
const std::vector<std::string> kSandboxFusionCore = {
    "g++", "libc6-dev", "golang-go", "default-jdk-headless", "rustc", "python3-pytest"};

std::string ReadText(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text(max + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text.size() > max ? "" : text;
}

// The host of "http://deb.debian.org/debian" (a URI of apt's sources).
std::string UriHost(const std::string& uri) {
  size_t scheme = uri.find("://");
  if (scheme == std::string::npos) return "";
  std::string rest = uri.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  rest = rest.substr(rest.find('@') == std::string::npos ? 0 : rest.find('@') + 1);
  if (!rest.empty() && rest.front() == '[') return rest.substr(0, rest.find(']') + 1);
  return AsciiLower(rest.substr(0, rest.find(':')));
}

void AddHost(std::vector<std::string>& hosts, const std::string& host) {
  if (!host.empty() && std::find(hosts.begin(), hosts.end(), host) == hosts.end())
    hosts.push_back(host);
}

network::Policy Allowing(const std::vector<std::string>& hosts) {
  network::PolicyError error;
  auto p =
      network::ParsePolicy(json{{"internet", !hosts.empty()}, {"allow", hosts}}, "network", &error);
  return p.value_or(network::Policy{});
}

}  // namespace
}  // namespace front_image_recipes

FrontImageHost ReadFrontImageHost(const std::string& etc) {
  using namespace front_image_recipes;
  FrontImageHost host;
  host.ca_bundle = ReadText(etc + "/ssl/certs/ca-certificates.crt", kMaxRecipeFileBytes / 2);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(etc + "/apt/sources.list.d", ec)) {
    if (e.path().extension() != ".sources") continue;
    std::istringstream lines(ReadText(e.path(), 1 << 20));
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("URIs:")) continue;
      std::istringstream uris(line.substr(5));
      for (std::string uri; uris >> uri;) AddHost(host.debian_mirrors, UriHost(uri));
    }
  }
  std::istringstream lines(ReadText(etc + "/apt/sources.list", 1 << 20));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first, word;
    if (!(words >> first) || first != "deb") continue;
    while (words >> word)
      if (word.find("://") != std::string::npos) {
        AddHost(host.debian_mirrors, UriHost(word));
        break;
      }
  }
  return host;
}

std::vector<FrontImages::Definition> ShippedFrontImages(const std::string& sandboxfusion_image,
                                                        const FrontImageHost& host) {
  using namespace front_image_recipes;
  std::vector<FrontImages::Definition> out;

  FrontImages::Definition interpreter;
  interpreter.name = kInterpreter;
  // Jupyter's kernels, as E2B's interpreter has them: ipykernel (with
  // jupyter_client, contexts are real IPython kernels:
  // src/interpreter/kernel_jupyter.py), R's IRkernel and a JDK from Debian,
  // JJava and bash_kernel from PyPI; TypeScript's compiler from npm for
  // kiln's JavaScript kernel.
  std::string cert;
  json files = json::array();
  if (!host.ca_bundle.empty()) {
    files.push_back({{"path", kHostCa}, {"content", host.ca_bundle}});
    cert = std::string(" --cert ") + kHostCa;
  }
  // The versions E2B's template pins (its requirements.txt), so code written
  // against E2B's runs the same here (matplotlib 3.11 drops boxplot's
  // `labels`, which E2B's own chart tests use).
  std::string pip =
      "python3 -m pip install --no-cache-dir --break-system-packages" + cert +
      " numpy==2.3.5 pandas==2.2.3 matplotlib==3.10.9 pillow==12.3.0 ipykernel==6.31.0"
      " ipython==9.15.0 jupyter_client bash_kernel jjava e2b_charts"
      " && python3 -m bash_kernel.install --sys-prefix";
  std::string npm = "npm install -g --no-fund --no-audit" +
                    (cert.empty() ? std::string() : std::string(" --cafile ") + kHostCa) +
                    " typescript@5.9.3";  // 7 and later are native, without transpileModule
  interpreter.recipe = {{"files", files},
                        {"apt", {"r-cran-irkernel", "default-jdk-headless"}},
                        {"commands", {pip, npm}},
                        {"env", {{"MPLBACKEND", "Agg"}}}};
  std::vector<std::string> hosts = host.debian_mirrors;
  for (const char* h : {"pypi.org", "files.pythonhosted.org", "registry.npmjs.org"})
    AddHost(hosts, h);
  interpreter.network = Allowing(hosts);
  interpreter.build_timeout_seconds = 3600;
  out.push_back(interpreter);

  FrontImages::Definition languages;
  languages.name = sandboxfusion_image;
  languages.recipe = {{"apt", kSandboxFusionCore},
                      {"env", {{"GOCACHE", "/tmp/go-build"}, {"GOPROXY", "off"}}},
                      {"workdir", "/workspace"}};
  languages.network = Allowing(host.debian_mirrors);
  languages.build_timeout_seconds = 3600;
  out.push_back(languages);
  return out;
}

Result<FrontImages::Definition> ReadFrontImageFlag(const std::string& text) {
  auto refused = [&](const std::string& why) {
    return Status(Code::kInvalidRequest, "--front-image '" + text + "': " + why);
  };
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return refused("write NAME=FILE, FILE a JSON {recipe, network?, buildTimeoutSeconds?}");
  FrontImages::Definition d;
  d.name = text.substr(0, eq);
  if (Status s = ValidateImageName(d.name); !s.ok()) return refused(s.message());
  std::string path = text.substr(eq + 1);
  std::string raw = front_image_recipes::ReadText(path, 4u << 20);
  json j = json::parse(raw, nullptr, false);
  if (raw.empty() || !j.is_object() || !j.contains("recipe"))
    return refused(path + " is not a JSON object with a recipe (readable, at most 4 MiB)");
  d.recipe = j["recipe"];
  if (Result<RecipeBuild> checked = RecipeToBuild(d.recipe); !checked.ok())
    return refused(checked.status().message());
  if (j.contains("network")) {
    network::PolicyError error;
    auto p = network::ParsePolicy(j["network"], "network", &error);
    if (!p) return refused(error.path + ": " + error.message);
    d.network = *p;
  }
  if (j.contains("buildTimeoutSeconds")) {
    if (!j["buildTimeoutSeconds"].is_number_integer() || j["buildTimeoutSeconds"].get<int>() < 60 ||
        j["buildTimeoutSeconds"].get<int>() > 7200)
      return refused("buildTimeoutSeconds must be an integer from 60 to 7200");
    d.build_timeout_seconds = j["buildTimeoutSeconds"].get<int>();
  }
  return d;
}

std::vector<FrontImages::Definition> WithOverrides(std::vector<FrontImages::Definition> shipped,
                                                   std::vector<FrontImages::Definition> overrides) {
  for (auto& o : overrides) {
    std::erase_if(shipped, [&](const auto& d) { return d.name == o.name; });
    shipped.push_back(std::move(o));
  }
  return shipped;
}

}  // namespace kiln::images
