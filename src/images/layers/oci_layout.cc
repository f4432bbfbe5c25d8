#include "images/layers/oci_layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "common/digest.h"
#include "common/json_bounded.h"

namespace kiln::images {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxMetadataBlob = 16 << 20;  // manifests and configs are kilobytes

const std::set<std::string> kIndexTypes = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json"};
const std::set<std::string> kManifestTypes = {
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json"};
const std::set<std::string> kSchema1Types = {
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws"};
const std::set<std::string> kConfigTypes = {"application/vnd.oci.image.config.v1+json",
                                            "application/vnd.docker.container.image.v1+json"};
const std::set<std::string> kLayerTypes = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"};

Status Invalid(const std::string& message, json details = nullptr) {
  return Status(Code::kInvalidImage, message, std::move(details));
}

Status Schema1() {
  return Invalid(
      "the image has a Docker schema 1 manifest, which kiln does not support (deprecated since "
      "2017); push it again with a current Docker or convert it with skopeo");
}

// "sha256:<64 lowercase hex>" -> the digest; nullopt for anything else, so
// that a digest never becomes a path like blobs/sha256/../../x.
std::optional<Sha256Digest> DigestOf(const json& digest) {
  if (!digest.is_string()) return std::nullopt;
  return Sha256Digest::Parse(digest.get_ref<const std::string&>());
}

std::string StringOr(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status(errno == ENOENT ? Code::kNotFound : Code::kIoError, what + " is missing",
                  {{"path", path}});
  if (static_cast<uint64_t>(st.st_size) > kMaxMetadataBlob)
    return Invalid(what + " is too large (" + std::to_string(st.st_size) + " bytes)",
                   {{"path", path}});
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    return Status(Code::kIoError, "cannot read " + what, {{"path", path}});
  return data;
}

Result<json> ParseJson(const std::string& text, const std::string& what) {
  std::string why;
  std::optional<json> doc = ParseJsonBounded(text, &why);
  if (!doc) return Invalid(what + " " + why);
  if (!doc->is_object()) return Invalid(what + " is not a JSON object");
  return std::move(*doc);
}

// A manifest or config blob named by `descriptor`, hashed and parsed.
Result<json> ReadBlobJson(const std::string& layout, const json& descriptor,
                          const std::string& what) {
  if (!descriptor.is_object()) return Invalid(what + " descriptor is not an object");
  std::optional<Sha256Digest> d = DigestOf(descriptor.value("digest", json()));
  if (!d) return Invalid(what + " has no valid sha256 digest", {{"field", "digest"}});
  std::string digest = d->str();
  const std::string* hex = &d->hex();
  auto data = ReadFile(layout + "/blobs/sha256/" + *hex, what + " blob " + digest);
  if (!data.ok()) {
    if (data.status().code() == Code::kNotFound)
      return Invalid(data.status().message(), {{"blob", digest}});
    return data.status();
  }
  std::string actual = Sha256Hex(*data);
  if (actual != *hex)
    return Invalid(what + " blob " + digest + " has sha256:" + actual, {{"blob", digest}});
  auto size = descriptor.find("size");
  if (size != descriptor.end() &&
      (!size->is_number_unsigned() || size->get<uint64_t>() != data->size()))
    return Invalid(what + " blob " + digest + " is " + std::to_string(data->size()) +
                       " bytes, not the size its descriptor gives",
                   {{"blob", digest}});
  return ParseJson(*data, what + " blob " + digest);
}

// An image manifest's own fields: schemaVersion 2 and a config descriptor
// of a config media type with a sha256 digest.
Status CheckManifest(const json& manifest, const std::string& manifest_digest) {
  if (!manifest.is_object() || manifest.value("schemaVersion", json()) != 2)
    return Invalid("manifest " + manifest_digest + " has no schemaVersion 2",
                   {{"blob", manifest_digest}});
  const json config_desc = manifest.value("config", json());
  if (!config_desc.is_object())
    return Invalid("manifest " + manifest_digest + " has no config", {{"blob", manifest_digest}});
  std::string config_type = StringOr(config_desc, "mediaType");
  if (!kConfigTypes.count(config_type))
    return Invalid("manifest " + manifest_digest + " has a config of the unsupported type \"" +
                       config_type + "\"",
                   {{"blob", manifest_digest}});
  if (!DigestOf(config_desc.value("digest", json())))
    return Invalid("manifest " + manifest_digest + ": config.digest is not a sha256 digest",
                   {{"field", "config.digest"}});
  return Status::Ok();
}

// The descriptor of the linux/amd64 image in an image index / manifest list.
Result<json> PickPlatform(const json& index, const std::string& digest) {
  auto manifests = index.find("manifests");
  if (manifests == index.end() || !manifests->is_array())
    return Invalid("image index " + digest + " has no manifests", {{"blob", digest}});
  for (const json& m : *manifests) {
    if (!m.is_object()) continue;
    const json platform = m.value("platform", json::object());
    if (platform.is_object() && StringOr(platform, "os") == "linux" &&
        StringOr(platform, "architecture") == "amd64")
      return m;
  }
  return Status(Code::kImageNotFound,
                "image index " + digest + " has no linux/amd64 image, which kiln runs",
                {{"blob", digest}});
}

}  // namespace

Result<OciImage> ReadOciLayout(const std::string& layout_dir) {
  auto index_text = ReadFile(layout_dir + "/index.json", "index.json of " + layout_dir);
  if (!index_text.ok()) return index_text.status();
  auto index = ParseJson(*index_text, "index.json");
  if (!index.ok()) return index.status();
  auto entries = index->find("manifests");
  if (entries == index->end() || !entries->is_array() || entries->empty())
    return Invalid("index.json lists no manifests", {{"field", "manifests"}});
  json chosen;
  if (entries->size() == 1) {
    chosen = (*entries)[0];
  } else {
    for (const json& e : *entries) {
      if (e.is_object() && e.contains("annotations") && e["annotations"].is_object() &&
          StringOr(e["annotations"], "org.opencontainers.image.ref.name") == "latest")
        chosen = e;
    }
    if (chosen.is_null())
      return Invalid("index.json lists " + std::to_string(entries->size()) +
                         " manifests and none is tagged latest",
                     {{"field", "manifests"}});
  }
  if (!chosen.is_object()) return Invalid("index.json manifests[0] is not an object");

  // An index entry may be an image index (a multi-platform image): one hop.
  std::string type = StringOr(chosen, "mediaType");
  if (kSchema1Types.count(type)) return Schema1();
  auto manifest = ReadBlobJson(layout_dir, chosen, "manifest");
  if (!manifest.ok()) return manifest.status();
  if (type.empty()) type = StringOr(*manifest, "mediaType");
  if (kIndexTypes.count(type) || (type.empty() && manifest->contains("manifests"))) {
    std::string index_digest = chosen["digest"].get<std::string>();
    auto picked = PickPlatform(*manifest, index_digest);
    if (!picked.ok()) return picked.status();
    chosen = *picked;
    type = StringOr(chosen, "mediaType");
    if (kSchema1Types.count(type)) return Schema1();
    manifest = ReadBlobJson(layout_dir, chosen, "manifest");
    if (!manifest.ok()) return manifest.status();
    if (type.empty()) type = StringOr(*manifest, "mediaType");
  }
  std::string manifest_digest = chosen["digest"].get<std::string>();
  if (manifest->value("schemaVersion", json()) == 1 || kSchema1Types.count(type)) return Schema1();
  if (!type.empty() && !kManifestTypes.count(type))
    return Invalid("manifest " + manifest_digest + " has the unsupported media type " + type,
                   {{"blob", manifest_digest}});
  if (Status bad = CheckManifest(*manifest, manifest_digest); !bad.ok()) return bad;
  auto config = ReadBlobJson(layout_dir, (*manifest)["config"], "config");
  if (!config.ok()) return config.status();
  Result<OciImage> image = ParseImageManifest(*manifest, manifest_digest, *config);
  if (!image.ok()) return image.status();
  for (OciLayer& layer : image->layers) {
    layer.blob_path = layout_dir + "/blobs/sha256/" + layer.digest.hex();
    struct stat st;
    if (::stat(layer.blob_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return Invalid("layer blob " + layer.digest.str() + " is missing from " + layout_dir,
                     {{"blob", layer.digest.str()}});
  }
  return image;
}

Result<OciImage> ParseImageManifest(const json& manifest, const std::string& manifest_digest,
                                    const json& config) {
  if (Status bad = CheckManifest(manifest, manifest_digest); !bad.ok()) return bad;
  Sha256Digest config_digest = *DigestOf(manifest["config"]["digest"]);
  if (!config.is_object()) return Invalid("config is not a JSON object", {{"field", "config"}});

  OciImage image;
  image.manifest_digest = manifest_digest;
  image.config_digest = config_digest.str();
  auto parsed = ParseOciConfig(config);
  if (!parsed.ok()) return parsed.status();
  image.config = std::move(*parsed);
  if (auto os = StringOr(config, "os"); !os.empty() && os != "linux")
    return Invalid("the image is for " + os + ", not linux", {{"field", "os"}});

  const json rootfs = config.value("rootfs", json());
  if (!rootfs.is_object() || StringOr(rootfs, "type") != "layers" ||
      !rootfs.value("diff_ids", json()).is_array())
    return Invalid("config " + image.config_digest + " has no rootfs of type layers",
                   {{"field", "rootfs"}});
  const json& diff_ids = rootfs["diff_ids"];
  const json layers = manifest.value("layers", json());
  if (!layers.is_array())
    return Invalid("manifest " + manifest_digest + " has no layers list",
                   {{"blob", manifest_digest}});
  if (layers.size() != diff_ids.size())
    return Invalid("manifest " + manifest_digest + " lists " + std::to_string(layers.size()) +
                       " layers but its config " + std::to_string(diff_ids.size()) + " diff_ids",
                   {{"blob", manifest_digest}});
  for (size_t i = 0; i < layers.size(); ++i) {
    const json& l = layers[i];
    std::string field = "layers[" + std::to_string(i) + "]";
    if (!l.is_object())
      return Invalid("manifest " + field + " is not an object", {{"field", field}});
    std::string media_type = StringOr(l, "mediaType");
    if (!kLayerTypes.count(media_type))
      return Invalid("manifest " + field + " has the unsupported media type \"" + media_type + "\"",
                     {{"field", field}});
    std::optional<Sha256Digest> digest = DigestOf(l.value("digest", json()));
    if (!digest)
      return Invalid("manifest " + field + " has no valid sha256 digest", {{"field", field}});
    std::string diff_field = "rootfs.diff_ids[" + std::to_string(i) + "]";
    std::optional<Sha256Digest> diff = DigestOf(diff_ids[i]);
    if (!diff)
      return Invalid("config " + diff_field + " is not a sha256 digest", {{"field", diff_field}});
    uint64_t size = l.value("size", json()).is_number_unsigned() ? l["size"].get<uint64_t>() : 0;
    image.layers.push_back(OciLayer{*digest, std::move(media_type), size, "", *diff});
  }
  return image;
}

}  // namespace kiln::images
