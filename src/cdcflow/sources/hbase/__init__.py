"""HBase side of cdcflow: the wire protocol (sans-I/O), a native client, and (later) the peer."""
