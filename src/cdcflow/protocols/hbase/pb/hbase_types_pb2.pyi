from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CellType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MINIMUM: _ClassVar[CellType]
    PUT: _ClassVar[CellType]
    DELETE: _ClassVar[CellType]
    DELETE_FAMILY_VERSION: _ClassVar[CellType]
    DELETE_COLUMN: _ClassVar[CellType]
    DELETE_FAMILY: _ClassVar[CellType]
    MAXIMUM: _ClassVar[CellType]
MINIMUM: CellType
PUT: CellType
DELETE: CellType
DELETE_FAMILY_VERSION: CellType
DELETE_COLUMN: CellType
DELETE_FAMILY: CellType
MAXIMUM: CellType

class TableName(_message.Message):
    __slots__ = ("namespace", "qualifier")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    QUALIFIER_FIELD_NUMBER: _ClassVar[int]
    namespace: bytes
    qualifier: bytes
    def __init__(self, namespace: _Optional[bytes] = ..., qualifier: _Optional[bytes] = ...) -> None: ...

class BytesBytesPair(_message.Message):
    __slots__ = ("first", "second")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    SECOND_FIELD_NUMBER: _ClassVar[int]
    first: bytes
    second: bytes
    def __init__(self, first: _Optional[bytes] = ..., second: _Optional[bytes] = ...) -> None: ...

