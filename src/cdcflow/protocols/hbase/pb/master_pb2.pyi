from cdcflow.protocols.hbase.pb import hbase_types_pb2 as _hbase_types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
