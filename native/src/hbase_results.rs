//! The HBase client's multi-get answers: a MultiResponse's cells straight from its protobuf bytes.
//!
//! The Python reference is clients/hbase/native.py's `get_rows` (upb parses the MultiResponse, then
//! `cell_from_proto` makes each Cell); tests/unit/test_native_multi_results.py holds the two equal on
//! generated responses. Tags are left out, as cell_from_proto leaves them. Only answers of plain results are read here: a region action or a result that
//! carries an exception, a result announcing cells in a cell block, a partial result, a cell type it does
//! not know or bytes that are not a MultiResponse give None, and the caller parses the answer in Python
//! (which raises the region's error, or the precise parse error).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};

struct Wire<'a> {
    buf: &'a [u8],
    at: usize,
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

impl<'a> Wire<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Wire { buf, at: 0 }
    }

    fn varint(&mut self) -> Option<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.at)?;
            self.at += 1;
            if shift == 63 && b > 1 {
                return None; // more than 64 bits
            }
            out |= ((b & 0x7F) as u64) << shift;
            if b & 0x80 == 0 {
                return Some(out);
            }
        }
        None
    }

    /// The next (field number, value), None at the end; Some(Err) for bytes that are not protobuf.
    fn next(&mut self) -> Option<Result<(u64, Field<'a>), ()>> {
        if self.at >= self.buf.len() {
            return None;
        }
        Some(self.field().ok_or(()))
    }

    fn field(&mut self) -> Option<(u64, Field<'a>)> {
        let key = self.varint()?;
        if key >> 3 == 0 || key >> 3 > (1 << 29) - 1 {
            return None; // field numbers are 1 to 2^29-1
        }
        let value = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => {
                self.skip(8)?;
                Field::Other
            }
            2 => {
                let n = usize::try_from(self.varint()?).ok()?;
                let start = self.at;
                self.skip(n)?;
                Field::Bytes(&self.buf[start..start + n])
            }
            5 => {
                self.skip(4)?;
                Field::Other
            }
            _ => return None, // groups: not in these messages
        };
        Some((key >> 3, value))
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.at.checked_add(n)?;
        if end > self.buf.len() {
            return None;
        }
        self.at = end;
        Some(())
    }
}

/// The bytes objects the cells of one result share: its row, the last family, an empty tags value (a row's
/// cells repeat them: one object each instead of one per cell).
struct Shared<'a, 'py> {
    row: Option<(&'a [u8], Bound<'py, PyAny>)>,
    family: Option<(&'a [u8], Bound<'py, PyAny>)>,
    empty: Bound<'py, PyAny>,
}

fn shared<'a, 'py>(py: Python<'py>, held: &mut Option<(&'a [u8], Bound<'py, PyAny>)>, data: &'a [u8]) -> Bound<'py, PyAny> {
    match held {
        Some((bytes, object)) if *bytes == data => object.clone(),
        _ => {
            let object = PyBytes::new(py, data).into_any();
            *held = Some((data, object.clone()));
            object
        }
    }
}

/// One hbase.pb.Cell as a cdcflow Cell (row, family, qualifier, timestamp, type, value, tags).
fn cell<'a, 'py>(py: Python<'py>, data: &'a [u8], cell_cls: &Bound<'py, PyType>, types: &Bound<'py, PyDict>,
                 held: &mut Shared<'a, 'py>) -> Option<Bound<'py, PyAny>> {
    let (mut row, mut family, mut qualifier, mut value): (&[u8], &[u8], &[u8], &[u8]) = (b"", b"", b"", b"");
    let (mut timestamp, mut kind) = (0u64, 0u64);
    let mut wire = Wire::new(data);
    while let Some(next) = wire.next() {
        match next.ok()? {
            (1, Field::Bytes(b)) => row = b,
            (2, Field::Bytes(b)) => family = b,
            (3, Field::Bytes(b)) => qualifier = b,
            (4, Field::Varint(v)) => timestamp = v,
            (5, Field::Varint(v)) => kind = v,
            (6, Field::Bytes(b)) => value = b,
            (1..=3 | 6, Field::Varint(_) | Field::Other) => return None,
            (4 | 5, Field::Bytes(_) | Field::Other) => return None,
            _ => {}
        }
    }
    let cell_type = types.get_item(kind).ok()??;
    let items = [
        shared(py, &mut held.row, row), shared(py, &mut held.family, family), PyBytes::new(py, qualifier).into_any(),
        timestamp.into_pyobject(py).ok()?.into_any(), cell_type, PyBytes::new(py, value).into_any(),
        held.empty.clone(),
    ];
    named_tuple(py, cell_cls, items)
}