class NameStringPair(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class NameBytesPair(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: bytes
    def __init__(self, name: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class ColumnFamilySchema(_message.Message):
    __slots__ = ("name", "attributes", "configuration")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    attributes: _containers.RepeatedCompositeFieldContainer[BytesBytesPair]
    configuration: _containers.RepeatedCompositeFieldContainer[NameStringPair]
    def __init__(self, name: _Optional[bytes] = ..., attributes: _Optional[_Iterable[_Union[BytesBytesPair, _Mapping]]] = ..., configuration: _Optional[_Iterable[_Union[NameStringPair, _Mapping]]] = ...) -> None: ...

class TableSchema(_message.Message):
    __slots__ = ("table_name", "attributes", "column_families", "configuration")
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FAMILIES_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    table_name: TableName
    attributes: _containers.RepeatedCompositeFieldContainer[BytesBytesPair]
    column_families: _containers.RepeatedCompositeFieldContainer[ColumnFamilySchema]
    configuration: _containers.RepeatedCompositeFieldContainer[NameStringPair]
    def __init__(self, table_name: _Optional[_Union[TableName, _Mapping]] = ..., attributes: _Optional[_Iterable[_Union[BytesBytesPair, _Mapping]]] = ..., column_families: _Optional[_Iterable[_Union[ColumnFamilySchema, _Mapping]]] = ..., configuration: _Optional[_Iterable[_Union[NameStringPair, _Mapping]]] = ...) -> None: ...

class RegionInfo(_message.Message):
    __slots__ = ("region_id", "table_name", "start_key", "end_key", "offline", "split", "replica_id")
    REGION_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    START_KEY_FIELD_NUMBER: _ClassVar[int]
    END_KEY_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    region_id: int
    table_name: TableName
    start_key: bytes
    end_key: bytes
    offline: bool
    split: bool
    replica_id: int
    def __init__(self, region_id: _Optional[int] = ..., table_name: _Optional[_Union[TableName, _Mapping]] = ..., start_key: _Optional[bytes] = ..., end_key: _Optional[bytes] = ..., offline: _Optional[bool] = ..., split: _Optional[bool] = ..., replica_id: _Optional[int] = ...) -> None: ...

class RegionSpecifier(_message.Message):
    __slots__ = ("type", "value")
    class RegionSpecifierType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REGION_NAME: _ClassVar[RegionSpecifier.RegionSpecifierType]
        ENCODED_REGION_NAME: _ClassVar[RegionSpecifier.RegionSpecifierType]
    REGION_NAME: RegionSpecifier.RegionSpecifierType
    ENCODED_REGION_NAME: RegionSpecifier.RegionSpecifierType
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    type: RegionSpecifier.RegionSpecifierType
    value: bytes
    def __init__(self, type: _Optional[_Union[RegionSpecifier.RegionSpecifierType, str]] = ..., value: _Optional[bytes] = ...) -> None: ...

class TimeRange(_message.Message):
    __slots__ = ("to",)
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    to: int
    def __init__(self, to: _Optional[int] = ..., **kwargs) -> None: ...

class ServerName(_message.Message):
    __slots__ = ("host_name", "port", "start_code")
    HOST_NAME_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    START_CODE_FIELD_NUMBER: _ClassVar[int]
    host_name: str
    port: int
    start_code: int
    def __init__(self, host_name: _Optional[str] = ..., port: _Optional[int] = ..., start_code: _Optional[int] = ...) -> None: ...

class Cell(_message.Message):
    __slots__ = ("row", "family", "qualifier", "timestamp", "cell_type", "value", "tags")
    ROW_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    QUALIFIER_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CELL_TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    row: bytes
    family: bytes
    qualifier: bytes
    timestamp: int
    cell_type: CellType
    value: bytes
    tags: bytes
    def __init__(self, row: _Optional[bytes] = ..., family: _Optional[bytes] = ..., qualifier: _Optional[bytes] = ..., timestamp: _Optional[int] = ..., cell_type: _Optional[_Union[CellType, str]] = ..., value: _Optional[bytes] = ..., tags: _Optional[bytes] = ...) -> None: ...

class MetaRegionServer(_message.Message):
    __slots__ = ("server", "rpc_version")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    RPC_VERSION_FIELD_NUMBER: _ClassVar[int]
    server: ServerName
    rpc_version: int
    def __init__(self, server: _Optional[_Union[ServerName, _Mapping]] = ..., rpc_version: _Optional[int] = ...) -> None: ...

class Master(_message.Message):
    __slots__ = ("master", "rpc_version", "info_port")
    MASTER_FIELD_NUMBER: _ClassVar[int]
    RPC_VERSION_FIELD_NUMBER: _ClassVar[int]
    INFO_PORT_FIELD_NUMBER: _ClassVar[int]
    master: ServerName
    rpc_version: int
    info_port: int
    def __init__(self, master: _Optional[_Union[ServerName, _Mapping]] = ..., rpc_version: _Optional[int] = ..., info_port: _Optional[int] = ...) -> None: ...

class GenericExceptionMessage(_message.Message):
    __slots__ = ("class_name", "message", "error_info")
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_INFO_FIELD_NUMBER: _ClassVar[int]
    class_name: str
    message: str
    error_info: bytes
    def __init__(self, class_name: _Optional[str] = ..., message: _Optional[str] = ..., error_info: _Optional[bytes] = ...) -> None: ...

class ForeignExceptionMessage(_message.Message):
    __slots__ = ("source", "generic_exception")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    GENERIC_EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    source: str
    generic_exception: GenericExceptionMessage
    def __init__(self, source: _Optional[str] = ..., generic_exception: _Optional[_Union[GenericExceptionMessage, _Mapping]] = ...) -> None: ...

class UUID(_message.Message):
    __slots__ = ("least_sig_bits", "most_sig_bits")
    LEAST_SIG_BITS_FIELD_NUMBER: _ClassVar[int]
    MOST_SIG_BITS_FIELD_NUMBER: _ClassVar[int]
    least_sig_bits: int
    most_sig_bits: int
    def __init__(self, least_sig_bits: _Optional[int] = ..., most_sig_bits: _Optional[int] = ...) -> None: ...

class ClusterId(_message.Message):
    __slots__ = ("cluster_id",)
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    def __init__(self, cluster_id: _Optional[str] = ...) -> None: ...

class SnapshotDescription(_message.Message):
    __slots__ = ("name", "table", "creation_time", "type", "version", "owner", "ttl")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DISABLED: _ClassVar[SnapshotDescription.Type]
        FLUSH: _ClassVar[SnapshotDescription.Type]
        SKIPFLUSH: _ClassVar[SnapshotDescription.Type]
    DISABLED: SnapshotDescription.Type
    FLUSH: SnapshotDescription.Type
    SKIPFLUSH: SnapshotDescription.Type
    NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    name: str
    table: str
    creation_time: int
    type: SnapshotDescription.Type
    version: int
    owner: str
    ttl: int
    def __init__(self, name: _Optional[str] = ..., table: _Optional[str] = ..., creation_time: _Optional[int] = ..., type: _Optional[_Union[SnapshotDescription.Type, str]] = ..., version: _Optional[int] = ..., owner: _Optional[str] = ..., ttl: _Optional[int] = ...) -> None: ...
