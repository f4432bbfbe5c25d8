// The toolbox's files under /daytona/toolbox/{id}/files (see daytona.h).
// The SDK moves every file, one or many, through the bulk routes: uploads
// are multipart/form-data (files[i].path and files[i].file, in either
// order), each file written as it streams; downloads answer
// multipart/form-data, a "file" part per path or an "error" part naming
// why. A relative path is under the sandbox's working folder.
#include <cstdio>

#include "api/daytona/daytona.h"
#include "api/errors.h"
#include "api/multipart.h"
#include "common/ids.h"

namespace kiln::api::daytona {

using nlohmann::json;

namespace {

constexpr int kUploadMode = 0644;
// A file's bytes at most, as kiln's own files/content takes: a body is
// written into the sandbox as it streams, so this bounds one file's write.
constexpr uint64_t kMaxFile = 256ull << 20;
constexpr int kDownloadPieceMs = 60000;

std::string InSandbox(const control::Sandbox& s, const std::string& path) {
  if (path.starts_with("/")) return path;
  return s.spec().run_as.workdir + "/" + path;
}

std::string PathQuery(Exchange& ex, const control::Sandbox& s, const char* name = "path") {
  auto p = ex.Query(name);
  if (!p || p->empty()) throw InvalidField(std::string("query.") + name, "is required");
  if (p->size() > contract::kPathMax) throw InvalidField(std::string("query.") + name, "too long");
  return InSandbox(s, *p);
}

// files[i].path fields name where files[i].file goes; the SDK's sync
// client sends every path first, its async one each path before its file,
// and both name the destination as the file part's filename too.
class BulkUpload final : public MultipartReader::Handler {
 public:
  BulkUpload(const io::SandboxIo& io, const control::Sandbox& s) : io_(io), sandbox_(s) {}
  ~BulkUpload() override {
    if (upload_) upload_->Cancel();
  }

  Status OnPartBegin(const MultipartReader::Part& part) override {
    field_.clear();
    std::optional<int> index = IndexOf(part.name, ".path");
    if (index) {
      path_index_ = *index;
      reading_path_ = true;
      return Status::Ok();
    }
    index = IndexOf(part.name, ".file");
    if (!index) return Status::Ok();  // another field: not Daytona's
    auto named = paths_.find(*index);
    std::string path = named != paths_.end() ? named->second : part.filename;
    if (path.empty())
      return Status(Code::kInvalidRequest, part.name + " has no path (files[i].path)");
    try {
      current_ = InSandbox(sandbox_, path);
      size_t slash = current_.rfind('/');
      if (slash != std::string::npos && slash > 0)
        ValueOrThrow(io_.Mkdir(current_.substr(0, slash), true));
      upload_.emplace(io_.WriteFile(current_, kUploadMode));
      file_bytes_ = 0;
    } catch (const ApiError& e) {
      return e.status();
    }
    return Status::Ok();
  }
  Status OnPartData(std::string_view bytes) override {
    if (reading_path_) {
      if (field_.size() + bytes.size() > contract::kPathMax)
        return Status(Code::kInvalidRequest, "files[i].path is longer than a path");
      field_.append(bytes);
      return Status::Ok();
    }
    if (!upload_) return Status::Ok();
    file_bytes_ += bytes.size();
    if (file_bytes_ > kMaxFile)
      return Status(Code::kPayloadTooLarge, current_ + ": files are at most 256 MiB");
    return upload_->Write(bytes);
  }
  Status OnPartEnd() override {
    if (reading_path_) {
      reading_path_ = false;
      paths_[path_index_] = field_;
      return Status::Ok();
    }
    if (!upload_) return Status::Ok();
    auto done = upload_->Finish();
    upload_.reset();
    if (!done.ok()) return done.status();
    ++written_;
    return Status::Ok();
  }
  int written() const { return written_; }

 private:
  // i of "files[i]<suffix>"; nullopt for another name.
  static std::optional<int> IndexOf(const std::string& name, const std::string& suffix) {
    if (!name.starts_with("files[") || !name.ends_with("]" + suffix)) return std::nullopt;
    std::string digits = name.substr(6, name.size() - 6 - suffix.size() - 1);
    if (digits.empty() || digits.size() > 6) return std::nullopt;
    int i = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      i = i * 10 + (c - '0');
    }
    return i;
  }

