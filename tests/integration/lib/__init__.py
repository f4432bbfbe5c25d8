"""What the integration tests share that is not a fixture: waits with deadlines (waits.py),
loopback ports (net.py) and kilnds of a test's own (kilnd.py). Fixtures live in conftest.py."""
