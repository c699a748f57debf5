//! cdcflow's compiled hot path: one ReplicateWALEntry call's cell block → change-event JSON records.
//!
//! The Python reference path (protocols/hbase/cellblock.py → sources/hbase/changes.py →
//! events/json_codec.py) defines the output; this module must write exactly the same bytes
//! (tests/unit/test_native_records.py compares the two on generated calls). Whenever the block is
//! malformed, holds a bulk-load marker, an unknown cell type or a record larger than asked for, it
//! returns None and the caller runs the Python path, which raises the precise error or builds the
//! events it needs.

mod debezium_avro;
mod hbase_results;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

const METAFAMILY: &[u8] = b"METAFAMILY";
const BULK_LOAD_QUALIFIER: &[u8] = b"HBASE::BULK_LOAD";
const PUT: u8 = 4;

struct CellRef<'a> {
    row: &'a [u8],
    family: &'a [u8],
    qualifier: &'a [u8],
    timestamp: i64,
    type_name: &'static str,
    value: &'a [u8],
    tags: &'a [u8],
    is_put: bool,
}

fn be_i32(b: &[u8], at: usize) -> i64 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as i64
}

fn type_name(code: u8) -> Option<&'static str> {
    match code {
        4 => Some("Put"),
        8 => Some("Delete"),
        10 => Some("DeleteFamilyVersion"),
        12 => Some("DeleteColumn"),
        14 => Some("DeleteFamily"),
        _ => None,
    }
}

/// The cell at `pos`, and where the next one starts; None on anything the Python decoder refuses.
fn cell_at(block: &[u8], pos: usize) -> Option<(CellRef<'_>, usize)> {
    let end = block.len();
    if end - pos < 12 {
        return None;
    }
    let (cell_len, key_len, value_len) = (be_i32(block, pos), be_i32(block, pos + 4), be_i32(block, pos + 8));
    let cell_end = pos as i64 + 4 + cell_len;
    if cell_len < 8 || cell_end > end as i64 {
        return None;
    }
    if key_len < 12 || value_len < 0 || 8 + key_len + value_len > cell_len {
        return None;
    }
    let cell_end = cell_end as usize;
    let k = pos + 12;
    let key_end = k + key_len as usize;
    let row_len = u16::from_be_bytes([block[k], block[k + 1]]) as usize;
    let fam_pos = k + 2 + row_len;
    if fam_pos + 1 > key_end {
        return None;
    }
    let qual_pos = fam_pos + 1 + block[fam_pos] as usize;
    let qual_end = key_end - 9;
    if qual_pos > qual_end {
        return None;
    }
    let code = block[key_end - 1];
    let type_name = type_name(code)?;
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&block[qual_end..qual_end + 8]);
    let tags_pos = key_end + value_len as usize;
    let tags: &[u8] = if tags_pos < cell_end {
        if cell_end - tags_pos < 2 {
            return None;
        }
        let tags_len = u16::from_be_bytes([block[tags_pos], block[tags_pos + 1]]) as usize;
        if tags_pos + 2 + tags_len != cell_end {
            return None;
        }
        &block[tags_pos + 2..cell_end]
    } else {
        b""
    };
    let cell = CellRef {
        row: &block[k + 2..fam_pos],
        family: &block[fam_pos + 1..qual_pos],
        qualifier: &block[qual_pos..qual_end],
        timestamp: i64::from_be_bytes(ts),
        type_name,
        value: &block[key_end..tags_pos],
        tags,
        is_put: code == PUT,
    };
    Some((cell, cell_end))
}

fn push_b64(out: &mut Vec<u8>, data: &[u8]) {
    let start = out.len();
    out.resize(start + base64::encoded_len(data.len(), true).unwrap_or(0), 0);
    let written = STANDARD.encode_slice(data, &mut out[start..]).unwrap_or(0);
    out.truncate(start + written);
}

fn push_int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(n.to_string().as_bytes());
}

