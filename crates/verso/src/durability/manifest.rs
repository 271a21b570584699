//! The manifest: the one small file that says which checkpoint is current and where in the
//! log recovery starts replaying.
//!
//! File `MANIFEST`:
//!
//! ```text
//! | "VERSOMAN" | format version: u32 | body length: u32 | body | crc32c of all before: u32 |
//! body: has checkpoint: u8 | [checkpoint file name | snapshot: u64] | log from: u64
//! ```
//!
//! Written by [`write`]: `MANIFEST.tmp` is created, written and synced, renamed over
//! `MANIFEST`, and the directory synced. A crash leaves the old manifest or the new one,
//! never a mix (rename is atomic); a leftover `MANIFEST.tmp` is removed at open.

use std::path::Path;

use crate::durability::codec::{self, Reader};
use crate::durability::io_error;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, OpenMode};

pub(crate) const MANIFEST: &str = "MANIFEST";
pub(crate) const MANIFEST_TEMPORARY: &str = "MANIFEST.tmp";
const MAGIC: &[u8; 8] = b"VERSOMAN";
/// The manifest's format version.
pub(crate) const MANIFEST_FORMAT_VERSION: u32 = 1;
/// A manifest is a few dozen bytes; anything far larger is not one.
const MAX_MANIFEST_BYTES: u64 = 64 << 10;

/// The current checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CheckpointRef {
    /// Its file name in the database directory.
    pub(crate) file: String,
    /// Its snapshot: it holds exactly the commits with smaller timestamps.
    pub(crate) snapshot: u64,
}

/// What the manifest says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) checkpoint: Option<CheckpointRef>,
    /// Replay starts at this LSN: every commit at or above the checkpoint's snapshot lies
    /// at or after it.
    pub(crate) log_from: u64,
}

pub(crate) fn encode(manifest: &Manifest) -> Vec<u8> {
    let mut body = Vec::new();
    match &manifest.checkpoint {
        None => codec::put_u8(&mut body, 0),
        Some(checkpoint) => {
            codec::put_u8(&mut body, 1);
            codec::put_str(&mut body, &checkpoint.file);
            codec::put_u64(&mut body, checkpoint.snapshot);
        }
    }
    codec::put_u64(&mut body, manifest.log_from);
    let mut bytes = MAGIC.to_vec();
    codec::put_u32(&mut bytes, MANIFEST_FORMAT_VERSION);
    codec::put_u32(&mut bytes, body.len() as u32);
    bytes.extend_from_slice(&body);
    let crc = crc32c::crc32c(&bytes);
    codec::put_u32(&mut bytes, crc);
    bytes
}

/// Decodes a manifest; `file` names it in errors.
pub(crate) fn decode(bytes: &[u8], file: &str) -> Result<Manifest> {
    let corrupt = |offset: usize, reason: String| Error::Corruption {
        file: file.to_owned(),
        offset: offset as u64,
        reason,
    };
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(corrupt(
            0,
            "not a Verso manifest (wrong magic bytes)".into(),
        ));
    }
    let mut reader = Reader::new(&bytes[8..]);
    let version = reader
        .u32("the format version")
        .map_err(|e| corrupt(8 + e.offset, e.reason))?;
    if version != MANIFEST_FORMAT_VERSION {
        return Err(Error::UnsupportedFormat {
            file: file.to_owned(),
            found: version,
            supported: MANIFEST_FORMAT_VERSION,
        });
    }
    let len = reader
        .u32("the body length")
        .map_err(|e| corrupt(8 + e.offset, e.reason))? as usize;
    let body_at = 16;
    if bytes.len() != body_at + len + 4 {
        return Err(corrupt(
            12,
            format!(
                "the body length {len} does not match the file's {} bytes",
                bytes.len()
            ),
        ));
    }
    let crc = u32::from_le_bytes(bytes[body_at + len..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..body_at + len]) != crc {
        return Err(corrupt(body_at + len, "the checksum does not match".into()));
    }
    let mut reader = Reader::new(&bytes[body_at..body_at + len]);
    let at = |e: codec::DecodeError| corrupt(body_at + e.offset, e.reason);
    let checkpoint = match reader.u8("the checkpoint flag").map_err(at)? {
        0 => None,
        1 => Some(CheckpointRef {
            file: reader.str("the checkpoint's name").map_err(at)?.to_owned(),
            snapshot: reader.u64("the checkpoint's snapshot").map_err(at)?,
        }),
        other => return Err(corrupt(body_at, format!("checkpoint flag {other}"))),
    };
    let log_from = reader.u64("the log position").map_err(at)?;
    if !reader.is_empty() {
        return Err(corrupt(
            body_at + reader.position(),
            "bytes after the body".into(),
        ));
    }
    if let Some(checkpoint) = &checkpoint {
        if checkpoint.file.contains(['/', '\\']) || checkpoint.file.starts_with('.') {
            return Err(corrupt(
                body_at,
                format!(
                    "the checkpoint name {:?} is not a file name",
                    checkpoint.file
                ),
            ));
        }
    }
    Ok(Manifest {
        checkpoint,
        log_from,
    })
}

