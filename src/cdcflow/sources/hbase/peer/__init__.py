"""The replication peer: cdcflow poses as an HBase peer cluster and forwards WAL edits to Kafka.

- registry.py: the peer cluster's znodes (hbaseid, rs/<host,port,startcode>)
- sink.py:     one ReplicateWALEntry call → events → Kafka, answered only after every ack
- server.py:   the asyncio RPC server (connections, concurrency, backpressure, shutdown)
"""
