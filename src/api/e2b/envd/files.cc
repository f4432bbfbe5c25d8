// envd's HTTP file routes, over kiln's streaming file transfers:
//   GET  /files?path=&username=  the file's bytes
//   POST /files?path=&username=  multipart/form-data (each part with a
//        filename is a file: at `path` when given, else at its filename),
//        or application/octet-stream (the body is the file at `path`);
//        answers [{"name","type","path"}] for what was written.
// Both directions stream, a piece at a time: the agent's flow control
// slows a fast sender down rather than kilnd piling the file up. Errors are
// E2B's JSON ({"code": 404, "message": ...}).
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "api/e2b/envd/multipart.h"
#include "api/e2b/envd/rpc.h"
#include "api/errors.h"
#include "api/utf8.h"

namespace kiln::api::e2b {
namespace {

using nlohmann::json;

// How long the sandbox may take for the next piece of a download.
constexpr int kDownloadPieceMs = 60000;
constexpr int kUploadMode = 0644;

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

json WrittenJson(const std::string& path) {
  return json{
      {"name", SanitizeUtf8(BaseName(path))}, {"type", "file"}, {"path", SanitizeUtf8(path)}};
}

// Makes the file's directories, as envd does, and opens it for writing.
io::FileUpload OpenUpload(const io::SandboxIo& io, const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) ValueOrThrow(io.Mkdir(path.substr(0, slash), true));
  // In place, as envd writes: a watcher sees this file written.
  return io.WriteFile(path, kUploadMode, io::WritePlacement::kInPlace);
}

void Download(ApiContext& ctx, Exchange& ex, const SandboxTarget& t, const EnvdUser& user) {
  std::string path = ResolvePath(user, ex.Query("path").value_or(""), "query.path");
  io::SandboxIo io = RunningIo(ctx, ex, *t.sandbox);
  auto stream_slot = OpenStream(ctx, *t.sandbox);
  io::Download file = ValueOrThrow(io.ReadFile(path));
  std::string name = BaseName(path);
  std::string quoted;
  for (char c : name) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) continue;
    quoted += c;
  }
  if (!ex.BeginStream(200, "application/octet-stream",
                      {{"Content-Disposition", "attachment; filename=\"" + quoted + "\""}}))
    return file.Cancel();
  std::string chunk;
  while (file.Next(&chunk, kDownloadPieceMs)) {
    if (!ex.WriteChunk(chunk)) return file.Cancel();
  }
  // A short file must not look whole: the client sees a broken transfer.
  if (!file.status().ok()) return ex.AbortStream();
  ex.EndStream();
}

// Each part with a filename becomes a file, written as it arrives.
class UploadParts final : public MultipartReader::Handler {
 public:
  UploadParts(const io::SandboxIo& io, const EnvdUser& user, std::optional<std::string> path)
      : io_(io), user_(user), path_(std::move(path)) {}
  ~UploadParts() override {
    if (upload_) upload_->Cancel();
  }

  Status OnPartBegin(const MultipartReader::Part& part) override {
    if (!part.has_filename) return Status::Ok();  // a plain field: not a file
    try {
      current_ = path_ ? *path_ : ResolvePath(user_, part.filename, "multipart.filename");
      upload_.emplace(OpenUpload(io_, current_));
    } catch (const ApiError& e) {
      return e.status();
    }
    return Status::Ok();
  }
  Status OnPartData(std::string_view bytes) override {
    if (!upload_) return Status::Ok();
    return upload_->Write(bytes);
  }
  Status OnPartEnd() override {
    if (!upload_) return Status::Ok();
    auto done = upload_->Finish();
    upload_.reset();
    if (!done.ok()) return done.status();
    written_.push_back(WrittenJson(current_));
    return Status::Ok();
  }
  const json& written() const { return written_; }

 private:
  const io::SandboxIo& io_;
  const EnvdUser& user_;
  std::optional<std::string> path_;
  std::string current_;
  std::optional<io::FileUpload> upload_;
  json written_ = json::array();
};

void Upload(ApiContext& ctx, Exchange& ex, const SandboxTarget& t, const EnvdUser& user) {
  std::optional<std::string> path;
  if (auto p = ex.Query("path"); p && !p->empty()) path = ResolvePath(user, *p, "query.path");
  if (std::string enc = ex.Header("Content-Encoding"); !enc.empty() && enc != "identity")
    throw ApiError(Code::kNotSupported, "Content-Encoding '" + enc.substr(0, 32) +
                                            "' is not supported: send the file as it is");
  std::string content_type = ex.Header("Content-Type");
  io::SandboxIo io = RunningIo(ctx, ex, *t.sandbox);
  std::string chunk;
  if (content_type.starts_with("application/octet-stream")) {
    if (!path) throw InvalidField("query.path", "is required for an application/octet-stream body");
    io::FileUpload upload = OpenUpload(io, *path);
    while (ex.ReadBodyChunk(&chunk)) {
      Status s = upload.Write(chunk);
      if (!s.ok()) {
        upload.Cancel();
        throw ApiError(s);
      }
    }
    if (ex.body_error()) {
      upload.Cancel();
      throw ApiError(Code::kUploadIncomplete, "the upload broke off before its end");
    }
    ValueOrThrow(upload.Finish());
    return ex.SendJson(200, json::array({WrittenJson(*path)}));
  }
  std::string boundary = ValueOrThrow(MultipartReader::BoundaryOf(content_type));
  UploadParts parts(io, user, path);
  MultipartReader reader(boundary, &parts);
  while (ex.ReadBodyChunk(&chunk)) ThrowIfError(reader.Feed(chunk));
  if (ex.body_error())
    throw ApiError(Code::kUploadIncomplete, "the upload broke off before its end");
  ThrowIfError(reader.Finish());
  if (parts.written().empty())
    throw ApiError(Code::kInvalidRequest,
                   "the multipart body holds no file (no part has a filename)");
  ex.SendJson(200, parts.written());
}

}  // namespace

void ServeFiles(ApiContext& ctx, Exchange& ex, const SandboxTarget& t) {
  EnvdUser user = ex.Query("username") ? UserFromName(*ex.Query("username"), *t.sandbox)
                                       : UserOf(ex, *t.sandbox);
  if (ex.method() == "GET") return Download(ctx, ex, t, user);
  if (ex.method() == "POST") return Upload(ctx, ex, t, user);
  throw ApiError(Code::kMethodNotAllowed, "envd's /files takes GET or POST, not " + ex.method());
}

}  // namespace kiln::api::e2b
