"""The one exception tree of cdcflow.

    CdcflowError
    ├── RetryableError          transient: the same call may succeed later (back off and retry)
    │   ├── ServiceUnavailable      a server is down, starting, or not answering in time
    │   └── HBaseRetryableError     HBase answered with an exception it expects the client to retry
    └── TerminalError           retrying the same thing will fail the same way: fix input or config
        ├── ConfigError             bad configuration, caught at the edge
        ├── StackError              a local service could not be installed or started
        ├── WireProtocolError       bytes that break the HBase RPC protocol
        └── HBaseTerminalError      HBase answered with a do-not-retry exception

Code at each boundary (a socket, a client library, a subprocess) translates foreign exceptions
into one of these, so callers decide on retry versus fail from the class alone.
"""

from __future__ import annotations


class CdcflowError(Exception):
    """Root of every error cdcflow raises on purpose."""

    retryable: bool = False


class RetryableError(CdcflowError):
    """Transient failure: retrying later may succeed."""

    retryable = True


class TerminalError(CdcflowError):
    """Permanent failure: retrying without a change will fail again."""

    retryable = False


class ServiceUnavailable(RetryableError):
    """A service did not answer (connection refused, timeout, still starting)."""


class ConfigError(TerminalError):
    """Configuration is missing or invalid."""


class StackError(TerminalError):
    """A local stack service could not be installed, started or stopped."""


class WireProtocolError(TerminalError):
    """Received bytes violate the HBase RPC protocol (garbage, truncation, oversize frames)."""


class HBaseRemoteError(CdcflowError):
    """HBase answered a call with an exception. `exception_class` is the Java class name."""

    def __init__(self, exception_class: str, message: str) -> None:
        super().__init__(f"{exception_class}: {message.strip().splitlines()[0] if message.strip() else ''}")
        self.exception_class = exception_class
        self.remote_message = message


class HBaseRetryableError(HBaseRemoteError, RetryableError):
    """HBase exception the client is expected to retry (region moved, server starting, ...)."""


class HBaseTerminalError(HBaseRemoteError, TerminalError):
    """HBase exception marked do-not-retry (table not found, bad request, ...)."""
