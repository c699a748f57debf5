//! The MySQL capture's `debezium` output in Avro: a rows event's Kafka records straight from its row dicts.
//!
//! The Python reference is events/debezium/columns.py (each column's conversion from the cdcflow value to
//! Debezium's) with avro.py's `AvroTable` (the key, and the envelope around the row images, in Confluent's
//! framing); sources/mysql/debezium_records.py decides the records (a delete's tombstone, a key change as a
//! delete and a create). tests/unit/test_native_debezium_avro.py holds the two equal on generated rows.
//! Only values in the exact form the capture renders them are converted here: for anything else (a value
//! of another type or spelling, a NULL in a column that cannot hold one, a DECIMAL wider than 38 digits)
//! the function answers None and the caller runs the Python path, which converts it or raises the precise
//! error.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};

// How a column's value becomes Debezium's (the `kind` of a plan entry; avro_native.py makes the plan).
const LONG: u8 = 1; // Connect int8/16/32/64: an Avro int (a = 1: 32 bits) or long, the same zigzag varint
const FLOAT: u8 = 2; // float32
const DOUBLE: u8 = 3;
const STRING: u8 = 4; // strings, ENUM, SET, JSON, DECIMAL in `string` mode
const UNSIGNED_LONG: u8 = 5; // BIGINT UNSIGNED in `long` mode: above 2^63-1 wraps around
const DECIMAL: u8 = 6; // Connect's Decimal: the unscaled value's bytes; a = scale
const DECIMAL_DOUBLE: u8 = 7;
const DATE: u8 = 8; // days since the epoch
const DATETIME: u8 = 9; // a = 1: milliseconds (DATETIME(0-3)), 0: microseconds
const ZONED_TIMESTAMP: u8 = 10; // a = fractional digits
const TIME: u8 = 11; // microseconds
const BASE64_BYTES: u8 = 12; // cdcflow's base64 text -> the bytes
const BIT_BOOLEAN: u8 = 13; // BIT(1)
const BITS: u8 = 14; // BIT(n): a = ceil(n/8) bytes, little-endian
const GEOMETRY: u8 = 15; // {wkb, srid}

fn put_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z > 0x7F {
        out.push((z & 0x7F) as u8 | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_bytes(out: &mut Vec<u8>, data: &[u8]) {
    put_long(out, data.len() as i64);
    out.extend_from_slice(data);
}

fn digits(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0i64, |acc, &d| acc * 10 + (d - b'0') as i64))
}

