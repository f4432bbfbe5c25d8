example.com
{"internet": true, "allow": ["example.com", "*.pypi.org", "203.0.113.0/24", "::1"], "deny": ["10.0.0.1", "[::ffff:127.0.0.1]"]}