fn push_cell(out: &mut Vec<u8>, c: &CellRef<'_>) {
    out.extend_from_slice(b"{\"family\":\"");
    push_b64(out, c.family);
    out.extend_from_slice(b"\",\"qualifier\":\"");
    push_b64(out, c.qualifier);
    out.extend_from_slice(b"\",\"ts\":");
    push_int(out, c.timestamp);
    out.extend_from_slice(b",\"type\":\"");
    out.extend_from_slice(c.type_name.as_bytes());
    out.extend_from_slice(b"\",\"value\":\"");
    push_b64(out, c.value);
    if !c.tags.is_empty() {
        out.extend_from_slice(b"\",\"tags\":\"");
        push_b64(out, c.tags);
    }
    out.extend_from_slice(b"\"}");
}

/// One record: (entry index, row key, JSON value, cell count).
type Record<'py> = (usize, Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize);

struct Writer<'a> {
    schema_id: &'a [u8],
    now_ms: i64,
    max_record: usize,
}

impl Writer<'_> {
    fn record(&self, row: &[u8], cells: &[CellRef<'_>], head: &[u8], index: usize, tail: &[u8]) -> Vec<u8> {
        let body: usize = cells.iter().map(|c| 96 + (c.family.len() + c.qualifier.len() + c.value.len() + c.tags.len()) * 4 / 3).sum();
        let mut out = Vec::with_capacity(body + head.len() + tail.len() + row.len() * 2 + 128);
        out.extend_from_slice(b"{\"schema\":\"");
        out.extend_from_slice(self.schema_id);
        out.extend_from_slice(if cells.iter().any(|c| c.is_put) { b"\",\"op\":\"u" } else { b"\",\"op\":\"d" });
        out.extend_from_slice(b"\",\"key\":{\"row\":\"");
        push_b64(&mut out, row);
        out.extend_from_slice(b"\"},\"before\":null,\"after\":null,\"source\":");
        out.extend_from_slice(head);
        push_int(&mut out, index as i64);
        out.extend_from_slice(tail);
        out.extend_from_slice(b",\"ts_ms\":");
        push_int(&mut out, self.now_ms);
        out.extend_from_slice(b",\"cells\":[");
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_cell(&mut out, c);
        }
        out.extend_from_slice(b"]}");
        out
    }
}

/// A record before it becomes Python objects: entry index, the row key's place in the block, JSON, cells.
type Built = (usize, (usize, usize), Vec<u8>, usize);

/// The records of a call's cell block (see `hbase_records`), in plain Rust: it runs without the GIL.
fn build_records(
    block: &[u8],
    entries: &[(usize, Option<(Vec<u8>, Vec<u8>)>)],
    writer: &Writer<'_>,
) -> Option<Vec<Built>> {
    let base = block.as_ptr() as usize;
    let place = |row: &[u8]| (row.as_ptr() as usize - base, row.len());
    let mut records = Vec::new();
    let mut pos = 0usize;
    let mut run: Vec<CellRef<'_>> = Vec::new();
    for (entry_index, (count, source)) in entries.iter().enumerate() {
        let mut index = 0usize;
        run.clear();
        for _ in 0..*count {
            if pos >= block.len() {
                return None; // fewer cells than announced
            }
            let (cell, next) = cell_at(block, pos)?;
            pos = next;
            if cell.family == METAFAMILY {
                if cell.qualifier == BULK_LOAD_QUALIFIER {
                    return None;
                }
                continue;
            }
            if source.is_none() {
                continue;
            }
            if let Some(first) = run.first() {
                if first.row != cell.row {
                    let (head, tail) = source.as_ref()?;
                    let value = writer.record(first.row, &run, head, index, tail);
                    if value.len() > writer.max_record {
                        return None;
                    }
                    records.push((entry_index, place(first.row), value, run.len()));
                    index += 1;
                    run.clear();
                }
            }
            run.push(cell);
        }
        if let (Some(first), Some((head, tail))) = (run.first(), source.as_ref()) {
            let value = writer.record(first.row, &run, head, index, tail);
            if value.len() > writer.max_record {
                return None;
            }
            records.push((entry_index, place(first.row), value, run.len()));
        }
    }
    if pos != block.len() {
        return None; // more cells than announced
    }
    Some(records)
}

