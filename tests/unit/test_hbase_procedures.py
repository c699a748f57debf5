"""How the native client waits for a master procedure (clients/hbase/native.py `wait_procedure`), against a
master double that keeps procedures as HBase's does: a finished one's result is handed out once, then forgotten."""

from __future__ import annotations

import logging

import pytest
from google.protobuf.message import Message

from cdcflow.clients.hbase.native import NativeHBaseClient
from cdcflow.errors import HBaseRetryableError, HBaseTerminalError
from cdcflow.protocols.hbase.pb import hbase_types_pb2, master_pb2

pytestmark = pytest.mark.unit

Result = master_pb2.GetProcedureResultResponse


class MasterDouble:
    """Procedures by id: polls left while running, then the failure message (None: success)."""

    def __init__(self, procedures: dict[int, tuple[int, str | None]], lose_answers: int = 0) -> None:
        self.procedures = procedures
        self.lose_answers = lose_answers  # answers computed (and the result handed out) but lost on the way
        self.polls = 0

    def get_procedure_result(self, proc_id: int) -> Result:
        self.polls += 1
        if proc_id not in self.procedures:
            answer = Result(state=Result.NOT_FOUND)
        else:
            running, failure = self.procedures[proc_id]
            if running:
                self.procedures[proc_id] = (running - 1, failure)
                answer = Result(state=Result.RUNNING)
            else:
                del self.procedures[proc_id]  # as HBase's master: removeResult once it answered FINISHED
                answer = Result(state=Result.FINISHED)
                if failure is not None:
                    answer.exception.generic_exception.class_name = "ReplicationException"
                    answer.exception.generic_exception.message = failure
        if self.lose_answers:
            self.lose_answers -= 1
            raise HBaseRetryableError("CallTimeoutException", "the answer did not come in time")
        return answer


class ClientOfDouble(NativeHBaseClient):
    """The real client's waiting and retrying, its master the double (no ZooKeeper, no sockets)."""

    def __init__(self, master: MasterDouble) -> None:  # (the parent's would connect to ZooKeeper)
        self.master = master
        self._op_timeout_s = 5.0
        self._regions = {}

    def _server_from_znode(self, name: str, cls: type[Message]) -> Message:  # type: ignore[override]
        return hbase_types_pb2.Master(master=hbase_types_pb2.ServerName(host_name="master", port=16000))

    def _rpc(self, host: str, port: int, service: str, method: str, req: Message, resp: type[Message]) -> Message:  # type: ignore[override]
        assert (service, method) == ("MasterService", "getProcedureResult")
        assert isinstance(req, master_pb2.GetProcedureResultRequest)
        return self.master.get_procedure_result(req.proc_id)


def test_a_procedure_is_waited_for_until_it_finishes() -> None:
    master = MasterDouble({7: (3, None)})
    ClientOfDouble(master).wait_procedure(7, "add peer p")
    assert master.polls == 4 and master.procedures == {}


def test_a_failed_procedure_raises_its_exception() -> None:
    master = MasterDouble({7: (1, "peer p exists")})
    with pytest.raises(HBaseTerminalError, match="add peer p: peer p exists"):
        ClientOfDouble(master).wait_procedure(7, "add peer p")


def test_a_result_taken_by_a_poll_whose_answer_was_lost_is_taken_as_finished(caplog: pytest.LogCaptureFixture) -> None:
    master = MasterDouble({7: (0, None)}, lose_answers=1)  # the first poll takes the result, its answer is lost
    with caplog.at_level(logging.WARNING, logger="cdcflow.clients.hbase.native"):
        ClientOfDouble(master).wait_procedure(7, "add peer p")
    assert master.polls == 2  # the retry found the procedure unknown, as HBase's master answers then
    assert "procedure 7 unknown to master: taken as finished" in caplog.text
