from cdcflow.protocols.hbase.pb import hbase_types_pb2 as _hbase_types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClusterStatusOption(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HBASE_VERSION: _ClassVar[ClusterStatusOption]
    CLUSTER_ID: _ClassVar[ClusterStatusOption]
    LIVE_SERVERS: _ClassVar[ClusterStatusOption]
    DEAD_SERVERS: _ClassVar[ClusterStatusOption]
    MASTER: _ClassVar[ClusterStatusOption]
    BACKUP_MASTERS: _ClassVar[ClusterStatusOption]
    MASTER_COPROCESSORS: _ClassVar[ClusterStatusOption]
    REGIONS_IN_TRANSITION: _ClassVar[ClusterStatusOption]
    BALANCER_ON: _ClassVar[ClusterStatusOption]
    MASTER_INFO_PORT: _ClassVar[ClusterStatusOption]
    SERVERS_NAME: _ClassVar[ClusterStatusOption]
    TABLE_TO_REGIONS_COUNT: _ClassVar[ClusterStatusOption]
    TASKS: _ClassVar[ClusterStatusOption]
    DECOMMISSIONED_SERVERS: _ClassVar[ClusterStatusOption]
    UNKNOWN_SERVERS: _ClassVar[ClusterStatusOption]
HBASE_VERSION: ClusterStatusOption
CLUSTER_ID: ClusterStatusOption
LIVE_SERVERS: ClusterStatusOption
DEAD_SERVERS: ClusterStatusOption
MASTER: ClusterStatusOption
BACKUP_MASTERS: ClusterStatusOption
MASTER_COPROCESSORS: ClusterStatusOption
REGIONS_IN_TRANSITION: ClusterStatusOption
BALANCER_ON: ClusterStatusOption
MASTER_INFO_PORT: ClusterStatusOption
SERVERS_NAME: ClusterStatusOption
TABLE_TO_REGIONS_COUNT: ClusterStatusOption
TASKS: ClusterStatusOption
DECOMMISSIONED_SERVERS: ClusterStatusOption
UNKNOWN_SERVERS: ClusterStatusOption

class CreateTableRequest(_message.Message):
    __slots__ = ("table_schema", "split_keys", "nonce_group", "nonce")
    TABLE_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SPLIT_KEYS_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    table_schema: _hbase_types_pb2.TableSchema
    split_keys: _containers.RepeatedScalarFieldContainer[bytes]
    nonce_group: int
    nonce: int
    def __init__(self, table_schema: _Optional[_Union[_hbase_types_pb2.TableSchema, _Mapping]] = ..., split_keys: _Optional[_Iterable[bytes]] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class CreateTableResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class DeleteTableRequest(_message.Message):
    __slots__ = ("table_name", "nonce_group", "nonce")
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    table_name: _hbase_types_pb2.TableName
    nonce_group: int
    nonce: int
    def __init__(self, table_name: _Optional[_Union[_hbase_types_pb2.TableName, _Mapping]] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class DeleteTableResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class TruncateTableRequest(_message.Message):
    __slots__ = ("tableName", "preserveSplits", "nonce_group", "nonce")
    TABLENAME_FIELD_NUMBER: _ClassVar[int]
    PRESERVESPLITS_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    tableName: _hbase_types_pb2.TableName
    preserveSplits: bool
    nonce_group: int
    nonce: int
    def __init__(self, tableName: _Optional[_Union[_hbase_types_pb2.TableName, _Mapping]] = ..., preserveSplits: _Optional[bool] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class TruncateTableResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class SplitTableRegionRequest(_message.Message):
    __slots__ = ("region_info", "split_row", "nonce_group", "nonce")
    REGION_INFO_FIELD_NUMBER: _ClassVar[int]
    SPLIT_ROW_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    region_info: _hbase_types_pb2.RegionInfo
    split_row: bytes
    nonce_group: int
    nonce: int
    def __init__(self, region_info: _Optional[_Union[_hbase_types_pb2.RegionInfo, _Mapping]] = ..., split_row: _Optional[bytes] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class SplitTableRegionResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class DisableTableRequest(_message.Message):
    __slots__ = ("table_name", "nonce_group", "nonce")
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    table_name: _hbase_types_pb2.TableName
    nonce_group: int
    nonce: int
    def __init__(self, table_name: _Optional[_Union[_hbase_types_pb2.TableName, _Mapping]] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class DisableTableResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class EnableTableRequest(_message.Message):
    __slots__ = ("table_name", "nonce_group", "nonce")
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    table_name: _hbase_types_pb2.TableName
    nonce_group: int
    nonce: int
    def __init__(self, table_name: _Optional[_Union[_hbase_types_pb2.TableName, _Mapping]] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class EnableTableResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class ModifyTableRequest(_message.Message):
    __slots__ = ("table_name", "table_schema", "nonce_group", "nonce", "reopen_regions")
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    REOPEN_REGIONS_FIELD_NUMBER: _ClassVar[int]
    table_name: _hbase_types_pb2.TableName
    table_schema: _hbase_types_pb2.TableSchema
    nonce_group: int
    nonce: int
    reopen_regions: bool
    def __init__(self, table_name: _Optional[_Union[_hbase_types_pb2.TableName, _Mapping]] = ..., table_schema: _Optional[_Union[_hbase_types_pb2.TableSchema, _Mapping]] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ..., reopen_regions: _Optional[bool] = ...) -> None: ...

class ModifyTableResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class GetProcedureResultRequest(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class GetProcedureResultResponse(_message.Message):
    __slots__ = ("state", "submitted_time", "last_update", "result", "exception")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NOT_FOUND: _ClassVar[GetProcedureResultResponse.State]
        RUNNING: _ClassVar[GetProcedureResultResponse.State]
        FINISHED: _ClassVar[GetProcedureResultResponse.State]
    NOT_FOUND: GetProcedureResultResponse.State
    RUNNING: GetProcedureResultResponse.State
    FINISHED: GetProcedureResultResponse.State
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    state: GetProcedureResultResponse.State
    submitted_time: int
    last_update: int
    result: bytes
    exception: _hbase_types_pb2.ForeignExceptionMessage
    def __init__(self, state: _Optional[_Union[GetProcedureResultResponse.State, str]] = ..., submitted_time: _Optional[int] = ..., last_update: _Optional[int] = ..., result: _Optional[bytes] = ..., exception: _Optional[_Union[_hbase_types_pb2.ForeignExceptionMessage, _Mapping]] = ...) -> None: ...

class GetTableNamesRequest(_message.Message):
    __slots__ = ("regex", "include_sys_tables", "namespace")
    REGEX_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SYS_TABLES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    regex: str
    include_sys_tables: bool
    namespace: str
    def __init__(self, regex: _Optional[str] = ..., include_sys_tables: _Optional[bool] = ..., namespace: _Optional[str] = ...) -> None: ...

class GetTableNamesResponse(_message.Message):
    __slots__ = ("table_names",)
    TABLE_NAMES_FIELD_NUMBER: _ClassVar[int]
    table_names: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.TableName]
    def __init__(self, table_names: _Optional[_Iterable[_Union[_hbase_types_pb2.TableName, _Mapping]]] = ...) -> None: ...

class GetTableDescriptorsRequest(_message.Message):
    __slots__ = ("table_names", "regex", "include_sys_tables", "namespace")
    TABLE_NAMES_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SYS_TABLES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    table_names: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.TableName]
    regex: str
    include_sys_tables: bool
    namespace: str
    def __init__(self, table_names: _Optional[_Iterable[_Union[_hbase_types_pb2.TableName, _Mapping]]] = ..., regex: _Optional[str] = ..., include_sys_tables: _Optional[bool] = ..., namespace: _Optional[str] = ...) -> None: ...

class GetTableDescriptorsResponse(_message.Message):
    __slots__ = ("table_schema",)
    TABLE_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    table_schema: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.TableSchema]
    def __init__(self, table_schema: _Optional[_Iterable[_Union[_hbase_types_pb2.TableSchema, _Mapping]]] = ...) -> None: ...

class IsMasterRunningRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IsMasterRunningResponse(_message.Message):
    __slots__ = ("is_master_running",)
    IS_MASTER_RUNNING_FIELD_NUMBER: _ClassVar[int]
    is_master_running: bool
    def __init__(self, is_master_running: _Optional[bool] = ...) -> None: ...

class ReplicationLoadSource(_message.Message):
    __slots__ = ("peerID", "ageOfLastShippedOp", "sizeOfLogQueue", "timeStampOfLastShippedOp", "replicationLag", "timeStampOfNextToReplicate", "queueId", "recovered", "running", "editsSinceRestart", "editsRead", "oPsShipped")
    PEERID_FIELD_NUMBER: _ClassVar[int]
    AGEOFLASTSHIPPEDOP_FIELD_NUMBER: _ClassVar[int]
    SIZEOFLOGQUEUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPOFLASTSHIPPEDOP_FIELD_NUMBER: _ClassVar[int]
    REPLICATIONLAG_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPOFNEXTTOREPLICATE_FIELD_NUMBER: _ClassVar[int]
    QUEUEID_FIELD_NUMBER: _ClassVar[int]
    RECOVERED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    EDITSSINCERESTART_FIELD_NUMBER: _ClassVar[int]
    EDITSREAD_FIELD_NUMBER: _ClassVar[int]
    OPSSHIPPED_FIELD_NUMBER: _ClassVar[int]
    peerID: str
    ageOfLastShippedOp: int
    sizeOfLogQueue: int
    timeStampOfLastShippedOp: int
    replicationLag: int
    timeStampOfNextToReplicate: int
    queueId: str
    recovered: bool
    running: bool
    editsSinceRestart: bool
    editsRead: int
    oPsShipped: int
    def __init__(self, peerID: _Optional[str] = ..., ageOfLastShippedOp: _Optional[int] = ..., sizeOfLogQueue: _Optional[int] = ..., timeStampOfLastShippedOp: _Optional[int] = ..., replicationLag: _Optional[int] = ..., timeStampOfNextToReplicate: _Optional[int] = ..., queueId: _Optional[str] = ..., recovered: _Optional[bool] = ..., running: _Optional[bool] = ..., editsSinceRestart: _Optional[bool] = ..., editsRead: _Optional[int] = ..., oPsShipped: _Optional[int] = ...) -> None: ...

class ServerLoad(_message.Message):
    __slots__ = ("replLoadSource",)
    REPLLOADSOURCE_FIELD_NUMBER: _ClassVar[int]
    replLoadSource: _containers.RepeatedCompositeFieldContainer[ReplicationLoadSource]
    def __init__(self, replLoadSource: _Optional[_Iterable[_Union[ReplicationLoadSource, _Mapping]]] = ...) -> None: ...

class LiveServerInfo(_message.Message):
    __slots__ = ("server", "server_load")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    SERVER_LOAD_FIELD_NUMBER: _ClassVar[int]
    server: _hbase_types_pb2.ServerName
    server_load: ServerLoad
    def __init__(self, server: _Optional[_Union[_hbase_types_pb2.ServerName, _Mapping]] = ..., server_load: _Optional[_Union[ServerLoad, _Mapping]] = ...) -> None: ...

class ClusterStatus(_message.Message):
    __slots__ = ("live_servers", "cluster_id", "master", "servers_name", "decommissioned_servers")
    LIVE_SERVERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_FIELD_NUMBER: _ClassVar[int]
    SERVERS_NAME_FIELD_NUMBER: _ClassVar[int]
    DECOMMISSIONED_SERVERS_FIELD_NUMBER: _ClassVar[int]
    live_servers: _containers.RepeatedCompositeFieldContainer[LiveServerInfo]
    cluster_id: _hbase_types_pb2.ClusterId
    master: _hbase_types_pb2.ServerName
    servers_name: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.ServerName]
    decommissioned_servers: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.ServerName]
    def __init__(self, live_servers: _Optional[_Iterable[_Union[LiveServerInfo, _Mapping]]] = ..., cluster_id: _Optional[_Union[_hbase_types_pb2.ClusterId, _Mapping]] = ..., master: _Optional[_Union[_hbase_types_pb2.ServerName, _Mapping]] = ..., servers_name: _Optional[_Iterable[_Union[_hbase_types_pb2.ServerName, _Mapping]]] = ..., decommissioned_servers: _Optional[_Iterable[_Union[_hbase_types_pb2.ServerName, _Mapping]]] = ...) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ("options",)
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: _containers.RepeatedScalarFieldContainer[ClusterStatusOption]
    def __init__(self, options: _Optional[_Iterable[_Union[ClusterStatusOption, str]]] = ...) -> None: ...

class GetClusterStatusResponse(_message.Message):
    __slots__ = ("cluster_status",)
    CLUSTER_STATUS_FIELD_NUMBER: _ClassVar[int]
    cluster_status: ClusterStatus
    def __init__(self, cluster_status: _Optional[_Union[ClusterStatus, _Mapping]] = ...) -> None: ...

class ListDecommissionedRegionServersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDecommissionedRegionServersResponse(_message.Message):
    __slots__ = ("server_name",)
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    server_name: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.ServerName]
    def __init__(self, server_name: _Optional[_Iterable[_Union[_hbase_types_pb2.ServerName, _Mapping]]] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("snapshot", "nonce_group", "nonce")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    snapshot: _hbase_types_pb2.SnapshotDescription
    nonce_group: int
    nonce: int
    def __init__(self, snapshot: _Optional[_Union[_hbase_types_pb2.SnapshotDescription, _Mapping]] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class SnapshotResponse(_message.Message):
    __slots__ = ("expected_timeout", "proc_id")
    EXPECTED_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    expected_timeout: int
    proc_id: int
    def __init__(self, expected_timeout: _Optional[int] = ..., proc_id: _Optional[int] = ...) -> None: ...

class IsSnapshotDoneRequest(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: _hbase_types_pb2.SnapshotDescription
    def __init__(self, snapshot: _Optional[_Union[_hbase_types_pb2.SnapshotDescription, _Mapping]] = ...) -> None: ...

class IsSnapshotDoneResponse(_message.Message):
    __slots__ = ("done", "snapshot")
    DONE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    done: bool
    snapshot: _hbase_types_pb2.SnapshotDescription
    def __init__(self, done: _Optional[bool] = ..., snapshot: _Optional[_Union[_hbase_types_pb2.SnapshotDescription, _Mapping]] = ...) -> None: ...

class GetCompletedSnapshotsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCompletedSnapshotsResponse(_message.Message):
    __slots__ = ("snapshots",)
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    snapshots: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.SnapshotDescription]
    def __init__(self, snapshots: _Optional[_Iterable[_Union[_hbase_types_pb2.SnapshotDescription, _Mapping]]] = ...) -> None: ...

class DeleteSnapshotRequest(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: _hbase_types_pb2.SnapshotDescription
    def __init__(self, snapshot: _Optional[_Union[_hbase_types_pb2.SnapshotDescription, _Mapping]] = ...) -> None: ...

class DeleteSnapshotResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RestoreSnapshotRequest(_message.Message):
    __slots__ = ("snapshot", "nonce_group", "nonce", "restoreACL")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    RESTOREACL_FIELD_NUMBER: _ClassVar[int]
    snapshot: _hbase_types_pb2.SnapshotDescription
    nonce_group: int
    nonce: int
    restoreACL: bool
    def __init__(self, snapshot: _Optional[_Union[_hbase_types_pb2.SnapshotDescription, _Mapping]] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ..., restoreACL: _Optional[bool] = ...) -> None: ...

class RestoreSnapshotResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class MoveRegionRequest(_message.Message):
    __slots__ = ("region", "dest_server_name")
    REGION_FIELD_NUMBER: _ClassVar[int]
    DEST_SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    region: _hbase_types_pb2.RegionSpecifier
    dest_server_name: _hbase_types_pb2.ServerName
    def __init__(self, region: _Optional[_Union[_hbase_types_pb2.RegionSpecifier, _Mapping]] = ..., dest_server_name: _Optional[_Union[_hbase_types_pb2.ServerName, _Mapping]] = ...) -> None: ...

class MoveRegionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MergeTableRegionsRequest(_message.Message):
    __slots__ = ("region", "forcible", "nonce_group", "nonce")
    REGION_FIELD_NUMBER: _ClassVar[int]
    FORCIBLE_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    region: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.RegionSpecifier]
    forcible: bool
    nonce_group: int
    nonce: int
    def __init__(self, region: _Optional[_Iterable[_Union[_hbase_types_pb2.RegionSpecifier, _Mapping]]] = ..., forcible: _Optional[bool] = ..., nonce_group: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class MergeTableRegionsResponse(_message.Message):
    __slots__ = ("proc_id",)
    PROC_ID_FIELD_NUMBER: _ClassVar[int]
    proc_id: int
    def __init__(self, proc_id: _Optional[int] = ...) -> None: ...

class BalanceRequest(_message.Message):
    __slots__ = ("ignore_rit", "dry_run")
    IGNORE_RIT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    ignore_rit: bool
    dry_run: bool
    def __init__(self, ignore_rit: _Optional[bool] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class BalanceResponse(_message.Message):
    __slots__ = ("balancer_ran", "moves_calculated", "moves_executed")
    BALANCER_RAN_FIELD_NUMBER: _ClassVar[int]
    MOVES_CALCULATED_FIELD_NUMBER: _ClassVar[int]
    MOVES_EXECUTED_FIELD_NUMBER: _ClassVar[int]
    balancer_ran: bool
    moves_calculated: int
    moves_executed: int
    def __init__(self, balancer_ran: _Optional[bool] = ..., moves_calculated: _Optional[int] = ..., moves_executed: _Optional[int] = ...) -> None: ...

class SetBalancerRunningRequest(_message.Message):
    __slots__ = ("on", "synchronous")
    ON_FIELD_NUMBER: _ClassVar[int]
    SYNCHRONOUS_FIELD_NUMBER: _ClassVar[int]
    on: bool
    synchronous: bool
    def __init__(self, on: _Optional[bool] = ..., synchronous: _Optional[bool] = ...) -> None: ...

class SetBalancerRunningResponse(_message.Message):
    __slots__ = ("prev_balance_value",)
    PREV_BALANCE_VALUE_FIELD_NUMBER: _ClassVar[int]
    prev_balance_value: bool
    def __init__(self, prev_balance_value: _Optional[bool] = ...) -> None: ...

class DecommissionRegionServersRequest(_message.Message):
    __slots__ = ("server_name", "offload")
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    OFFLOAD_FIELD_NUMBER: _ClassVar[int]
    server_name: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.ServerName]
    offload: bool
    def __init__(self, server_name: _Optional[_Iterable[_Union[_hbase_types_pb2.ServerName, _Mapping]]] = ..., offload: _Optional[bool] = ...) -> None: ...

class DecommissionRegionServersResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecommissionRegionServerRequest(_message.Message):
    __slots__ = ("server_name", "region")
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    server_name: _hbase_types_pb2.ServerName
    region: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.RegionSpecifier]
    def __init__(self, server_name: _Optional[_Union[_hbase_types_pb2.ServerName, _Mapping]] = ..., region: _Optional[_Iterable[_Union[_hbase_types_pb2.RegionSpecifier, _Mapping]]] = ...) -> None: ...

class RecommissionRegionServerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
