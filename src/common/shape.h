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

// Which dimensions of a Shape a request named; the others may come from
// elsewhere (a snapshot's, an image's own).
struct ShapeGiven {
  bool vcpu = false, memory = false, disk = false;
};

// `shape` with the dimensions `given` does not name taken from `other`.
inline Shape ShapeOver(const Shape& shape, const ShapeGiven& given, const Shape& other) {
  return Shape{given.vcpu ? shape.vcpu : other.vcpu,
               given.memory ? shape.memory_mib : other.memory_mib,
               given.disk ? shape.disk_mib : other.disk_mib};
}

}  // namespace kiln
