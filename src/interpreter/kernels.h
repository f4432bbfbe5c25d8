// The kernels' sources (kernel.py, kernel.js), compiled into kilnd by
// src/interpreter/CMakeLists.txt and started with `python3 -u -c` and
// `node -e`: nothing is written into a sandbox to run them.
#pragma once

namespace kiln::interpreter {

extern const char kKernelPython[];
extern const char kKernelJavaScript[];

}  // namespace kiln::interpreter
