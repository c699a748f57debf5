//! cdcflow's compiled hot path: one ReplicateWALEntry call's cell block → change-event JSON records.
//!
//! The Python reference path (protocols/hbase/cellblock.py → sources/hbase/changes.py →
//! events/json_codec.py) defines the output; this module must write exactly the same bytes
//! (tests/unit/test_native_records.py compares the two on generated calls). Whenever the block is
//! malformed, holds a bulk-load marker, an unknown cell type or a record larger than asked for, it
//! returns None and the caller runs the Python path, which raises the precise error or builds the
//! events it needs.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

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

/// Records for every row change of a call's routed entries, in WAL order, or None (see the module doc).
///
/// `entries`: per WAL entry, its cell count and, when it is routed, the `source` JSON around the row
/// index: `head` ends with `"pos":[SEQ,` and `tail` starts with `]`. Unrouted entries (None) are read
/// and checked but give no records. `max_record`: a record larger than this makes the answer None.
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
                    records.push((entry_index, PyBytes::new(py, first.row), PyBytes::new(py, &value), run.len()));
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
            records.push((entry_index, PyBytes::new(py, first.row), PyBytes::new(py, &value), run.len()));
        }
    }
    if pos != block.len() {
        return None; // more cells than announced
    }
    Some(records)
}

#[pymodule]
fn cdcflow_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hbase_records, m)?)?;
    Ok(())
}
