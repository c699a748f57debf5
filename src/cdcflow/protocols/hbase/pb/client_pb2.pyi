from cdcflow.protocols.hbase.pb import hbase_types_pb2 as _hbase_types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Column(_message.Message):
    __slots__ = ("family", "qualifier")
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    QUALIFIER_FIELD_NUMBER: _ClassVar[int]
    family: bytes
    qualifier: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, family: _Optional[bytes] = ..., qualifier: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Get(_message.Message):
    __slots__ = ("row", "column", "time_range", "max_versions")
    ROW_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    MAX_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    row: bytes
    column: _containers.RepeatedCompositeFieldContainer[Column]
    time_range: _hbase_types_pb2.TimeRange
    max_versions: int
    def __init__(self, row: _Optional[bytes] = ..., column: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., time_range: _Optional[_Union[_hbase_types_pb2.TimeRange, _Mapping]] = ..., max_versions: _Optional[int] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("cell", "associated_cell_count", "exists", "stale", "partial")
    CELL_FIELD_NUMBER: _ClassVar[int]
    ASSOCIATED_CELL_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    cell: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.Cell]
    associated_cell_count: int
    exists: bool
    stale: bool
    partial: bool
    def __init__(self, cell: _Optional[_Iterable[_Union[_hbase_types_pb2.Cell, _Mapping]]] = ..., associated_cell_count: _Optional[int] = ..., exists: _Optional[bool] = ..., stale: _Optional[bool] = ..., partial: _Optional[bool] = ...) -> None: ...

class MutationProto(_message.Message):
    __slots__ = ("row", "mutate_type", "column_value", "timestamp", "attribute", "durability", "time_range", "associated_cell_count", "nonce")
    class Durability(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        USE_DEFAULT: _ClassVar[MutationProto.Durability]
        SKIP_WAL: _ClassVar[MutationProto.Durability]
        ASYNC_WAL: _ClassVar[MutationProto.Durability]
        SYNC_WAL: _ClassVar[MutationProto.Durability]
        FSYNC_WAL: _ClassVar[MutationProto.Durability]
    USE_DEFAULT: MutationProto.Durability
    SKIP_WAL: MutationProto.Durability
    ASYNC_WAL: MutationProto.Durability
    SYNC_WAL: MutationProto.Durability
    FSYNC_WAL: MutationProto.Durability
    class MutationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        APPEND: _ClassVar[MutationProto.MutationType]
        INCREMENT: _ClassVar[MutationProto.MutationType]
        PUT: _ClassVar[MutationProto.MutationType]
        DELETE: _ClassVar[MutationProto.MutationType]
    APPEND: MutationProto.MutationType
    INCREMENT: MutationProto.MutationType
    PUT: MutationProto.MutationType
    DELETE: MutationProto.MutationType
    class DeleteType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DELETE_ONE_VERSION: _ClassVar[MutationProto.DeleteType]
        DELETE_MULTIPLE_VERSIONS: _ClassVar[MutationProto.DeleteType]
        DELETE_FAMILY: _ClassVar[MutationProto.DeleteType]
        DELETE_FAMILY_VERSION: _ClassVar[MutationProto.DeleteType]
    DELETE_ONE_VERSION: MutationProto.DeleteType
    DELETE_MULTIPLE_VERSIONS: MutationProto.DeleteType
    DELETE_FAMILY: MutationProto.DeleteType
    DELETE_FAMILY_VERSION: MutationProto.DeleteType
    class ColumnValue(_message.Message):
        __slots__ = ("family", "qualifier_value")
        class QualifierValue(_message.Message):
            __slots__ = ("qualifier", "value", "timestamp", "delete_type", "tags")
            QUALIFIER_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
            DELETE_TYPE_FIELD_NUMBER: _ClassVar[int]
            TAGS_FIELD_NUMBER: _ClassVar[int]
            qualifier: bytes
            value: bytes
            timestamp: int
            delete_type: MutationProto.DeleteType
            tags: bytes
            def __init__(self, qualifier: _Optional[bytes] = ..., value: _Optional[bytes] = ..., timestamp: _Optional[int] = ..., delete_type: _Optional[_Union[MutationProto.DeleteType, str]] = ..., tags: _Optional[bytes] = ...) -> None: ...
        FAMILY_FIELD_NUMBER: _ClassVar[int]
        QUALIFIER_VALUE_FIELD_NUMBER: _ClassVar[int]
        family: bytes
        qualifier_value: _containers.RepeatedCompositeFieldContainer[MutationProto.ColumnValue.QualifierValue]
        def __init__(self, family: _Optional[bytes] = ..., qualifier_value: _Optional[_Iterable[_Union[MutationProto.ColumnValue.QualifierValue, _Mapping]]] = ...) -> None: ...
    ROW_FIELD_NUMBER: _ClassVar[int]
    MUTATE_TYPE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    DURABILITY_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    ASSOCIATED_CELL_COUNT_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    row: bytes
    mutate_type: MutationProto.MutationType
    column_value: _containers.RepeatedCompositeFieldContainer[MutationProto.ColumnValue]
    timestamp: int
    attribute: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.NameBytesPair]
    durability: MutationProto.Durability
    time_range: _hbase_types_pb2.TimeRange
    associated_cell_count: int
    nonce: int
    def __init__(self, row: _Optional[bytes] = ..., mutate_type: _Optional[_Union[MutationProto.MutationType, str]] = ..., column_value: _Optional[_Iterable[_Union[MutationProto.ColumnValue, _Mapping]]] = ..., timestamp: _Optional[int] = ..., attribute: _Optional[_Iterable[_Union[_hbase_types_pb2.NameBytesPair, _Mapping]]] = ..., durability: _Optional[_Union[MutationProto.Durability, str]] = ..., time_range: _Optional[_Union[_hbase_types_pb2.TimeRange, _Mapping]] = ..., associated_cell_count: _Optional[int] = ..., nonce: _Optional[int] = ...) -> None: ...