/// Records for every row change of a call's routed entries, in WAL order, or None (see the module doc).
///
/// `entries`: per WAL entry, its cell count and, when it is routed, the `source` JSON around the row
/// index: `head` ends with `"pos":[SEQ,` and `tail` starts with `]`. Unrouted entries (None) are read
/// and checked but give no records. `max_record`: a record larger than this makes the answer None.
/// The block is read and the JSON written with the GIL released (the peer's event loop keeps reading
/// sockets and handing records to Kafka meanwhile); only the Python objects are made with it.
#[pyfunction]
#[pyo3(signature = (block, entries, schema_id, now_ms, max_record))]
fn hbase_records<'py>(
    py: Python<'py>,
    block: &[u8],
    entries: Vec<(usize, Option<(Vec<u8>, Vec<u8>)>)>,
    schema_id: &str,
    now_ms: i64,
    max_record: usize,
) -> Option<Vec<Record<'py>>> {
    let writer = Writer { schema_id: schema_id.as_bytes(), now_ms, max_record };
    let built = py.detach(|| build_records(block, &entries, &writer))?;
    Some(
        built
            .into_iter()
            .map(|(entry, (at, len), value, cells)| {
                (entry, PyBytes::new(py, &block[at..at + len]), PyBytes::new(py, &value), cells)
            })
            .collect(),
    )
}

#[pymodule]
#[pyo3(name = "_native")]
fn cdcflow_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hbase_records, m)?)?;
    m.add_function(wrap_pyfunction!(mysql_rows, m)?)?;
    m.add_function(wrap_pyfunction!(debezium_avro::debezium_avro_rows, m)?)?;
    m.add_function(wrap_pyfunction!(hbase_results::hbase_multi_results, m)?)?;
    Ok(())
}

// ---- MySQL/MariaDB rows events ------------------------------------------------------------------------
//
// The Python reference is sources/mysql/binlog/columns.py (one reader per column) and
// events.py `_read_row`; tests/unit/test_native_rows.py compares the two on generated rows. Only the
// column kinds below are decoded here; a table with any other column takes the Python path, and so
// does any event this code finds wrong (the Python path then raises the precise error).

const INT: u8 = 1;
const DOUBLE: u8 = 2;
const DECIMAL: u8 = 3;
const DATE: u8 = 4;
const DATETIME2: u8 = 5;
const TIMESTAMP2: u8 = 6;
const YEAR: u8 = 7;
const TEXT_UTF8: u8 = 8;
const TEXT_ASCII: u8 = 9;
const BINARY: u8 = 10;

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

fn take<'a>(buf: &'a [u8], off: usize, n: usize) -> Option<&'a [u8]> {
    if off.checked_add(n)? > buf.len() {
        return None;
    }
    Some(&buf[off..off + n])
}

fn uint_be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn uint_le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn frac_text(out: &mut String, micro: u64, fsp: usize) {
    if fsp > 0 {
        let text = format!(".{:06}", micro);
        out.push_str(&text[..(fsp + 1).min(text.len())]);
    }
}

