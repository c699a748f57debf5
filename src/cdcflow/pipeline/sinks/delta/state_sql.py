"""The HBase row-state merge (`cdcflow.events.row_state.merge`) as one Spark SQL expression.

The Delta state sink puts these expressions in its MERGE's update and insert clauses, so a batch
is one MERGE per table: Spark joins the batch's cells with the stored rows and computes the new
state in the JVM, with no Python round trip, no separate read of the stored state and no lineage
cut. The result is the same as the Python merge, cell for cell and in the same order
(`tests/e2e/test_delta_state_sql.py` checks that on thousands of random cases).

Cells are structs (family binary, qualifier binary, ts bigint, type string, value binary,
pos array<bigint>), as in the state table's `puts` and `tombstones`.

Spark SQL has no `let`; `_let` binds a value to a lambda variable (`transform(array(v), x -> ...)`)
so that each intermediate array is computed once per row.
"""

from __future__ import annotations

from cdcflow.events.cells import CellType
from cdcflow.events.json_codec import CELL_TYPE_NAMES

_PUT = CELL_TYPE_NAMES[CellType.PUT]
_DELETE = CELL_TYPE_NAMES[CellType.DELETE]
_DELETE_COLUMN = CELL_TYPE_NAMES[CellType.DELETE_COLUMN]
_DELETE_FAMILY = CELL_TYPE_NAMES[CellType.DELETE_FAMILY]
_DELETE_FAMILY_VERSION = CELL_TYPE_NAMES[CellType.DELETE_FAMILY_VERSION]
# StateCell orders tombstones by the type's KeyValue code (the Python merge's sort order).
_TYPE_CODE = "CASE {c}.type " + " ".join(f"WHEN '{CELL_TYPE_NAMES[t]}' THEN {int(t)}" for t in CellType) + " END"


def _let(name: str, value: str, body: str) -> str:
    return f"element_at(transform(array({value}), {name} -> {body}), 1)"


def _same_column(a: str, b: str) -> str:
    return f"({a}.family = {b}.family AND {a}.qualifier = {b}.qualifier)"


def _later(a: str, b: str) -> str:
    """a comes after b by (ts, pos): the newer of two markers."""
    return f"({a}.ts > {b}.ts OR ({a}.ts = {b}.ts AND {a}.pos > {b}.pos))"


def _compare(keys: list[tuple[str, bool]]) -> str:
    """An array_sort comparator over (l, r) by `keys` (field expression with {c}, descending?)."""
    parts = []
    for key, descending in keys:
        lo, hi = ("-1", "1") if not descending else ("1", "-1")
        left, right = key.format(c="l"), key.format(c="r")
        parts.append(f"WHEN {left} < {right} THEN {lo} WHEN {left} > {right} THEN {hi}")
    return f"(l, r) -> CASE {' '.join(parts)} ELSE 0 END"


def _of_type(cells: str, type_name: str) -> str:
    return f"filter({cells}, c -> c.type = '{type_name}')"


def _newest_only(cells: str, same: str) -> str:
    """The cells no other cell of the same group (`same` over x, y) outranks by (ts, pos)."""
    return f"filter({cells}, x -> NOT exists({cells}, y -> {same} AND {_later('y', 'x')}))"


def merged_state_sql(old_puts: str, old_tombstones: str, new_cells: str, retained_versions: int) -> str:
    """A struct(puts, tombstones): the row state after `new_cells` were applied to the stored one.

    The arguments are SQL expressions (array<cell>, the stored ones may be NULL)."""
    if retained_versions < 1:
        raise ValueError("retained_versions must be at least 1")
    n = int(retained_versions)
    everything = f"concat(coalesce({old_tombstones}, array()), coalesce({old_puts}, array()), {new_cells})"
    by_column_newest_first = _compare(
        [("{c}.family", False), ("{c}.qualifier", False), ("{c}.ts", True), ("{c}.pos", True)]
    )
    # One put per (column, ts): the one latest in the log (highest position), as in HBase.
    sorted_puts = f"array_sort({_of_type('a', _PUT)}, {by_column_newest_first})"
    distinct_puts = (
        "filter(s, (p, i) -> CASE WHEN i = 0 THEN true "
        f"ELSE NOT ({_same_column('s[i - 1]', 'p')} AND s[i - 1].ts = p.ts) END)"
    )
    family_markers = _newest_only(_of_type("a", _DELETE_FAMILY), "y.family = x.family")
    column_markers = _newest_only(_of_type("a", _DELETE_COLUMN), _same_column("y", "x"))
    family_version_markers = _newest_only(_of_type("a", _DELETE_FAMILY_VERSION), "y.family = x.family AND y.ts = x.ts")
    version_markers = _newest_only(_of_type("a", _DELETE), f"{_same_column('y', 'x')} AND y.ts = x.ts")
    in_family = "exists(fam, f -> f.family = {c}.family AND {c}.ts <= f.ts)"
    in_column = "exists(col, d -> " + _same_column("d", "{c}") + " AND {c}.ts <= d.ts)"
    masked = (
        f"({in_family.format(c='p')} OR {in_column.format(c='p')} "
        "OR exists(famv, f -> f.family = p.family AND f.ts = p.ts) "
        f"OR exists(ver, v -> {_same_column('v', 'p')} AND v.ts = p.ts))"
    )
    # Sorted newest first per column, an element is among its column's newest n when the element
    # n places before it belongs to another column.
    kept = f"filter(u, (p, i) -> CASE WHEN i < {n} THEN true ELSE NOT {_same_column(f'u[i - {n}]', 'p')} END)"
    tombstone_order = _compare(
        [("{c}.family", False), ("{c}.qualifier", False), ("{c}.ts", False), (_TYPE_CODE, False),
         ("{c}.value", False), ("{c}.pos", False)]
    )  # fmt: skip
    tombstones = (
        "array_sort(array_distinct(concat(fam, col, "
        f"filter(famv, c -> NOT {in_family.format(c='c')}), "
        f"filter(ver, c -> NOT ({in_family.format(c='c')} OR {in_column.format(c='c')})))), {tombstone_order})"
    )
    result = f"named_struct('puts', {kept}, 'tombstones', {tombstones})"
    body = _let("u", f"filter({distinct_puts}, p -> NOT {masked})", result)
    body = _let("s", sorted_puts, body)
    for name, markers in reversed([("fam", family_markers), ("col", column_markers),
                                   ("famv", family_version_markers), ("ver", version_markers)]):  # fmt: skip
        body = _let(name, markers, body)
    return _let("a", everything, body)


