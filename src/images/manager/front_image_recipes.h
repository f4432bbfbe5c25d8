// The front images kiln ships (front_images.h), and how an operator adds
// or replaces one:
// - code-interpreter-v1, E2B's interpreter template: kiln's base with
//   numpy, pandas, matplotlib and Jupyter's kernels for Python, R, Java and
//   Bash (R and a JDK from the host's Debian mirror; the rest from PyPI)
//   and TypeScript's compiler from npm. Its RUN steps reach those hosts
//   through kiln's egress proxy, with the host's CA bundle for pip and npm,
//   so a host that reaches them through a TLS-inspecting proxy builds it as
//   the host itself would.
// - SandboxFusion's language image (--sandboxfusion-image): Debian's
//   compilers and runtimes, the core set of examples/images/sandboxfusion.py
//   (the same recipe, so one build serves both), from the Debian mirror the
//   host's apt uses.
// - --front-image NAME=FILE: a JSON {recipe, network?, buildTimeoutSeconds?}
//   read at start, replacing a shipped one of that name or adding one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "images/manager/front_images.h"

namespace kiln::images {

// What the shipped recipes take from the host they are built on.
struct FrontImageHost {
  std::string ca_bundle;                    // PEM text; "" for none
  std::vector<std::string> debian_mirrors;  // the hosts of apt's sources
};
// /etc/ssl/certs/ca-certificates.crt and /etc/apt's sources (deb822 and
// one-line), as the base image's recipe (images/base/build.sh) reads them.
FrontImageHost ReadFrontImageHost(const std::string& etc = "/etc");

std::vector<FrontImages::Definition> ShippedFrontImages(const std::string& sandboxfusion_image,
                                                        const FrontImageHost& host);

// NAME=FILE: the file's definition, checked (its recipe is turned into a
// Dockerfile once here, so a bad one stops kilnd at start naming the
// flag). kInvalidRequest naming --front-image.
Result<FrontImages::Definition> ReadFrontImageFlag(const std::string& text);

// `shipped` with each of `overrides` replacing the one of its name, or
// added.
std::vector<FrontImages::Definition> WithOverrides(std::vector<FrontImages::Definition> shipped,
                                                   std::vector<FrontImages::Definition> overrides);

}  // namespace kiln::images
