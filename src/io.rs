//! File input and output: readable errors, and output files that appear whole or not at all.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Opens a file for buffered reading; the error names the file.
pub fn open(path: &Path) -> Result<BufReader<File>> {
    File::open(path).map(|f| BufReader::with_capacity(1 << 20, f)).map_err(|e| Error::bad(format!("{}: cannot read: {e}", path.display())))
}

/// Reads a whole (small) file into a string; the error names the file.
pub fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::bad(format!("{}: cannot read: {e}", path.display())))
}

/// Writes `path` through a temporary file in the same folder that is renamed over `path` only
/// when `write` succeeds, so a failure never leaves a partial file behind.
pub fn write_atomic<T>(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<T>) -> Result<T> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("{}: cannot create folder: {e}", dir.display())))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let file = File::create(&tmp).map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let result = write(&mut w).and_then(|v| {
        w.flush().map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))?;
        Ok(v)
    });
    drop(w);
    match result {
        Ok(v) => {
            std::fs::rename(&tmp, path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                Error::io(format!("{}: cannot write: {e}", path.display()))
            })?;
            Ok(v)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// A reader that hashes (SHA-256) what passes through it, so that a file is parsed and hashed in
/// one streaming pass.
pub struct HashingReader<R> {
    inner: R,
    hasher: sha2::Sha256,
}

impl<R: std::io::Read> HashingReader<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        HashingReader { inner, hasher: sha2::Digest::new() }
    }

    /// The hex SHA-256 of everything read so far.
    pub fn hex_digest(self) -> String {
        sha2::Digest::finalize(self.hasher).iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl<R: std::io::Read> std::io::Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        sha2::Digest::update(&mut self.hasher, &buf[..n]);
        Ok(n)
    }
}

/// The hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let mut h = HashingReader::new(bytes);
    std::io::copy(&mut h, &mut std::io::sink()).expect("reading a slice cannot fail");
    h.hex_digest()
}

/// Maps an I/O error while writing to a message naming the file.
pub fn write_error(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(format!("{}: cannot write: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_writes_leave_nothing() {
        let dir = std::env::temp_dir().join(format!("collsched-io-{}", std::process::id()));
        let path = dir.join("x.json");
        let r: Result<()> = write_atomic(&path, |w| {
            w.write_all(b"partial").unwrap();
            Err(Error::bad("boom"))
        });
        assert!(r.is_err());
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        write_atomic(&path, |w| w.write_all(b"whole").map_err(write_error(&path))).unwrap();
        // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