def string_binary_sql(data: str) -> str:
    """`cdcflow.events.cells.string_binary` of a binary expression: printable ASCII as is, every
    other byte and the backslash as \\xNN."""
    byte = f"substring({data}, i, 1)"
    one = (
        f"CASE WHEN hex({byte}) BETWEEN '20' AND '7E' AND hex({byte}) != '5C' THEN CAST({byte} AS STRING) "
        f"ELSE concat('\\\\x', hex({byte})) END"
    )
    return (
        f"CASE WHEN length({data}) = 0 THEN '' "
        f"ELSE array_join(transform(sequence(1, length({data})), i -> {one}), '') END"
    )


def column_name_sql(cell: str) -> str:
    """`cdcflow.events.cells.column_name` of a cell struct."""
    return f"concat({string_binary_sql(f'{cell}.family')}, ':', {string_binary_sql(f'{cell}.qualifier')})"


def visible_cells_sql(puts: str) -> str:
    """map<column, struct(value, ts, pos)>: each column's newest put (puts sorted newest first per column)."""
    newest = f"filter(vp, (p, i) -> CASE WHEN i = 0 THEN true ELSE NOT {_same_column('vp[i - 1]', 'p')} END)"
    visible = "named_struct('value', p.value, 'ts', p.ts, 'pos', p.pos)"
    entries = f"transform({newest}, p -> struct({column_name_sql('p')}, {visible}))"
    return _let("vp", puts, f"map_from_entries({entries})")


def _signed(hex_value: str, bits: int) -> str:
    unsigned = f"CAST(conv({hex_value}, 16, 10) AS DECIMAL(20, 0))"
    return f"CASE WHEN {unsigned} >= {2 ** (bits - 1)} THEN {unsigned} - {2**bits} ELSE {unsigned} END"


def _ieee(bits: str, exponent_bits: int, mantissa_bits: int) -> str:
    """The IEEE 754 value of an integer bit pattern (sign, exponent, mantissa), as a double."""
    bias = 2 ** (exponent_bits - 1) - 1
    max_exp = 2**exponent_bits - 1
    sign = f"CASE WHEN shiftrightunsigned({bits}, {exponent_bits + mantissa_bits}) & 1 = 1 THEN -1.0D ELSE 1.0D END"
    exponent = f"(shiftrightunsigned({bits}, {mantissa_bits}) & {max_exp})"
    mantissa = f"({bits} & {2**mantissa_bits - 1})"
    return (
        f"CASE WHEN {exponent} = {max_exp} THEN "
        f"CASE WHEN {mantissa} = 0 THEN {sign} * double('Infinity') ELSE double('NaN') END "
        f"WHEN {exponent} = 0 THEN {sign} * {mantissa} * power(2.0D, {1 - bias - mantissa_bits}) "
        f"ELSE {sign} * (1.0D + {mantissa} / power(2.0D, {mantissa_bits})) * power(2.0D, {exponent} - {bias}) END"
    )


def decode_value_sql(value: str, encoding: str) -> str:
    """A value's typed form as `DeltaStateSink` stores it (NULL when the bytes do not fit), like
    `cdcflow.events.json_codec.render_value` for the fixed-size encodings."""
    hex_value = f"hex({value})"
    if encoding == "base64":
        return value
    if encoding == "utf8":
        return f"CASE WHEN is_valid_utf8(CAST({value} AS STRING)) THEN CAST({value} AS STRING) END"
    if encoding == "boolean":
        return f"CASE WHEN length({value}) = 1 THEN {value} != X'00' END"
    widths = {"long": (8, "BIGINT"), "int": (4, "INT"), "short": (2, "SMALLINT")}
    if encoding in widths:
        size, sql_type = widths[encoding]
        return f"CASE WHEN length({value}) = {size} THEN CAST({_signed(hex_value, size * 8)} AS {sql_type}) END"
    if encoding == "double":
        bits = f"CAST(conv({hex_value}, 16, -10) AS BIGINT)"
        return f"CASE WHEN length({value}) = 8 THEN {_ieee(bits, 11, 52)} END"
    if encoding == "float":
        bits = f"CAST(conv({hex_value}, 16, 10) AS BIGINT)"
        return f"CASE WHEN length({value}) = 4 THEN CAST({_ieee(bits, 8, 23)} AS FLOAT) END"
    raise ValueError(f"unknown value encoding {encoding!r}")
