//! The disk engine's catalog: every table's name and schema, in creation order, in one
//! file replaced whole when a table is created.
//!
//! # Format (`DISK_CATALOG`)
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `VERSODC\0` |
//! | 8..12 | format version (u32 LE, [`FORMAT`]) |
//! | 12..16 | tables (u32 LE) |
//! | then, per table | body length (u32 LE), body: the log's table-creation record body (its position, name and schema) |
//! | last 4 | CRC32C of everything before |
//!
//! # Protocol
//!
//! Write the whole new catalog to `DISK_CATALOG.tmp` (removed first if a crash left one),
//! sync it, rename it over `DISK_CATALOG`, sync the directory. A crash leaves the old
//! catalog or the new one, whole (the rename is atomic); the temporary file is ignored and
//! removed by the next write. A catalog that fails its checksum, its magic or its version
//! is refused (corruption, or [`Error::UnsupportedFormat`]).

use std::path::Path;

use crate::durability::record::{create_table_body, decode_body, Record};
use crate::durability::{io_error, remove_if_present};
use crate::fs::{FileSystem, OpenMode};
use crate::schema::TableSchema;
use crate::{Error, Result, Schema};

/// The catalog's file name.
pub(crate) const CATALOG: &str = "DISK_CATALOG";
const TEMPORARY: &str = "DISK_CATALOG.tmp";
const MAGIC: &[u8; 8] = b"VERSODC\0";
/// The catalog's format version.
pub(crate) const FORMAT: u32 = 1;

/// A table's entry: its creation body.
pub(crate) fn entry_body(position: u32, schema: &TableSchema) -> Vec<u8> {
    create_table_body(position, schema)
}

/// Encodes a catalog of these entries.
pub(crate) fn encode(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&FORMAT.to_le_bytes());
    bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for body in entries {
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(body);
    }
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

fn corrupt(path: &Path, offset: usize, reason: impl Into<String>) -> Error {
    Error::Corruption {
        file: path.display().to_string(),
        offset: offset as u64,
        reason: reason.into(),
    }
}

/// Decodes a catalog: each table's name and schema, in position order. Never panics on
/// any bytes (fuzzed).
pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Vec<(String, Schema)>> {
    if bytes.len() < 20 || &bytes[..8] != MAGIC {
        return Err(corrupt(path, 0, "not a disk catalog (its magic is wrong)"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("four bytes")) {
        return Err(corrupt(
            path,
            body.len(),
            "the catalog's checksum does not match",
        ));
    }
    let format = u32::from_le_bytes(body[8..12].try_into().expect("four bytes"));
    if format != FORMAT {
        return Err(Error::UnsupportedFormat {
            file: path.display().to_string(),
            found: format,
            supported: FORMAT,
        });
    }
    let count = u32::from_le_bytes(body[12..16].try_into().expect("four bytes"));
    let mut at = 16;
    let mut tables = Vec::new();
    for position in 0..count {
        let Some(len) = body.get(at..at + 4) else {
            return Err(corrupt(
                path,
                at,
                "the catalog ends inside an entry's length",
            ));
        };
        let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
        let Some(entry) = at
            .checked_add(4 + len)
            .and_then(|end| body.get(at + 4..end))
        else {
            return Err(corrupt(path, at, "the catalog ends inside an entry"));
        };
        match decode_body(entry) {
            Ok(Record::CreateTable {
                table,
                name,
                schema,
            }) if table == position => tables.push((name, schema)),
            Ok(_) => {
                return Err(corrupt(
                    path,
                    at,
                    format!("entry {position} is not table {position}'s creation"),
                ))
            }
            Err(error) => {
                return Err(corrupt(
                    path,
                    at + 4 + error.offset,
                    format!("entry {position}: {}", error.reason),
                ))
            }
        }
        at += 4 + len;
    }
    if at != body.len() {
        return Err(corrupt(path, at, "bytes after the catalog's last entry"));
    }
    Ok(tables)
}

/// Reads the catalog in `dir` (empty if there is none yet: a new database).
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<(String, Schema)>> {
    let path = dir.join(CATALOG);
    let file = match fs.open(&path, OpenMode::ReadWrite) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error(&path, "opening the catalog", &error)),
    };
    let len = file
        .len()
        .map_err(|e| io_error(&path, "reading the catalog's length", &e))?;
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|e| io_error(&path, "reading the catalog", &e))?;
    decode(&path, &bytes)
}

/// The protocol's first half: the new catalog written whole to the temporary file and
/// synced. A failure changes nothing the next open reads.
pub(crate) fn stage(fs: &dyn FileSystem, dir: &Path, entries: &[Vec<u8>]) -> Result<()> {
    let temporary = dir.join(TEMPORARY);
    remove_if_present(fs, &temporary)?;
    let file = fs
        .open(&temporary, OpenMode::CreateNew)
        .map_err(|e| io_error(&temporary, "creating the new catalog", &e))?;
    file.write_all_at(&encode(entries), 0)
        .map_err(|e| io_error(&temporary, "writing the new catalog", &e))?;
    file.sync_data()
        .map_err(|e| io_error(&temporary, "syncing the new catalog", &e))
}

/// The protocol's second half: the staged catalog renamed into place and the directory
/// synced. After a failure the old catalog or the new one is in place, which one unknown.
pub(crate) fn install(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let temporary = dir.join(TEMPORARY);
    let path = dir.join(CATALOG);
    fs.rename(&temporary, &path)
        .map_err(|e| io_error(&path, "renaming the new catalog into place", &e))?;
    fs.sync_dir(dir)
        .map_err(|e| io_error(dir, "syncing the directory after the catalog", &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(Path::new("c"), &bytes);
        }

        #[test]
        fn decoding_a_damaged_catalog_never_panics(flip in 0usize..400, byte in any::<u8>()) {
            let schema = Schema::new()
                .column("id", crate::ColumnType::U64)
                .column("name", crate::ColumnType::Text)
                .primary_key(&["id"])
                .index("by_name", &["name"])
                .validate("t")
                .unwrap();
            let mut bytes = encode(&[entry_body(0, &schema)]);
            let at = flip % bytes.len();
            bytes[at] ^= byte | 1;
            prop_assert!(decode(Path::new("c"), &bytes).is_err());
        }
    }

    #[test]
    fn a_catalog_reads_back_as_written() {
        let schema = Schema::new()
            .column("id", crate::ColumnType::U64)
            .column("name", crate::ColumnType::Text)
            .primary_key(&["id"])
            .index("by_name", &["name"]);
        let validated = schema.clone().validate("t").unwrap();
        let bytes = encode(&[entry_body(0, &validated)]);
        let tables = decode(Path::new("c"), &bytes).unwrap();
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].0, "t");
        let again = tables[0].1.clone().validate("t").unwrap();
        assert_eq!(format!("{again:?}"), format!("{validated:?}"));
    }
}
