// An E2B template build as the Dockerfile kiln's builder runs: E2B's step
// semantics (its orchestrator's commands) written as Dockerfile
// instructions, one per line, each line's E2B step recorded.
//
// What E2B's steps mean, and how each is written:
// - The base: the image or template, then E2B's provisioning: a `user`
//   account whose home is /home/user (made when the base has none), and
//   the steps start as that user in that home.
// - RUN [cmd, user?]: bash -c cmd when the image has bash, else sh -c, as
//   the step's user or the current one.
// - COPY [src, dest, owner?, mode?] with its uploaded archive: the archive
//   is a named context; a glob's files are copied from its fixed prefix
//   down, as E2B's orchestrator moves them; owner defaults to the current
//   user (E2B's, where Docker's is root).
// - ENV [k, v, k, v, ...], WORKDIR [path], USER [name]: as Docker's; a USER
//   that does not exist is made (as E2B does), as root.
// Values reach the Dockerfile quoted (JSON for RUN and COPY, double-quoted
// words for the rest), so no value can add an instruction; $VAR references
// that E2B's SDK leaves in place are expanded by the builder, as E2B's
// orchestrator expands them.
#include <algorithm>
#include <cctype>
#include <set>

#include "api/e2b/templates.h"
#include "api/validate.h"
#include "images/parse/image_ref.h"