fn decimal_text(raw_in: &[u8], precision: usize, scale: usize) -> Option<String> {
    let intg = precision - scale;
    let (intg0, intg0x) = (intg / 9, intg % 9);
    let (frac0, frac0x) = (scale / 9, scale % 9);
    let mut raw = raw_in.to_vec();
    let negative = raw[0] & 0x80 == 0;
    raw[0] ^= 0x80;
    if negative {
        for b in raw.iter_mut() {
            *b ^= 0xFF;
        }
    }
    let mut p = 0;
    let mut int_digits = String::new();
    if intg0x > 0 {
        let n = DIG2BYTES[intg0x];
        int_digits.push_str(&uint_be(&raw[p..p + n]).to_string());
        p += n;
    }
    for _ in 0..intg0 {
        int_digits.push_str(&format!("{:09}", uint_be(&raw[p..p + 4])));
        p += 4;
    }
    let mut frac_digits = String::new();
    for _ in 0..frac0 {
        frac_digits.push_str(&format!("{:09}", uint_be(&raw[p..p + 4])));
        p += 4;
    }
    if frac0x > 0 {
        let n = DIG2BYTES[frac0x];
        frac_digits.push_str(&format!("{:0width$}", uint_be(&raw[p..p + n]), width = frac0x));
    }
    let trimmed = int_digits.trim_start_matches('0');
    let mut text = String::from(if trimmed.is_empty() { "0" } else { trimmed });
    if scale > 0 {
        text.push('.');
        text.push_str(&frac_digits);
    }
    if text.len() > precision + 2 {
        return None; // a group above 999999999: not a decimal the server wrote
    }
    Some(if negative { format!("-{text}") } else { text })
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's civil_from_days).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn prefix_len(buf: &[u8], off: usize, prefix: usize) -> Option<(usize, usize)> {
    let n = uint_le(take(buf, off, prefix)?) as usize;
    let start = off + prefix;
    take(buf, start, n)?;
    Some((start, n))
}

/// One column value at `off`: (Python value, new offset), or None when the bytes are wrong.
fn read_value<'py>(py: Python<'py>, buf: &[u8], off: usize, spec: &(u8, usize, usize)) -> Option<(Bound<'py, PyAny>, usize)> {
    let (kind, a, b) = *spec;
    match kind {
        INT => {
            let raw = take(buf, off, a)?;
            let value = uint_le(raw);
            let obj = if b == 1 {
                value.into_pyobject(py).ok()?.into_any()
            } else {
                let shift = 64 - 8 * a as u32;
                (((value << shift) as i64) >> shift).into_pyobject(py).ok()?.into_any()
            };
            Some((obj, off + a))
        }
        DOUBLE => {
            let raw = take(buf, off, 8)?;
            let v = f64::from_le_bytes(raw.try_into().ok()?);
            Some((v.into_pyobject(py).ok()?.into_any(), off + 8))
        }
        DECIMAL => {
            let (precision, scale) = (a, b);
            let intg = precision - scale;
            let size = (intg / 9) * 4 + DIG2BYTES[intg % 9] + (scale / 9) * 4 + DIG2BYTES[scale % 9];
            let text = decimal_text(take(buf, off, size)?, precision, scale)?;
            Some((text.into_pyobject(py).ok()?.into_any(), off + size))
        }
        DATE => {
            let v = uint_le(take(buf, off, 3)?);
            let text = format!("{:04}-{:02}-{:02}", v >> 9, (v >> 5) & 15, v & 31);
            Some((text.into_pyobject(py).ok()?.into_any(), off + 3))
        }
        DATETIME2 => {
            let (fsp, nfrac) = (a, (a + 1) / 2);
            let packed = uint_be(take(buf, off, 5 + nfrac)?.get(..5)?) as i64 - 0x80_0000_0000;
            if packed < 0 {
                return None;
            }
            let scale = [0u64, 10000, 100, 1][nfrac];
            let micro = if nfrac > 0 { uint_be(&buf[off + 5..off + 5 + nfrac]) * scale } else { 0 };
            let (ymd, hms) = (packed >> 17, packed & 0x1FFFF);
            let (ym, day) = (ymd >> 5, ymd & 31);
            let (year, month) = (ym / 13, ym % 13);
            let mut text = format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", year, month, day, hms >> 12, (hms >> 6) & 63, hms & 63);
            frac_text(&mut text, micro, fsp);
            Some((text.into_pyobject(py).ok()?.into_any(), off + 5 + nfrac))
        }
        TIMESTAMP2 => {
            let (fsp, nfrac) = (a, (a + 1) / 2);
            let seconds = uint_be(take(buf, off, 4 + nfrac)?.get(..4)?) as i64;
            let scale = [0u64, 10000, 100, 1][nfrac];
            let micro = if nfrac > 0 { uint_be(&buf[off + 4..off + 4 + nfrac]) * scale } else { 0 };
            let text = if seconds == 0 && micro == 0 {
                String::from("0000-00-00T00:00:00Z")
            } else {
                let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
                let s = seconds.rem_euclid(86_400);
                let mut t = format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", y, m, d, s / 3600, s / 60 % 60, s % 60);
                frac_text(&mut t, micro, fsp);
                t.push('Z');
                t
            };
            Some((text.into_pyobject(py).ok()?.into_any(), off + 4 + nfrac))
        }
        YEAR => {
            let v = *take(buf, off, 1)?.first()? as i64;
            Some(((if v != 0 { 1900 + v } else { 0 }).into_pyobject(py).ok()?.into_any(), off + 1))
        }
        TEXT_UTF8 | TEXT_ASCII => {
            let (start, n) = prefix_len(buf, off, a)?;
            let raw = &buf[start..start + n];
            if kind == TEXT_ASCII && !raw.is_ascii() {
                return None;
            }
            let text = std::str::from_utf8(raw).ok()?;
            Some((text.into_pyobject(py).ok()?.into_any(), start + n))
        }
        BINARY => {
            let (start, n) = prefix_len(buf, off, a)?;
            let mut raw = buf[start..start + n].to_vec();
            if b > 0 && raw.len() < b {
                raw.resize(b, 0); // BINARY(n): the binlog drops trailing zero bytes
            }
            Some((STANDARD.encode(&raw).into_pyobject(py).ok()?.into_any(), start + n))
        }
        _ => None,
    }
}

