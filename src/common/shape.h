// What a sandbox is given: its vCPUs, memory and disk. Used by every layer
// (capacity, snapshots, the engine), so it lives below them all.
#pragma once

namespace kiln {

struct Shape {
  int vcpu = 2;
  int memory_mib = 2048;
  int disk_mib = 4096;  // size of its writable root (the overlay's upper layer)
  bool operator==(const Shape&) const = default;
};

}  // namespace kiln