namespace kiln::api::e2b {

using nlohmann::json;

namespace template_dockerfile {
namespace {

// Makes account $1 (home /home/$1) when the image has none of that name:
// with useradd, else adduser, else (a minimal image) by writing its lines
// into /etc/passwd and /etc/group, first free id from 1000. With $2 "home"
// (E2B's own `user`), /home/$1 is also made its home, owned by it, where
// the image had it elsewhere.
constexpr const char* kEnsureUser =
    "if ! id -u \"$1\" >/dev/null 2>&1; then\n"
    "  shell=/bin/sh; [ -x /bin/bash ] && shell=/bin/bash\n"
    "  if command -v useradd >/dev/null 2>&1; then\n"
    "    useradd -m -d \"/home/$1\" -s \"$shell\" \"$1\" || exit 1\n"
    "  elif command -v adduser >/dev/null 2>&1; then\n"
    "    adduser -D -h \"/home/$1\" -s \"$shell\" \"$1\" || exit 1\n"
    "  else\n"
    "    id=1000\n"
    "    while grep -qs \"^[^:]*:[^:]*:$id:\" /etc/passwd /etc/group; do id=$((id + 1)); done\n"
    "    echo \"$1:x:$id:$id::/home/$1:$shell\" >> /etc/passwd || exit 1\n"
    "    echo \"$1:x:$id:\" >> /etc/group || exit 1\n"
    "    [ ! -f /etc/shadow ] || echo \"$1:!:19000:0:99999:7:::\" >> /etc/shadow\n"
    "    mkdir -p \"/home/$1\" && chown \"$id:$id\" \"/home/$1\" || exit 1\n"
    "  fi\n"
    "fi\n"
    "[ \"$2\" = home ] || exit 0\n"
    "mkdir -p \"/home/$1\" && chown \"$(id -u \"$1\"):$(id -g \"$1\")\" \"/home/$1\" || exit 1\n"
    "[ \"$(grep \"^$1:\" /etc/passwd | cut -d: -f6)\" = \"/home/$1\" ] && exit 0\n"
    "usermod -d \"/home/$1\" \"$1\" 2>/dev/null ||\n"
    "  sed -i \"s#^\\($1:[^:]*:[^:]*:[^:]*:[^:]*:\\)[^:]*#\\1/home/$1#\" /etc/passwd";
// Runs $1 with bash when the image has it (E2B's shell), else sh.
constexpr const char* kRunShell =
    "if [ -x /bin/bash ]; then exec /bin/bash -c \"$1\"; fi; exec /bin/sh -c \"$1\"";

constexpr const char* kUser = "user";  // E2B's account

// A word of a Dockerfile line: double-quoted, with '"' and '\' escaped.
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A POSIX-ish account name, or a number (a uid, made by nobody).
bool IsAccountName(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  if (std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
  if (!(std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

bool IsUid(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A user[:group] as E2B's steps give one.
bool IsOwner(const std::string& s) {
  size_t colon = s.find(':');
  if (colon == std::string::npos) return IsAccountName(s);
  return IsAccountName(s.substr(0, colon)) && IsAccountName(s.substr(colon + 1));
}

bool HasGlob(const std::string& s) { return s.find_first_of("*?[{") != std::string::npos; }

// A COPY source as E2B's orchestrator reads it: without "./", and for a
// glob the folder above its first wildcard ("." for the archive's root),
// whose files (only those the glob matched are in the archive) are copied.
std::string CopySource(std::string src) {
  while (src.starts_with("./")) src.erase(0, 2);
  if (!HasGlob(src)) return src.empty() ? "." : src;
  size_t meta = src.find_first_of("*?[{");
  size_t slash = src.rfind('/', meta);
  return slash == std::string::npos ? "." : src.substr(0, slash);
}

class Writer {
 public:
  // One instruction, made from E2B step `step` ("base", "1", ...).
  void Line(const std::string& text, const std::string& step) {
    text_ += text + "\n";
    names_.push_back(step);
  }
  // After Shell(), a one-line command is written as itself; others (a
  // heredoc's lines, a trailing backslash, a JSON array) in exec form.
  void Run(const std::string& command, const std::string& step) {
    bool one_line = command.find_first_of("\r\n") == std::string::npos &&
                    !command.ends_with("\\") && !command.starts_with("[") &&
                    !command.starts_with(" ") && !command.starts_with("\t");
    if (one_line)
      Line("RUN " + command, step);
    else
      Line("RUN " + json::array({"/bin/sh", "-c", kRunShell, "e2b-run", command}).dump(), step);
  }
  // E2B's shell for the RUN lines that follow (bash when the image has it).
  void Shell(const std::string& step) {
    Line("SHELL " + json::array({"/bin/sh", "-c", kRunShell, "e2b-run"}).dump(), step);
  }
  // Becomes `name` (made first, as root, if it is a new account; with
  // `home`, its home is /home/<name>, as E2B's `user`'s is).
  void User(const std::string& name, const std::string& step, bool home = false) {
    std::string account = name.substr(0, name.find(':'));
    if (account != "root" && !IsUid(account) && !made_.count(account)) {
      if (user_ != "root") Line("USER root", step);
      json argv = json::array({"/bin/sh", "-c", kEnsureUser, "e2b-user", account});
      if (home) argv.push_back("home");
      Line("RUN " + argv.dump(), step);
      made_.insert(account);
    }
    Line("USER " + Quoted(name), step);
    user_ = name;
  }
  int Steps() const { return static_cast<int>(names_.size()); }
  const std::string& user() const { return user_; }
  std::string text() const { return text_; }
  std::vector<std::string> names() const { return names_; }

 private:
  std::string text_;
  std::vector<std::string> names_;
  std::string user_;  // "" until a USER line: a base's own user is not known here
  std::set<std::string> made_;
};

Status StepIssue(size_t i, const std::string& message) {
  std::string field = "body.steps[" + std::to_string(i) + "]";
  return Status(Code::kInvalidRequest, field + ": " + message,
                json{{"issues", json::array({{{"path", field}, {"message", message}}})}});
}

// The base image's line: an OCI reference (Docker Hub names in full), or
// a kiln image of the key's. E2B's own base image is kiln's.
Result<std::string> BaseOf(const TemplateBuild& build) {
  if (build.from_template) {
    std::string ref = KilnTemplateRef(*build.from_template);
    Result<images::KilnImageRef> kiln = images::ParseKilnImageRef(ref);
    if (!kiln.ok())
      return Status(Code::kInvalidRequest, "body.fromTemplate: " + kiln.status().message());
    return ref;
  }
  std::string image = build.from_image.value_or("e2bdev/base");
  Result<images::ImageRef> ref = images::ParseImageRef(image);
  if (!ref.ok()) return Status(Code::kInvalidRequest, "body.fromImage: " + ref.status().message());
  if (ref->Repository() == "docker.io/e2bdev/base" && (!ref->tag || *ref->tag == "latest") &&
      !ref->digest)
    return std::string("base");
  return ref->String();
}

}  // namespace
}  // namespace template_dockerfile

Result<KilnTemplateBuild> TemplateDockerfile(
    const TemplateBuild& build,
    const std::function<std::optional<Sha256Digest>(const std::string& hash)>& piece) {
  using namespace template_dockerfile;
  Result<std::string> base = BaseOf(build);
  if (!base.ok()) return base.status();
  KilnTemplateBuild out;
  out.cache = !build.force;
  Writer w;
  w.Line("FROM " + *base, "base");
  // E2B's provisioning: its account, and the steps start as it, at home.
  w.User(kUser, "base", /*home=*/true);
  w.Line("WORKDIR /home/user", "base");
  w.Shell("base");
  for (size_t i = 0; i < build.steps.size(); ++i) {
    const TemplateStep& st = build.steps[i];
    const std::vector<std::string>& a = st.args;
    const std::string step = std::to_string(i + 1);
    if (st.force && !out.rebuild_from_step) out.rebuild_from_step = w.Steps() + 1;
    if (st.type == "RUN") {
      if (a.empty() || a[0].empty()) return StepIssue(i, "RUN needs a command");
      if (a.size() > 2) return StepIssue(i, "RUN takes a command and a user");
      std::string cur = w.user();
      if (a.size() == 2 && !a[1].empty() && a[1] != cur) {
        if (!IsOwner(a[1])) return StepIssue(i, "'" + a[1] + "' is not a user name");
        w.User(a[1], step);
        w.Run(a[0], step);
        w.User(cur, step);
      } else {
        w.Run(a[0], step);
      }
    } else if (st.type == "COPY") {
      if (a.size() < 2 || a.size() > 4 || a[0].empty() || a[1].empty())
        return StepIssue(i, "COPY takes a source, a destination, an owner and a mode");
      if (!st.files_hash) return StepIssue(i, "COPY needs the filesHash of its uploaded files");
      if (Status s = images::ValidateContextName(*st.files_hash);
          !s.ok() || st.files_hash->size() < 32)
        return StepIssue(i, "filesHash must be 32 to 64 lowercase hex digits");
      std::optional<Sha256Digest> archive = piece(*st.files_hash);
      if (!archive)
        return StepIssue(i, "the files of hash " + *st.files_hash +
                                " were not uploaded by this key (GET .../files/{hash} gives "
                                "the upload link)");
      out.contexts.emplace(*st.files_hash, *archive);
      std::string owner = a.size() > 2 && !a[2].empty() ? a[2] : w.user();
      if (!IsOwner(owner)) return StepIssue(i, "'" + owner + "' is not a user[:group]");
      if (owner.find(':') == std::string::npos) owner += ":" + owner;
      std::string line = "COPY --from=" + *st.files_hash + " --chown=" + owner;
      if (a.size() > 3 && !a[3].empty()) {
        const std::string& mode = a[3];
        bool octal = mode.size() <= 4 && std::all_of(mode.begin(), mode.end(),
                                                     [](char c) { return c >= '0' && c <= '7'; });
        if (!octal) return StepIssue(i, "mode '" + mode + "' is not an octal mode (like 0755)");
        line += " --chmod=" + mode;
      }
      std::string src = CopySource(a[0]);
      if (src == ".." || src.starts_with("../") || src.starts_with("/"))
        return StepIssue(i, "the source must be a path within the uploaded files");
      std::string dest = a[1];
      if (HasGlob(a[0]) && !dest.ends_with("/")) dest += "/";  // a glob's files go into it
      w.Line(line + " " + json::array({src, dest}).dump(), step);
    } else if (st.type == "ENV") {
      if (a.empty() || a.size() % 2) return StepIssue(i, "ENV takes names and values, in pairs");
      std::string line = "ENV";
      for (size_t k = 0; k < a.size(); k += 2) {
        if (!ValidEnvName(a[k])) return StepIssue(i, "'" + a[k] + "' is not a variable name");
        if (a[k + 1].find('\n') != std::string::npos)
          return StepIssue(i, "the value of " + a[k] + " holds a newline");
        line += " " + a[k] + "=" + Quoted(a[k + 1]);
      }
      w.Line(line, step);
    } else if (st.type == "WORKDIR") {
      if (a.size() != 1 || a[0].empty()) return StepIssue(i, "WORKDIR takes one path");
      if (a[0].find('\n') != std::string::npos) return StepIssue(i, "the path holds a newline");
      w.Line("WORKDIR " + Quoted(a[0]), step);
    } else if (st.type == "USER") {
      if (a.empty() || a.size() > 2) return StepIssue(i, "USER takes a name");
      if (!IsOwner(a[0])) return StepIssue(i, "'" + a[0] + "' is not a user name");
      w.User(a[0], step);  // a second argument (sudo for it) kiln's sudo shim gives everyone
    }
  }
  if (build.start_cmd || build.ready_cmd) {
    images::StartSpec start;
    start.command = build.start_cmd;
    start.ready_command = build.ready_cmd;
    start.ready_timeout_seconds = kReadyTimeoutSeconds;
    out.start = start;
  }
  out.dockerfile = w.text();
  out.step_names = w.names();
  return out;
}

std::string E2bStepOf(int kiln_step, const std::vector<std::string>& step_names) {
  if (kiln_step >= 1 && static_cast<size_t>(kiln_step) <= step_names.size())
    return step_names[kiln_step - 1];
  return "base";
}

}  // namespace kiln::api::e2b