  const io::SandboxIo& io_;
  const control::Sandbox& sandbox_;
  std::map<int, std::string> paths_;
  std::string field_, current_;
  int path_index_ = 0;
  uint64_t file_bytes_ = 0;
  bool reading_path_ = false;
  std::optional<io::FileUpload> upload_;
  int written_ = 0;
};

void BulkUploadRoute(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  std::string boundary = ValueOrThrow(MultipartReader::BoundaryOf(ex.Header("Content-Type")));
  io::SandboxIo io = RunningIo(ctx, ex, *s);
  BulkUpload parts(io, *s);
  MultipartReader reader(boundary, &parts);
  std::string chunk;
  while (ex.ReadBodyChunk(&chunk)) ThrowIfError(reader.Feed(chunk));
  if (ex.body_error())
    throw ApiError(Code::kUploadIncomplete, "the upload broke off before its end");
  ThrowIfError(reader.Finish());
  if (parts.written() == 0)
    throw ApiError(Code::kInvalidRequest, "the multipart body holds no files[i].file part");
  ex.SendBytes(200, "", "text/plain");
}

// A part's Content-Disposition naming `path` exactly (the SDK keys its
// answers by it): plain when it can be quoted, else RFC 5987's filename*.
std::string Disposition(const char* name, const std::string& path) {
  bool plain = true;
  for (unsigned char c : path) plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  std::string out = std::string("Content-Disposition: form-data; name=\"") + name + "\"; ";
  if (plain) return out + "filename=\"" + path + "\"";
  out += "filename*=UTF-8''";
  char hex[4];
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

void BulkDownloadRoute(ApiContext& ctx, Exchange& ex) {
  auto s = FindSandbox(ctx, ex);
  std::vector<std::string> paths = ReadDownloadPaths(ex.JsonBody());
  io::SandboxIo io = RunningIo(ctx, ex, *s);
  auto stream_slot = OpenStream(ctx, *s);
  const std::string boundary = "kiln-" + NewUuid();
  if (!ex.BeginStream(200, "multipart/form-data; boundary=" + boundary)) return;
  for (const std::string& asked : paths) {
    std::string path = InSandbox(*s, asked);
    auto file = io.ReadFile(path);
    if (!file.ok()) {  // the SDK raises this file's error by its statusCode and code
      std::string part = "--" + boundary + "\r\n" + Disposition("error", asked) +
                         "\r\nContent-Type: application/json\r\n\r\n" +
                         ErrorBody(file.status(), path).dump() + "\r\n";
      if (!ex.WriteChunk(part)) return;
      continue;
    }
    if (!ex.WriteChunk("--" + boundary + "\r\n" + Disposition("file", asked) +
                       "\r\nContent-Type: application/octet-stream\r\n\r\n"))
      return file->Cancel();
    std::string chunk;
    while (file->Next(&chunk, kDownloadPieceMs))
      if (!ex.WriteChunk(chunk)) return file->Cancel();
    // A short file must not look whole: the client sees a broken transfer.
    if (!file->status().ok()) return ex.AbortStream();
    if (!ex.WriteChunk("\r\n")) return;
  }
  if (ex.WriteChunk("--" + boundary + "--\r\n")) ex.EndStream();
}

}  // namespace

void AddFileRoutes(Router& r, ApiContext& ctx) {
  r.Add("POST", "/daytona/toolbox/{id}/files/bulk-upload",
        [&ctx](Exchange& ex) { BulkUploadRoute(ctx, ex); });
  r.Add("POST", "/daytona/toolbox/{id}/files/bulk-download",
        [&ctx](Exchange& ex) { BulkDownloadRoute(ctx, ex); });
  r.Add("GET", "/daytona/toolbox/{id}/files/info", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = PathQuery(ex, *s);
    io::FileStat st = ValueOrThrow(RunningIo(ctx, ex, *s).Stat(path));
    if (!st.exists) throw ApiError(Code::kFileNotFound, path + ": no such file or directory");
    ex.SendJson(200, FileInfoJson(st.entry));
  });
  r.Add("GET", "/daytona/toolbox/{id}/files", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = PathQuery(ex, *s);
    int depth = static_cast<int>(QueryInt(ex, "depth", 1, contract::kListDepth.max, 1));
    std::string self =
        path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
    json entries = json::array();
    for (const auto& e : ValueOrThrow(RunningIo(ctx, ex, *s).List(path, depth)))
      if (e.path != self) entries.push_back(FileInfoJson(e));
    ex.SendJson(200, entries);
  });
  r.Add("DELETE", "/daytona/toolbox/{id}/files", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = PathQuery(ex, *s);
    bool recursive = ex.Query("recursive").value_or("false") == "true";
    if (!ValueOrThrow(RunningIo(ctx, ex, *s).Remove(path, recursive)))
      throw ApiError(Code::kFileNotFound, path + ": no such file or directory");
    ex.SendBytes(204, "", "text/plain");
  });
  r.Add("POST", "/daytona/toolbox/{id}/files/folder", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string path = PathQuery(ex, *s);
    ValueOrThrow(RunningIo(ctx, ex, *s).Mkdir(path, true));
    ex.SendBytes(201, "", "text/plain");
  });
  r.Add("POST", "/daytona/toolbox/{id}/files/move", [&ctx](Exchange& ex) {
    auto s = FindSandbox(ctx, ex);
    std::string from = PathQuery(ex, *s, "source"), to = PathQuery(ex, *s, "destination");
    ValueOrThrow(RunningIo(ctx, ex, *s).Rename(from, to, true));
    ex.SendBytes(200, "", "text/plain");
  });
}

}  // namespace kiln::api::daytona
