"""Sans-I/O MySQL/MariaDB binlog decoding: feed event bytes, get typed events. No sockets here."""