/// Days since 1970-01-01 of a valid proleptic Gregorian date with a year in 1-9999 (Python's date range).
fn days_from_civil(y: i64, m: i64, d: i64) -> Option<i64> {
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) {
        return None;
    }
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][(m - 1) as usize];
    if d < 1 || d > month_days {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// "YYYY-MM-DD" -> (y, m, d), digits and dashes exactly where the capture writes them.
fn date_parts(s: &[u8]) -> Option<(i64, i64, i64)> {
    if s.len() < 10 || s[4] != b'-' || s[7] != b'-' {
        return None;
    }
    Some((digits(&s[0..4])?, digits(&s[5..7])?, digits(&s[8..10])?))
}

/// ".f" (1-6 digits) -> microseconds.
fn fraction(s: &[u8]) -> Option<i64> {
    if s.len() < 2 || s.len() > 7 || s[0] != b'.' {
        return None;
    }
    let f = digits(&s[1..])?;
    Some(f * 10i64.pow((7 - s.len()) as u32))
}

/// "[-]digits[.digits]" with exactly `scale` decimals -> the unscaled value (up to 38 digits).
fn unscaled(s: &[u8], scale: usize) -> Option<i128> {
    let (negative, body) = if s.first() == Some(&b'-') { (true, &s[1..]) } else { (false, s) };
    let (whole, frac) = match body.iter().position(|&c| c == b'.') {
        Some(at) => (&body[..at], &body[at + 1..]),
        None => (body, &body[body.len()..]),
    };
    if whole.is_empty() || frac.len() != scale || whole.len() + frac.len() > 38 {
        return None;
    }
    if !whole.iter().chain(frac.iter()).all(u8::is_ascii_digit) {
        return None;
    }
    let n = whole.iter().chain(frac.iter()).fold(0i128, |acc, &d| acc * 10 + (d - b'0') as i128);
    Some(if negative { -n } else { n })
}

/// Java's BigInteger.toByteArray: big-endian two's complement in the fewest bytes.
fn twos_complement(n: i128) -> Vec<u8> {
    let magnitude = if n >= 0 { n } else { !n };
    let size = (128 - magnitude.leading_zeros() as usize) / 8 + 1;
    n.to_be_bytes()[16 - size..].to_vec()
}

fn strict_float(s: &[u8]) -> Option<f64> {
    let body = if s.first() == Some(&b'-') { &s[1..] } else { s };
    let mut parts = body.splitn(2, |&c| c == b'.');
    let whole = parts.next()?;
    if whole.is_empty() || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if let Some(frac) = parts.next() {
        if frac.is_empty() || !frac.iter().all(u8::is_ascii_digit) {
            return None;
        }
    }
    std::str::from_utf8(s).ok()?.parse::<f64>().ok()
}

fn text<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a [u8]> {
    Some(value.cast::<PyString>().ok()?.to_str().ok()?.as_bytes())
}

/// An int, not a bool (fastavro refuses a bool for an int or long in a union, writes it elsewhere: the Python
/// path decides).
fn int<'a, 'py>(value: &'a Bound<'py, PyAny>) -> Option<&'a Bound<'py, PyInt>> {
    if value.is_instance_of::<PyBool>() {
        return None;
    }
    value.cast::<PyInt>().ok()
}

/// Writes one non-null value of a column; Some(false): Debezium has null for it (MariaDB's zero dates).
fn put_value(out: &mut Vec<u8>, value: &Bound<'_, PyAny>, kind: u8, a: i64) -> Option<bool> {
    match kind {
        LONG => {
            let v = int(value)?.extract::<i64>().ok()?;
            if a == 1 && i32::try_from(v).is_err() {
                return None; // fastavro refuses it in a union, writes it elsewhere: the Python path decides
            }
            put_long(out, v);
        }
        FLOAT => {
            let v = value.cast::<PyFloat>().ok()?.value();
            let narrow = v as f32;
            if v.is_finite() && !narrow.is_finite() {
                return None; // Python's struct refuses it
            }
            out.extend_from_slice(&narrow.to_le_bytes());
        }
        DOUBLE => out.extend_from_slice(&value.cast::<PyFloat>().ok()?.value().to_le_bytes()),
        STRING => put_bytes(out, text(value)?),
        UNSIGNED_LONG => {
            let n = int(value)?;
            let wrapped = match n.extract::<i64>() {
                Ok(v) => v,
                Err(_) => n.extract::<u64>().ok()? as i64,
            };
            put_long(out, wrapped);
        }
        DECIMAL => put_bytes(out, &twos_complement(unscaled(text(value)?, a as usize)?)),
        DECIMAL_DOUBLE => out.extend_from_slice(&strict_float(text(value)?)?.to_le_bytes()),
        DATE => {
            let s = text(value)?;
            let (y, m, d) = date_parts(s)?;
            if s.len() != 10 {
                return None;
            }
            if y == 0 || m == 0 || d == 0 {
                return Some(false);
            }
            put_long(out, days_from_civil(y, m, d)?);
        }
        DATETIME => {
            let s = text(value)?;
            let (y, m, d) = date_parts(s)?;
            if s.len() < 19 || s[10] != b' ' || s[13] != b':' || s[16] != b':' {
                return None;
            }
            if y == 0 || m == 0 || d == 0 {
                return Some(false);
            }
            let (hh, mm, ss) = (digits(&s[11..13])?, digits(&s[14..16])?, digits(&s[17..19])?);
            let micros = if s.len() > 19 { fraction(&s[19..])? } else { 0 };
            let total = (days_from_civil(y, m, d)? * 86_400 + hh * 3600 + mm * 60 + ss) * 1_000_000 + micros;
            put_long(out, if a == 1 { total.div_euclid(1000) } else { total });
        }
        ZONED_TIMESTAMP => {
            let s = text(value)?;
            if s.starts_with(b"0000-00-00") {
                let mut zero = String::from("1970-01-01T00:00:00");
                if a > 0 {
                    zero.push('.');
                    zero.push_str(&"0".repeat(a as usize));
                }
                zero.push('Z');
                put_bytes(out, zero.as_bytes());
            } else {
                put_bytes(out, s);
            }
        }
        TIME => {
            let s = text(value)?;
            let (negative, body) = if s.first() == Some(&b'-') { (true, &s[1..]) } else { (false, s) };
            let (clock, frac) = match body.iter().position(|&c| c == b'.') {
                Some(at) => (&body[..at], fraction(&body[at..])?),
                None => (body, 0),
            };
            let mut parts = clock.split(|&c| c == b':');
            let (hh, mm, ss) = (digits(parts.next()?)?, digits(parts.next()?)?, digits(parts.next()?)?);
            if parts.next().is_some() {
                return None;
            }
            let micros = (hh * 3600 + mm * 60 + ss) * 1_000_000 + frac;
            put_long(out, if negative { -micros } else { micros });
        }
        BASE64_BYTES => put_bytes(out, &STANDARD.decode(text(value)?).ok()?),
        BIT_BOOLEAN => out.push((value.cast::<PyInt>().ok()?.extract::<i128>().ok()? != 0) as u8),
        BITS => {
            let v = value.cast::<PyInt>().ok()?.extract::<u64>().ok()?;
            let size = a as usize;
            if size == 0 || size > 8 || (size < 8 && v >> (8 * size) != 0) {
                return None;
            }
            put_bytes(out, &v.to_le_bytes()[..size]);
        }
        GEOMETRY => {
            let raw = STANDARD.decode(text(value)?).ok()?;
            if raw.len() < 4 {
                return None;
            }
            put_bytes(out, &raw[4..]);
            let srid = u32::from_le_bytes(raw[..4].try_into().ok()?);
            if srid > i32::MAX as u32 {
                return None; // an Avro int: fastavro refuses it
            }
            if srid == 0 {
                out.push(0);
            } else {
                out.push(2);
                put_long(out, srid as i64);
            }
        }
        _ => return None,
    }
    Some(true)
}

/// One column of a plan: the key its value has in the row dict, its kind, whether it may be null, a parameter.
type Column<'py> = (Bound<'py, PyString>, u8, bool, i64);

