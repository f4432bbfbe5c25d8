"""What the integration tests share that is not a fixture: waits with deadlines (waits.py)
and loopback ports (net.py). Fixtures live in conftest.py."""
