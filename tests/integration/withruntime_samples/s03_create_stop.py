"""python.md sample 3: create with name, labels, shape, lease and network; read
funding and expiresAt; stop."""
from withruntime import Runtime

runtime = Runtime()
sbx = runtime.sandboxes.create(
    name="build-42",
    labels={"team": "search", "job": "nightly"},
    vcpu=2,
    memory_mib=4096,
    disk_mib=8192,
    timeout_seconds=900,
    on_lease_end="stop",
    network={"internet": True, "allow": ["pypi.org", "files.pythonhosted.org"]},
)
print(sbx.id, sbx.info["funding"], sbx.info["expiresAt"])
assert sbx.info["name"] == "build-42"
assert sbx.info["labels"] == {"team": "search", "job": "nightly"}
assert (sbx.info["vcpu"], sbx.info["memoryMiB"], sbx.info["diskMiB"]) == (2, 4096, 8192)
assert sbx.info["timeoutSeconds"] == 900 and sbx.info["onLeaseEnd"] == "stop"
assert sbx.info["funding"] in ("trial", "paid")
assert sbx.info["expiresAt"].endswith("Z")
sbx.stop()
assert sbx.state == "stopped", sbx.info
sbx.delete()