/// A row image as the Avro record of its columns (no union branch in front).
fn put_row(out: &mut Vec<u8>, row: &Bound<'_, PyDict>, plan: &[Column<'_>]) -> Option<()> {
    for (name, kind, optional, a) in plan {
        let value = row.get_item(name).ok()?;
        let mark = out.len();
        if *optional {
            out.push(2);
        }
        let written = match &value {
            Some(v) if !v.is_none() => put_value(out, v, *kind, *a)?,
            _ => false,
        };
        if !written {
            if !*optional {
                if *kind == DATE || *kind == DATETIME {
                    if value.as_ref().is_some_and(|v| !v.is_none()) {
                        out.truncate(mark);
                        put_long(out, 0); // a zero date where null cannot go: the epoch, as Debezium writes
                        continue;
                    }
                }
                return None; // null where the schema has no null: the Python path says which column
            }
            out.truncate(mark);
            out.push(0);
        }
    }
    Some(())
}

/// What the records of one rows event share, written once per event.
struct Frame<'a> {
    value_header: &'a [u8],
    key_header: Option<&'a [u8]>,
    source_head: Vec<u8>, // `source` up to `row`
    pos_head: Vec<u8>,    // from `row` to the last part of `cdcflow_pos`
    transaction_id: &'a str,
    times: Vec<u8>,
}

impl Frame<'_> {
    fn value(&self, before: Option<&[u8]>, after: Option<&[u8]>, op: u8, index: i64, order: i64, table_order: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.value_header.len() + before.map_or(1, |b| b.len() + 1) + after.map_or(1, |a| a.len() + 1) + 192,
        );
        out.extend_from_slice(self.value_header);
        for image in [before, after] {
            match image {
                None => out.push(0),
                Some(bytes) => {
                    out.push(2);
                    out.extend_from_slice(bytes);
                }
            }
        }
        out.extend_from_slice(&self.source_head);
        put_long(&mut out, index); // row
        out.extend_from_slice(&self.pos_head);
        put_long(&mut out, index);
        out.push(0); // the end of cdcflow_pos
        out.push(2);
        put_bytes(&mut out, self.transaction_id.as_bytes());
        put_long(&mut out, order);
        put_long(&mut out, table_order);
        out.extend_from_slice(&[2, op]);
        out.extend_from_slice(&self.times);
        out
    }
}

fn image_bytes(image: &Bound<'_, PyAny>, plan: &[Column<'_>]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    put_row(&mut out, image.cast::<PyDict>().ok()?, plan)?;
    Some(out)
}

fn key_bytes(frame: &Frame<'_>, image: &Bound<'_, PyAny>, key_plan: &[Column<'_>]) -> Option<Option<Vec<u8>>> {
    let Some(header) = frame.key_header else { return Some(None) };
    let mut out = header.to_vec();
    put_row(&mut out, image.cast::<PyDict>().ok()?, key_plan)?;
    Some(Some(out))
}

/// The records of one rows event: (key, value, image) per record, value None for a tombstone, image the
/// row dict the record's identity comes from (`with_images`; else b"", no identity), plus the transaction's
/// event count and the table's after them. `kind`: 0 insert, 1 delete, 2 update. `source_prefix`: `source`'s
/// version, connector and name; `source_db`: its snapshot, db and sequence; `source_table`: its table (all
/// Avro-encoded by the caller, they do not change within a table). `order`, `table_order`: the counts
/// before this event. None: the caller runs the Python path (see above).
#[pyfunction]
#[pyo3(signature = (rows, kind, plan, key_plan, value_header, key_header, source_prefix, source_db, source_table,
                    ts_ms, server_id, gtid, file, pos, seq, event_index, transaction_id, order, table_order, now_us,
                    tombstones, with_images))]
