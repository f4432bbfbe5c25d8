// Users and groups as an image names them, for USER and COPY --chown.
//
// The names live in the image's /etc/passwd and /etc/group, which are
// untrusted: either may be a symlink aiming at the host's /etc/shadow. They
// are read with OpenInRoot, so any link resolves inside the image root.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kiln::images {

struct ImageUser {
  uint32_t uid = 0, gid = 0;
  std::string name;
  std::string home = "/";
};

// Resolves Docker's USER / --chown forms against the image's /etc/passwd and
// /etc/group under `root`: "name", "name:group", "uid", "uid:gid",
// "name:gid", "uid:group". Without a group the user's primary group from
// passwd is used (0 when passwd has no entry). Numeric ids need no entry
// (home "/", name = the number unless passwd has it). Empty -> root (uid 0,
// named and homed as passwd says, else "root" and "/").
//
// Unknown name -> kInvalidRequest "unknown user NAME in the image" (and
// "unknown group NAME in the image"), details {"user": NAME} or
// {"group": NAME}; a malformed spec ("a:b:c", ":g", an id past 2^32-2) ->
// kInvalidRequest. A missing passwd or group file is not an error by
// itself. Other read errors -> kIoError.
Result<ImageUser> ResolveImageUser(const std::string& root, std::string_view spec);

}  // namespace kiln::images