/// Reads the manifest of `dir`, `None` if it has none.
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST);
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error(&path, "opening the manifest", &error)),
    };
    let len = file
        .len()
        .map_err(|error| io_error(&path, "reading the manifest's length", &error))?;
    if len > MAX_MANIFEST_BYTES {
        return Err(Error::Corruption {
            file: path.display().to_string(),
            offset: 0,
            reason: format!("{len} bytes long; a manifest is far smaller"),
        });
    }
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|error| io_error(&path, "reading the manifest", &error))?;
    decode(&bytes, &path.display().to_string()).map(Some)
}

/// Replaces the manifest of `dir` atomically and durably (see the module documentation
/// for the order of writes, syncs and renames).
pub(crate) fn write(
    fs: &dyn FileSystem,
    dir: &Path,
    manifest: &Manifest,
    sync_dir: bool,
) -> Result<()> {
    let temporary = dir.join(MANIFEST_TEMPORARY);
    let path = dir.join(MANIFEST);
    match fs.remove_file(&temporary) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io_error(&temporary, "removing a stale manifest", &error)),
    }
    let bytes = encode(manifest);
    let file = fs
        .open(&temporary, OpenMode::CreateNew)
        .map_err(|error| io_error(&temporary, "creating the new manifest", &error))?;
    file.write_all_at(&bytes, 0)
        .and_then(|()| file.sync_data())
        .map_err(|error| io_error(&temporary, "writing the new manifest", &error))?;
    drop(file);
    fs.rename(&temporary, &path)
        .map_err(|error| io_error(&path, "renaming the new manifest into place", &error))?;
    if !sync_dir {
        return Ok(());
    }
    fs.sync_dir(dir)
        .map_err(|error| io_error(dir, "syncing the directory after the manifest", &error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Manifest {
        Manifest {
            checkpoint: Some(CheckpointRef {
                file: "checkpoint-00000000000000ff.ckpt".into(),
                snapshot: 255,
            }),
            log_from: 4096,
        }
    }

    #[test]
    fn a_manifest_round_trips_and_an_unknown_version_is_refused() {
        let bytes = encode(&sample());
        assert_eq!(decode(&bytes, "m").unwrap(), sample());
        let none = Manifest {
            checkpoint: None,
            log_from: 0,
        };
        assert_eq!(decode(&encode(&none), "m").unwrap(), none);
        let mut future = bytes.clone();
        future[8] = 9;
        assert!(matches!(
            decode(&future, "m"),
            Err(Error::UnsupportedFormat { found: 9, .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn decoding_arbitrary_bytes_is_an_answer_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = decode(&bytes, "m");
        }

        /// Any change of a valid manifest's bytes is detected (or is a version change).
        #[test]
        fn every_mutation_is_caught(at in any::<prop::sample::Index>(), flip in 1u8..) {
            let mut bytes = encode(&sample());
            let i = at.index(bytes.len());
            bytes[i] ^= flip;
            prop_assert!(decode(&bytes, "m").is_err());
        }
    }
}