fn read_row<'py>(
    py: Python<'py>, buf: &[u8], mut p: usize, present: &[usize], names: &[Bound<'py, PyString>],
    specs: &[(u8, usize, usize)],
) -> Option<(Bound<'py, PyDict>, usize)> {
    let n = present.len();
    let nbytes = n.div_ceil(8);
    let nulls = take(buf, p, nbytes)?;
    p += nbytes;
    let row = PyDict::new(py);
    for (i, &col) in present.iter().enumerate() {
        if nulls[i / 8] >> (i % 8) & 1 == 1 {
            row.set_item(&names[col], py.None()).ok()?;
        } else {
            let (value, next) = read_value(py, buf, p, &specs[col])?;
            row.set_item(&names[col], value).ok()?;
            p = next;
        }
    }
    Some((row, p))
}

/// The rows of one rows event from `p` on, as (before, after) pairs of dicts, or None (see above).
/// `kind`: 0 insert, 1 delete, 2 update. `columns`: per table column, (name, kind, a, b).
#[pyfunction]
#[pyo3(signature = (body, p, kind, columns, present, present_after))]
fn mysql_rows<'py>(
    py: Python<'py>,
    body: &[u8],
    p: usize,
    kind: u8,
    columns: Vec<(Bound<'py, PyString>, u8, usize, usize)>,
    present: Vec<usize>,
    present_after: Vec<usize>,
) -> Option<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let names: Vec<Bound<'py, PyString>> = columns.iter().map(|c| c.0.clone()).collect();
    let specs: Vec<(u8, usize, usize)> = columns.iter().map(|c| (c.1, c.2, c.3)).collect();
    if present.is_empty() || present_after.is_empty() || present.iter().chain(present_after.iter()).any(|&i| i >= specs.len()) {
        return None; // a row of no columns takes no bytes: the loop would never end
    }
    let mut rows = Vec::new();
    let mut p = p;
    let end = body.len();
    while p < end {
        let (first, next) = read_row(py, body, p, &present, &names, &specs)?;
        p = next;
        match kind {
            0 => rows.push((py.None().into_bound(py), first.into_any())),
            1 => rows.push((first.into_any(), py.None().into_bound(py))),
            _ => {
                let (second, next) = read_row(py, body, p, &present_after, &names, &specs)?;
                p = next;
                rows.push((first.into_any(), second.into_any()));
            }
        }
    }
    if p != end {
        return None;
    }
    Some(rows)
}
