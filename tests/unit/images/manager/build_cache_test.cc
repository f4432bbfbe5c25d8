// The build cache's keys (images/manager/build_cache.h), pinned: a key names
// a cached layer (and is the id of COPY and WORKDIR layers) across kiln
// versions, so the same inputs must keep giving the same hex. The expected
// values are what the builder's keys were before they moved to build_cache.cc.
#include "images/manager/build_cache.h"

#include <gtest/gtest.h>

namespace kiln::images {
namespace images_build_cache_test {
namespace {

const std::string kParent(64, 'a');

TEST(BuildCacheKeyTest, RunKeyIsPinned) {
  RunInstr run;
  run.command.argv = {"/bin/sh", "-c", "make"};
  run.build_args = {{"V", "1"}};
  OciConfig config;
  config.env = {"PATH=/usr/bin", "A=b"};
  config.user = "app";
  config.working_dir = "/src";
  EXPECT_EQ(RunStepKey(kParent, run, config, network::Policy{}),
            "ac9d453dc7827573e05321be50d791e2454c6b24a5f0fc796b9f6851f217fb98");
  // What a RUN sees is part of it.
  config.user = "root";
  EXPECT_NE(RunStepKey(kParent, run, config, network::Policy{}),
            "ac9d453dc7827573e05321be50d791e2454c6b24a5f0fc796b9f6851f217fb98");
}

TEST(BuildCacheKeyTest, CopyAndAddKeysArePinned) {
  CopyInstr copy;
  const std::string sources(64, 'b');
  EXPECT_EQ(CopyStepKey(kParent, copy, "/app/", sources),
            "c46b56f81af865a13eb959bb9398afac66ae67e093b2045d6b8fe69f60c3a9e4");
  CopyInstr add;
  add.add = true;
  add.chown = "app:app";
  add.chmod = 0755;
  EXPECT_EQ(CopyStepKey(kParent, add, "/app/", sources),
            "23f7cf794fbfa9d638f3dfd48094b8df10d915a35ef0404a12c6289001b5f303");
}

TEST(BuildCacheKeyTest, WorkdirLayerIdIsPinned) {
  EXPECT_EQ(WorkdirLayerId(kParent, "/src/app").str(),
            "24a85fc5111c384be21cc74e3287cf5f459f231fa9b871aa53e85a8fb5075122");
}

}  // namespace
}  // namespace images_build_cache_test
}  // namespace kiln::images