class MutateRequest(_message.Message):
    __slots__ = ("region", "mutation", "nonce_group")
    REGION_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    NONCE_GROUP_FIELD_NUMBER: _ClassVar[int]
    region: _hbase_types_pb2.RegionSpecifier
    mutation: MutationProto
    nonce_group: int
    def __init__(self, region: _Optional[_Union[_hbase_types_pb2.RegionSpecifier, _Mapping]] = ..., mutation: _Optional[_Union[MutationProto, _Mapping]] = ..., nonce_group: _Optional[int] = ...) -> None: ...

class MutateResponse(_message.Message):
    __slots__ = ("result", "processed")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    result: Result
    processed: bool
    def __init__(self, result: _Optional[_Union[Result, _Mapping]] = ..., processed: _Optional[bool] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("region", "get")
    REGION_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    region: _hbase_types_pb2.RegionSpecifier
    get: Get
    def __init__(self, region: _Optional[_Union[_hbase_types_pb2.RegionSpecifier, _Mapping]] = ..., get: _Optional[_Union[Get, _Mapping]] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: Result
    def __init__(self, result: _Optional[_Union[Result, _Mapping]] = ...) -> None: ...

class Scan(_message.Message):
    __slots__ = ("column", "attribute", "start_row", "stop_row", "time_range", "max_versions", "cache_blocks", "batch_size", "max_result_size", "reversed", "caching", "allow_partial_results", "include_start_row", "include_stop_row")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    START_ROW_FIELD_NUMBER: _ClassVar[int]
    STOP_ROW_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    MAX_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    CACHE_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULT_SIZE_FIELD_NUMBER: _ClassVar[int]
    REVERSED_FIELD_NUMBER: _ClassVar[int]
    CACHING_FIELD_NUMBER: _ClassVar[int]
    ALLOW_PARTIAL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_START_ROW_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STOP_ROW_FIELD_NUMBER: _ClassVar[int]
    column: _containers.RepeatedCompositeFieldContainer[Column]
    attribute: _containers.RepeatedCompositeFieldContainer[_hbase_types_pb2.NameBytesPair]
    start_row: bytes
    stop_row: bytes
    time_range: _hbase_types_pb2.TimeRange
    max_versions: int
    cache_blocks: bool
    batch_size: int
    max_result_size: int
    reversed: bool
    caching: int
    allow_partial_results: bool
    include_start_row: bool
    include_stop_row: bool
    def __init__(self, column: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., attribute: _Optional[_Iterable[_Union[_hbase_types_pb2.NameBytesPair, _Mapping]]] = ..., start_row: _Optional[bytes] = ..., stop_row: _Optional[bytes] = ..., time_range: _Optional[_Union[_hbase_types_pb2.TimeRange, _Mapping]] = ..., max_versions: _Optional[int] = ..., cache_blocks: _Optional[bool] = ..., batch_size: _Optional[int] = ..., max_result_size: _Optional[int] = ..., reversed: _Optional[bool] = ..., caching: _Optional[int] = ..., allow_partial_results: _Optional[bool] = ..., include_start_row: _Optional[bool] = ..., include_stop_row: _Optional[bool] = ...) -> None: ...

class ScanRequest(_message.Message):
    __slots__ = ("region", "scan", "scanner_id", "number_of_rows", "close_scanner", "next_call_seq", "client_handles_partials", "client_handles_heartbeats", "renew", "limit_of_rows")
    REGION_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    SCANNER_ID_FIELD_NUMBER: _ClassVar[int]
    NUMBER_OF_ROWS_FIELD_NUMBER: _ClassVar[int]
    CLOSE_SCANNER_FIELD_NUMBER: _ClassVar[int]
    NEXT_CALL_SEQ_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HANDLES_PARTIALS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HANDLES_HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    RENEW_FIELD_NUMBER: _ClassVar[int]
    LIMIT_OF_ROWS_FIELD_NUMBER: _ClassVar[int]
    region: _hbase_types_pb2.RegionSpecifier
    scan: Scan
    scanner_id: int
    number_of_rows: int
    close_scanner: bool
    next_call_seq: int
    client_handles_partials: bool
    client_handles_heartbeats: bool
    renew: bool
    limit_of_rows: int
    def __init__(self, region: _Optional[_Union[_hbase_types_pb2.RegionSpecifier, _Mapping]] = ..., scan: _Optional[_Union[Scan, _Mapping]] = ..., scanner_id: _Optional[int] = ..., number_of_rows: _Optional[int] = ..., close_scanner: _Optional[bool] = ..., next_call_seq: _Optional[int] = ..., client_handles_partials: _Optional[bool] = ..., client_handles_heartbeats: _Optional[bool] = ..., renew: _Optional[bool] = ..., limit_of_rows: _Optional[int] = ...) -> None: ...

class ScanResponse(_message.Message):
    __slots__ = ("cells_per_result", "scanner_id", "more_results", "ttl", "results", "stale", "partial_flag_per_result", "more_results_in_region", "heartbeat_message")
    CELLS_PER_RESULT_FIELD_NUMBER: _ClassVar[int]
    SCANNER_ID_FIELD_NUMBER: _ClassVar[int]
    MORE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FLAG_PER_RESULT_FIELD_NUMBER: _ClassVar[int]
    MORE_RESULTS_IN_REGION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    cells_per_result: _containers.RepeatedScalarFieldContainer[int]
    scanner_id: int
    more_results: bool
    ttl: int
    results: _containers.RepeatedCompositeFieldContainer[Result]
    stale: bool
    partial_flag_per_result: _containers.RepeatedScalarFieldContainer[bool]
    more_results_in_region: bool
    heartbeat_message: bool
    def __init__(self, cells_per_result: _Optional[_Iterable[int]] = ..., scanner_id: _Optional[int] = ..., more_results: _Optional[bool] = ..., ttl: _Optional[int] = ..., results: _Optional[_Iterable[_Union[Result, _Mapping]]] = ..., stale: _Optional[bool] = ..., partial_flag_per_result: _Optional[_Iterable[bool]] = ..., more_results_in_region: _Optional[bool] = ..., heartbeat_message: _Optional[bool] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("index", "mutation", "get")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    index: int
    mutation: MutationProto
    get: Get
    def __init__(self, index: _Optional[int] = ..., mutation: _Optional[_Union[MutationProto, _Mapping]] = ..., get: _Optional[_Union[Get, _Mapping]] = ...) -> None: ...

class RegionAction(_message.Message):
    __slots__ = ("region", "atomic", "action")
    REGION_FIELD_NUMBER: _ClassVar[int]
    ATOMIC_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    region: _hbase_types_pb2.RegionSpecifier
    atomic: bool
    action: _containers.RepeatedCompositeFieldContainer[Action]
    def __init__(self, region: _Optional[_Union[_hbase_types_pb2.RegionSpecifier, _Mapping]] = ..., atomic: _Optional[bool] = ..., action: _Optional[_Iterable[_Union[Action, _Mapping]]] = ...) -> None: ...

class ResultOrException(_message.Message):
    __slots__ = ("index", "result", "exception")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    index: int
    result: Result
    exception: _hbase_types_pb2.NameBytesPair
    def __init__(self, index: _Optional[int] = ..., result: _Optional[_Union[Result, _Mapping]] = ..., exception: _Optional[_Union[_hbase_types_pb2.NameBytesPair, _Mapping]] = ...) -> None: ...

class RegionActionResult(_message.Message):
    __slots__ = ("resultOrException", "exception", "processed")
    RESULTOREXCEPTION_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    resultOrException: _containers.RepeatedCompositeFieldContainer[ResultOrException]
    exception: _hbase_types_pb2.NameBytesPair
    processed: bool
    def __init__(self, resultOrException: _Optional[_Iterable[_Union[ResultOrException, _Mapping]]] = ..., exception: _Optional[_Union[_hbase_types_pb2.NameBytesPair, _Mapping]] = ..., processed: _Optional[bool] = ...) -> None: ...

class MultiRequest(_message.Message):
    __slots__ = ("regionAction", "nonceGroup")
    REGIONACTION_FIELD_NUMBER: _ClassVar[int]
    NONCEGROUP_FIELD_NUMBER: _ClassVar[int]
    regionAction: _containers.RepeatedCompositeFieldContainer[RegionAction]
    nonceGroup: int
    def __init__(self, regionAction: _Optional[_Iterable[_Union[RegionAction, _Mapping]]] = ..., nonceGroup: _Optional[int] = ...) -> None: ...

class MultiResponse(_message.Message):
    __slots__ = ("regionActionResult", "processed")
    REGIONACTIONRESULT_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    regionActionResult: _containers.RepeatedCompositeFieldContainer[RegionActionResult]
    processed: bool
    def __init__(self, regionActionResult: _Optional[_Iterable[_Union[RegionActionResult, _Mapping]]] = ..., processed: _Optional[bool] = ...) -> None: ...