#[allow(clippy::too_many_arguments)]
pub fn debezium_avro_rows<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyAny>,
    kind: u8,
    plan: Vec<Column<'py>>,
    key_plan: Vec<Column<'py>>,
    value_header: &[u8],
    key_header: Option<&[u8]>,
    source_prefix: &[u8],
    source_db: &[u8],
    source_table: &[u8],
    ts_ms: i64,
    server_id: i64,
    gtid: Option<&str>,
    file: &str,
    pos: i64,
    seq: i64,
    event_index: i64,
    transaction_id: &str,
    order: i64,
    table_order: i64,
    now_us: i64,
    tombstones: bool,
    with_images: bool,
) -> Option<(Vec<(Option<Bound<'py, PyBytes>>, Option<Bound<'py, PyBytes>>, Bound<'py, PyAny>)>, i64, i64)> {
    let mut source_head = source_prefix.to_vec();
    put_long(&mut source_head, ts_ms);
    source_head.extend_from_slice(source_db);
    source_head.push(2);
    put_long(&mut source_head, ts_ms.checked_mul(1000)?); // ts_us
    source_head.push(2);
    put_long(&mut source_head, ts_ms.checked_mul(1_000_000)?); // ts_ns
    source_head.extend_from_slice(source_table);
    put_long(&mut source_head, server_id);
    match gtid {
        None => source_head.push(0),
        Some(g) => {
            source_head.push(2);
            put_bytes(&mut source_head, g.as_bytes());
        }
    }
    put_bytes(&mut source_head, file.as_bytes());
    put_long(&mut source_head, pos);
    // after `row`: thread and query null, then cdcflow_pos, an array of one block of 3
    let mut pos_head = vec![0, 0, 2, 6];
    put_long(&mut pos_head, seq);
    put_long(&mut pos_head, event_index);
    let mut times = vec![2];
    put_long(&mut times, now_us.div_euclid(1000));
    times.push(2);
    put_long(&mut times, now_us);
    times.push(2);
    put_long(&mut times, now_us.checked_mul(1000)?);
    let frame = Frame { value_header, key_header, source_head, pos_head, transaction_id, times };
    let rows = rows.cast::<PyTuple>().ok()?; // RowsEvent.rows: a tuple of (before, after) pairs
    let (mut order, mut table_order) = (order, table_order);
    let mut out = Vec::with_capacity(rows.len() * if kind == 1 && tombstones { 2 } else { 1 });
    let no_image = PyBytes::new(py, b"").into_any();
    let tombstones = tombstones && key_header.is_some();
    for (index, pair) in rows.iter().enumerate() {
        let pair = pair.cast::<PyTuple>().ok()?;
        if pair.len() != 2 {
            return None;
        }
        let (before, after) = (pair.get_item(0).ok()?, pair.get_item(1).ok()?);
        let index = index as i64;
        let mut emit = |op: u8, image: &Bound<'py, PyAny>, before: Option<&[u8]>, after: Option<&[u8]>,
                        key: &Option<Vec<u8>>| {
            order += 1;
            table_order += 1;
            let key = key.as_ref().map(|k| PyBytes::new(py, k));
            let value = frame.value(before, after, op, index, order, table_order);
            let image = if with_images { image.clone() } else { no_image.clone() };
            out.push((key.clone(), Some(PyBytes::new(py, &value)), image.clone()));
            if op == b'd' && tombstones {
                out.push((key, None, image));
            }
        };
        match kind {
            0 => {
                let image = image_bytes(&after, &plan)?;
                emit(b'c', &after, None, Some(&image), &key_bytes(&frame, &after, &key_plan)?);
            }
            1 => {
                let image = image_bytes(&before, &plan)?;
                emit(b'd', &before, Some(&image), None, &key_bytes(&frame, &before, &key_plan)?);
            }
            _ => {
                let (old, new) = (image_bytes(&before, &plan)?, image_bytes(&after, &plan)?);
                let (old_key, new_key) = (key_bytes(&frame, &before, &key_plan)?, key_bytes(&frame, &after, &key_plan)?);
                if old_key == new_key {
                    emit(b'u', &after, Some(&old), Some(&new), &new_key);
                } else {
                    emit(b'd', &before, Some(&old), None, &old_key);
                    emit(b'c', &after, None, Some(&new), &new_key);
                }
            }
        }
    }
    Some((out, order, table_order))
}