/// An instance of `cls`, a named tuple (a tuple subclass without instance dict), holding `items`: what
/// `tuple.__new__(cls, items)` makes, without going through a Python call per cell.
fn named_tuple<'py, const N: usize>(py: Python<'py>, cls: &Bound<'py, PyType>, items: [Bound<'py, PyAny>; N]) -> Option<Bound<'py, PyAny>> {
    // SAFETY: the caller checked that `cls` is a subclass of tuple (cell_class); a fresh object from tp_alloc
    // has a reference count of 1 and N empty slots, each filled once with a reference it takes over.
    unsafe {
        let obj = pyo3::ffi::PyType_GenericAlloc(cls.as_type_ptr(), N as pyo3::ffi::Py_ssize_t);
        if obj.is_null() {
            return None;
        }
        let obj = Bound::from_owned_ptr(py, obj);
        for (i, item) in items.into_iter().enumerate() {
            if pyo3::ffi::PyTuple_SetItem(obj.as_ptr(), i as pyo3::ffi::Py_ssize_t, item.into_ptr()) != 0 {
                return None;
            }
        }
        Some(obj)
    }
}

/// A Result's cells; None for anything but a whole result of protobuf cells.
fn result<'py>(py: Python<'py>, data: &[u8], cell_cls: &Bound<'py, PyType>,
               types: &Bound<'py, PyDict>) -> Option<Bound<'py, PyList>> {
    let cells = PyList::empty(py);
    let mut held = Shared { row: None, family: None, empty: PyBytes::new(py, b"").into_any() };
    let mut wire = Wire::new(data);
    while let Some(next) = wire.next() {
        match next.ok()? {
            (1, Field::Bytes(b)) => cells.append(cell(py, b, cell_cls, types, &mut held)?).ok()?,
            (2, Field::Varint(n)) if n > 0 => return None, // cells in a cell block
            (5, Field::Varint(partial)) if partial != 0 => return None,
            (1 | 2 | 5, Field::Other | Field::Bytes(_)) => return None,
            _ => {} // exists, stale, cursor: not read
        }
    }
    Some(cells)
}

/// Per RegionActionResult of a MultiResponse, its (action index, cells) pairs; None: parse it in Python.
/// `cell_cls` is the Cell class (a named tuple of 7 fields); `types` maps a cell type's code to its CellType.
#[pyfunction]
pub fn hbase_multi_results<'py>(
    py: Python<'py>,
    body: &[u8],
    cell_class: &Bound<'py, PyType>,
    types: &Bound<'py, PyDict>,
) -> PyResult<Option<Vec<Vec<(u64, Bound<'py, PyList>)>>>> {
    let cell_cls = named_tuple_class(cell_class, 7)?;
    Ok(multi_results(py, body, cell_cls, types))
}

/// `cls` if it is a tuple subclass laid out as a tuple (a named tuple of `fields` fields), else a TypeError.
fn named_tuple_class<'a, 'py>(cls: &'a Bound<'py, PyType>, fields: usize) -> PyResult<&'a Bound<'py, PyType>> {
    let tuple_size = cls.py().get_type::<PyTuple>().getattr("__basicsize__")?.extract::<isize>()?;
    let plain = cls.is_subclass_of::<PyTuple>()?
        && cls.getattr("__basicsize__")?.extract::<isize>()? == tuple_size
        && cls.hasattr("_fields")?
        && cls.getattr("_fields")?.len()? == fields;
    if !plain {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!("expected a named tuple of {fields} fields")));
    }
    Ok(cls)
}

fn multi_results<'py>(
    py: Python<'py>,
    body: &[u8],
    cell_cls: &Bound<'py, PyType>,
    types: &Bound<'py, PyDict>,
) -> Option<Vec<Vec<(u64, Bound<'py, PyList>)>>> {
    let mut out = Vec::new();
    let mut wire = Wire::new(body);
    while let Some(next) = wire.next() {
        match next.ok()? {
            (1, Field::Bytes(region)) => {
                let mut results = Vec::new();
                let mut region_wire = Wire::new(region);
                while let Some(item) = region_wire.next() {
                    match item.ok()? {
                        (1, Field::Bytes(roe)) => {
                            let (mut index, mut cells) = (None, None);
                            let mut roe_wire = Wire::new(roe);
                            while let Some(part) = roe_wire.next() {
                                match part.ok()? {
                                    (1, Field::Varint(i)) => index = Some(i),
                                    (2, Field::Bytes(r)) if cells.is_none() => {
                                        cells = Some(result(py, r, cell_cls, types)?)
                                    }
                                    (3, _) => return None, // the action failed: the Python path raises it
                                    (1 | 2, _) => return None,
                                    _ => {}
                                }
                            }
                            results.push((index?, cells.unwrap_or_else(|| PyList::empty(py))));
                        }
                        (2, _) => return None, // the whole region action failed
                        (1, _) => return None,
                        _ => {}
                    }
                }
                out.push(results);
            }
            (1, _) => return None,
            _ => {} // processed, regionStatistics
        }
    }
    Some(out)
}
