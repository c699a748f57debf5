"""Sans-I/O protocol code: bytes in, values out, no sockets (fuzzable, testable from golden vectors)."""
