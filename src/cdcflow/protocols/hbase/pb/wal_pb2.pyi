from cdcflow.protocols.hbase.pb import hbase_types_pb2 as _hbase_types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScopeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICATION_SCOPE_LOCAL: _ClassVar[ScopeType]
    REPLICATION_SCOPE_GLOBAL: _ClassVar[ScopeType]
    REPLICATION_SCOPE_SERIAL: _ClassVar[ScopeType]
REPLICATION_SCOPE_LOCAL: ScopeType
REPLICATION_SCOPE_GLOBAL: ScopeType
REPLICATION_SCOPE_SERIAL: ScopeType

class FamilyScope(_message.Message):
    __slots__ = ("family", "scope_type")
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_TYPE_FIELD_NUMBER: _ClassVar[int]
    family: bytes
    scope_type: ScopeType
    def __init__(self, family: _Optional[bytes] = ..., scope_type: _Optional[_Union[ScopeType, str]] = ...) -> None: ...

class Attribute(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class WALKey(_message.Message):
    __slots__ = ("encoded_region_name", "table_name", "log_sequence_number", "write_time", "cluster_id", "scopes", "following_kv_count", "cluster_ids", "nonceGroup", "nonce", "orig_sequence_number", "extended_attributes")
    ENCODED_REGION_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    LOG_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    WRITE_TIME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    FOLLOWING_KV_COUNT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_IDS_FIELD_NUMBER: _ClassVar[int]
    NONCEGROUP_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    ORIG_SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    EXTENDED_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    encoded_region_name: bytes
    table_name: bytes
    log_sequence_number: int
    write_time: int
    cluster_id: _hbase_types_pb2.UUID
    scopes: _containers.RepeatedCompositeFieldContainer[FamilyScope]
    following_kv_count: int
    cluster_ids: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.UUID]
    nonceGroup: int
    nonce: int
    orig_sequence_number: int
    extended_attributes: _containers.RepeatedCompositeFieldContainer[Attribute]
    def __init__(self, encoded_region_name: _Optional[bytes] = ..., table_name: _Optional[bytes] = ..., log_sequence_number: _Optional[int] = ..., write_time: _Optional[int] = ..., cluster_id: _Optional[_Union[_hbase_types_pb2.UUID, _Mapping]] = ..., scopes: _Optional[_Iterable[_Union[FamilyScope, _Mapping]]] = ..., following_kv_count: _Optional[int] = ..., cluster_ids: _Optional[_Iterable[_Union[_hbase_types_pb2.UUID, _Mapping]]] = ..., nonceGroup: _Optional[int] = ..., nonce: _Optional[int] = ..., orig_sequence_number: _Optional[int] = ..., extended_attributes: _Optional[_Iterable[_Union[Attribute, _Mapping]]] = ...) -> None: ...

class WALEntry(_message.Message):
    __slots__ = ("key", "key_value_bytes", "associated_cell_count")
    KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ASSOCIATED_CELL_COUNT_FIELD_NUMBER: _ClassVar[int]
    key: WALKey
    key_value_bytes: _containers.RepeatedScalarFieldContainer[bytes]
    associated_cell_count: int
    def __init__(self, key: _Optional[_Union[WALKey, _Mapping]] = ..., key_value_bytes: _Optional[_Iterable[bytes]] = ..., associated_cell_count: _Optional[int] = ...) -> None: ...

class ReplicateWALEntryRequest(_message.Message):
    __slots__ = ("entry", "replicationClusterId", "sourceBaseNamespaceDirPath", "sourceHFileArchiveDirPath")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    REPLICATIONCLUSTERID_FIELD_NUMBER: _ClassVar[int]
    SOURCEBASENAMESPACEDIRPATH_FIELD_NUMBER: _ClassVar[int]
    SOURCEHFILEARCHIVEDIRPATH_FIELD_NUMBER: _ClassVar[int]
    entry: _containers.RepeatedCompositeFieldContainer[WALEntry]
    replicationClusterId: str
    sourceBaseNamespaceDirPath: str
    sourceHFileArchiveDirPath: str
    def __init__(self, entry: _Optional[_Iterable[_Union[WALEntry, _Mapping]]] = ..., replicationClusterId: _Optional[str] = ..., sourceBaseNamespaceDirPath: _Optional[str] = ..., sourceHFileArchiveDirPath: _Optional[str] = ...) -> None: ...

class ReplicateWALEntryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StoreDescriptor(_message.Message):
    __slots__ = ("family_name", "store_home_dir", "store_file", "store_file_size_bytes")
    FAMILY_NAME_FIELD_NUMBER: _ClassVar[int]
    STORE_HOME_DIR_FIELD_NUMBER: _ClassVar[int]
    STORE_FILE_FIELD_NUMBER: _ClassVar[int]
    STORE_FILE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    family_name: bytes
    store_home_dir: str
    store_file: _containers.RepeatedScalarFieldContainer[str]
    store_file_size_bytes: int
    def __init__(self, family_name: _Optional[bytes] = ..., store_home_dir: _Optional[str] = ..., store_file: _Optional[_Iterable[str]] = ..., store_file_size_bytes: _Optional[int] = ...) -> None: ...

class BulkLoadDescriptor(_message.Message):
    __slots__ = ("table_name", "encoded_region_name", "stores", "bulkload_seq_num", "cluster_ids", "replicate")
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    ENCODED_REGION_NAME_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    BULKLOAD_SEQ_NUM_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_IDS_FIELD_NUMBER: _ClassVar[int]
    REPLICATE_FIELD_NUMBER: _ClassVar[int]
    table_name: _hbase_types_pb2.TableName
    encoded_region_name: bytes
    stores: _containers.RepeatedCompositeFieldContainer[StoreDescriptor]
    bulkload_seq_num: int
    cluster_ids: _containers.RepeatedScalarFieldContainer[str]
    replicate: bool
    def __init__(self, table_name: _Optional[_Union[_hbase_types_pb2.TableName, _Mapping]] = ..., encoded_region_name: _Optional[bytes] = ..., stores: _Optional[_Iterable[_Union[StoreDescriptor, _Mapping]]] = ..., bulkload_seq_num: _Optional[int] = ..., cluster_ids: _Optional[_Iterable[str]] = ..., replicate: _Optional[bool] = ...) -> None: ...
