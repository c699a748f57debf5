"""Sans-I/O HBase RPC: pure functions of bytes, no sockets. See framing.py."""
