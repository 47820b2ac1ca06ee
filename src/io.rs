//! File input and output: readable errors, and output files that appear whole or not at all.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Opens a file for buffered reading; the error names the file. Once [`guard_inputs`] is on,
/// the file counts as an input of the command, which no output may overwrite.
pub fn open(path: &Path) -> Result<BufReader<File>> {
    let file = File::open(path).map_err(|e| Error::bad(format!("{}: cannot read: {e}", path.display())))?;
    note_input(path, &file);
    Ok(BufReader::with_capacity(1 << 20, file))
}

/// The regular files the running command has read (device, inode, path), once [`guard_inputs`]
/// has turned the guard on: an output that is one of them is refused before it is written.
static INPUTS: std::sync::Mutex<Option<Vec<(u64, u64, PathBuf)>>> = std::sync::Mutex::new(None);

fn inputs() -> std::sync::MutexGuard<'static, Option<Vec<(u64, u64, PathBuf)>>> {
    INPUTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Turns on the guard of the command's inputs (the command line does, for the whole process):
/// from then on every file read through this module is noted, and writing any of them (by any
/// name: links are followed to the file) is refused with a bad-input error before anything is
/// written, whatever the command and however the output's name was made.
pub fn guard_inputs() {
    inputs().get_or_insert_with(Vec::new);
}

/// Notes `file`, opened as `path`, as an input when the guard is on.
fn note_input(path: &Path, file: &File) {
    use std::os::unix::fs::MetadataExt;
    if let Some(list) = inputs().as_mut() {
        if let Some(m) = file.metadata().ok().filter(|m| m.is_file()) {
            list.push((m.dev(), m.ino(), path.to_path_buf()));
        }
    }
}

/// Refuses to write `path` when it is a file the command has read (the guard being on).
fn refuse_input(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let guard = inputs();
    let (Some(list), Ok(m)) = (guard.as_ref(), std::fs::metadata(path)) else { return Ok(()) };
    match list.iter().find(|(dev, ino, _)| *dev == m.dev() && *ino == m.ino()) {
        Some((_, _, input)) => Err(output_is_input(path, input)),
        None => Ok(()),
    }
}

/// The bad-input error of an output `out` that is the command's input `input`.
pub fn output_is_input(out: &Path, input: &Path) -> Error {
    Error::bad(format!("{}: is also an input of this command ({}); write the output elsewhere", out.display(), input.display()))
}

/// Whether a file is zstd-compressed, by its extension (`.zst`, as in `schedule.json.zst`).
pub fn is_zstd(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("zst"))
}

/// A reader of what a file holds: its bytes, or for a `.zst` file the bytes they decompress to.
/// A concrete type (not a boxed reader), so that parsers reading a byte at a time stay fast.
pub enum Decoded<R: BufRead> {
    /// A plain file.
    Plain(R),
    /// A zstd-compressed file, decompressed into a buffer.
    Zstd(BufReader<zstd::stream::read::Decoder<'static, R>>),
}

impl<R: BufRead> Read for Decoded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Decoded::Plain(r) => r.read(buf),
            Decoded::Zstd(r) => r.read(buf),
        }
    }
}

impl<R: BufRead> BufRead for Decoded<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        match self {
            Decoded::Plain(r) => r.fill_buf(),
            Decoded::Zstd(r) => r.fill_buf(),
        }
    }
    fn consume(&mut self, n: usize) {
        match self {
            Decoded::Plain(r) => r.consume(n),
            Decoded::Zstd(r) => r.consume(n),
        }
    }
}

/// What `raw` (the stored bytes of `path`) holds, decompressed on the fly when the name ends in
/// `.zst`.
pub fn decoded<R: BufRead>(path: &Path, raw: R) -> Result<Decoded<R>> {
    if is_zstd(path) {
        let d = zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| Error::bad(format!("{}: cannot read as zstd: {e}", path.display())))?;
        Ok(Decoded::Zstd(BufReader::with_capacity(1 << 20, d)))
    } else {
        Ok(Decoded::Plain(raw))
    }
}

/// Opens a file for buffered reading of what it holds (decompressed for a `.zst` file); the
/// error names the file.
pub fn open_decoded(path: &Path) -> Result<Decoded<BufReader<File>>> {
    decoded(path, open(path)?)
}

/// The zstd level of the files the project writes: the fastest; schedules compress well at it
/// (the 2.9 GB JSON of a 16x16x16 all_to_all: 455 MB in 12.2 s at level 1, 19.0 s at level 3).
const ZSTD_LEVEL: i32 = 1;

/// Whether two paths name the same existing file (through links, by device and inode).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// `write_atomic`, compressing what `write` writes with zstd when `path` ends in `.zst`.
pub fn write_atomic_encoded<T>(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<T>) -> Result<T> {
    write_atomic(path, |w| encode(path, w, write))
}

/// Has `write` write to `w`, through a zstd encoder when `path` ends in `.zst`.
fn encode<T>(path: &Path, w: &mut BufWriter<File>, write: impl FnOnce(&mut dyn Write) -> Result<T>) -> Result<T> {
    if is_zstd(path) {
        let mut enc = zstd::stream::write::Encoder::new(w, ZSTD_LEVEL).map_err(write_error(path))?;
        let v = write(&mut enc)?;
        enc.finish().map_err(write_error(path))?;
        Ok(v)
    } else {
        write(w)
    }
}

/// Reads a whole (small) file into a string; the error names the file.
pub fn read_to_string(path: &Path) -> Result<String> {
    text_of(path, read_bytes(path)?)
}

/// The bytes read from `path` as text; where they are not UTF-8, the error names the line and
/// column of the first byte that is not.
fn text_of(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = good.len() - good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
        let byte = e.as_bytes()[good.len()];
        Error::bad(format!("{}: cannot read: line {line} column {column}: the byte {byte:#04x} is not UTF-8 text", path.display()))
    })
}

/// Reads a whole (small) file's bytes, as an input of the command; the error names the file.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(path)?.read_to_end(&mut bytes).map_err(|e| Error::bad(format!("{}: cannot read: {e}", path.display())))?;
    Ok(bytes)
}

/// [`read_to_string`], decompressing a `.zst` file.
pub fn read_decoded_to_string(path: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    open_decoded(path)?.read_to_end(&mut bytes).map_err(|e| Error::bad(format!("{}: cannot read: {e}", path.display())))?;
    text_of(path, bytes)
}

/// The first top-level key of the JSON object in `path` (decompressed, for a `.zst` file) that
/// is one of `deciding`, with its value. Keys are read in order and the values of the others skipped without being kept, so a
/// large file costs only the scan to its first deciding key. `None` when no key decides, or when
/// the file is not a JSON object.
///
/// Errors: the file cannot be opened.
pub fn first_top_level_key(path: &Path, deciding: &[&str]) -> Result<Option<(String, serde_json::Value)>> {
    use serde::de::{self, IgnoredAny, MapAccess, Visitor};
    use std::cell::RefCell;
    struct Keys<'a>(&'a [&'a str], &'a RefCell<Option<(String, serde_json::Value)>>);
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if self.0.contains(&key.as_str()) {
                    *self.1.borrow_mut() = Some((key, map.next_value()?));
                    // Stop reading: the answer is known.
                    return Err(de::Error::custom("decided"));
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let found = RefCell::new(None);
    // Through the compression of a `.zst` file, which is read as what it holds.
    let mut de = serde_json::Deserializer::from_reader(open_decoded(path)?);
    let _ = de::Deserializer::deserialize_map(&mut de, Keys(deciding, &found));
    Ok(found.into_inner())
}

/// serde_json's message for `e`, an error reading `text`, with a number it shows rounded (an
/// integer beyond 64 bits, which it reads as a float: `1.8446744073709552e+19`) shown as the
/// file writes it (`18446744073709551616`), so that the message names the value the user wrote.
pub fn json_message(e: &serde_json::Error, text: &[u8]) -> String {
    let shown = e.to_string();
    const FLOAT: &str = "floating point `";
    let Some(start) = shown.find(FLOAT).map(|i| i + FLOAT.len()) else { return shown };
    let Some(len) = shown[start..].find('`') else { return shown };
    match number_at(text, e.line(), e.column()) {
        Some(literal) => format!("{}{literal}{}", &shown[..start], &shown[start + len..]),
        None => shown,
    }
}

/// [`json_message`] for an error that `serde_path_to_error` placed, led by the field it names
/// (``field `a.b[0]`: ``; nothing at the top level).
pub fn field_json_message(e: &serde_path_to_error::Error<serde_json::Error>, text: &[u8]) -> String {
    let path = e.path().to_string();
    let at = if path.is_empty() || path == "." { String::new() } else { format!("field `{path}`: ") };
    format!("{at}{}", json_message(e.inner(), text))
}

/// The JSON number in `text` whose last byte is at `line` and `column` (both from 1, where
/// serde_json places an error about a number it has read); `None` at line 0 (no position).
fn number_at(text: &[u8], line: usize, column: usize) -> Option<&str> {
    let head = text.split(|&b| b == b'\n').nth(line.checked_sub(1)?)?.get(..column)?;
    let is_number = |b: &u8| b.is_ascii_digit() || b"+-.eE".contains(b);
    let from = head.iter().rposition(|b| !is_number(b)).map_or(0, |i| i + 1);
    let literal = std::str::from_utf8(&head[from..]).ok()?;
    let first = *literal.as_bytes().first()?;
    (first == b'-' || first.is_ascii_digit()).then_some(literal)
}

/// Where the bytes of an output named `path` go, once its symbolic links are followed.
enum Target {
    /// A regular file, or nothing yet: written to a temporary file beside it that is renamed over
    /// it, so that it appears whole or not at all.
    Replace(PathBuf),
    /// Something that exists and is not a regular file (a FIFO, a device, a socket): written
    /// through directly, since renaming over it would replace it with a regular file.
    Through(PathBuf),
}

/// The most symbolic links followed from an output path before giving up (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// What writing `path` writes to: symbolic links are followed to their final target, so that a
/// link stays a link and its target gets the bytes.
fn target(path: &Path) -> Result<Target> {
    let mut p = path.to_path_buf();
    for _ in 0..=MAX_SYMLINKS {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Target::Replace(p)),
            Err(e) => return Err(Error::io(format!("{}: cannot write: {e}", path.display()))),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let to = std::fs::read_link(&p).map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))?;
            // A relative link is relative to the folder holding the link.
            p = match p.parent() {
                Some(dir) if to.is_relative() => dir.join(to),
                _ => to,
            };
        } else if kind.is_file() {
            return Ok(Target::Replace(p));
        } else if kind.is_dir() {
            return Err(Error::io(format!("{}: cannot write: is a folder", path.display())));
        } else {
            return Ok(Target::Through(p));
        }
    }
    Err(Error::io(format!("{}: cannot write: more than {MAX_SYMLINKS} symbolic links", path.display())))
}

/// Where an output named `path` lands once its symbolic links are followed (docs/design/CLI.md:
/// a link stays a link and its final target gets the bytes): what a file written there names
/// its neighbours relative to.
///
/// Errors: a link that cannot be read, or more than 40 links in a row.
pub fn output_target(path: &Path) -> Result<PathBuf> {
    match target(path)? {
        Target::Replace(p) | Target::Through(p) => Ok(p),
    }
}

/// The temporary files and the folders made for outputs, each while it exists: what a run cut
/// short by a signal removes ([`Scratch::remove_all`]) so that it leaves nothing partial, as a
/// failure does. One registry for the process, behind one lock that is held across every change
/// that must not be split by the cleanup: creating a temporary file (or folder) and registering
/// it, renaming it and unregistering it, removing it and unregistering it. The cleanup holds it
/// until the process exits, so that no file is staged or renamed after it.
pub struct Scratch {
    /// The temporary files, not yet renamed nor removed.
    files: Vec<PathBuf>,
    /// The folders made for outputs, in the order they were made (outermost first: a folder is
    /// made after the one holding it).
    folders: Vec<PathBuf>,
}

/// What [`Scratch::remove_all`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Temporary files.
    pub files: usize,
    /// Folders made for outputs (those left empty).
    pub folders: usize,
}

impl Scratch {
    const fn new() -> Self {
        Scratch { files: Vec::new(), folders: Vec::new() }
    }

    /// Forgets `path` (renamed, or removed).
    fn forget_file(&mut self, path: &Path) {
        if let Some(i) = self.files.iter().rposition(|f| f == path) {
            self.files.swap_remove(i);
        }
    }

    /// Forgets the folders `created` made (they hold an output, or were removed).
    fn forget_folders(&mut self, created: &[PathBuf]) {
        for d in created {
            if let Some(i) = self.folders.iter().rposition(|f| f == d) {
                self.folders.remove(i);
            }
        }
    }

    /// Creates the folder `dir` and the missing folders above it, registered; returns those it
    /// created, the outermost first, so that a failure can remove them again.
    fn create_folders(&mut self, dir: &Path) -> Result<Vec<PathBuf>> {
        let missing: Vec<PathBuf> =
            dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err()).map(Path::to_path_buf).collect();
        let made = std::fs::create_dir_all(dir);
        // Registered whatever the outcome: create_dir_all may have made some before it failed.
        let created: Vec<PathBuf> = missing.into_iter().rev().filter(|d| std::fs::symlink_metadata(d).is_ok()).collect();
        self.folders.extend(created.iter().cloned());
        match made {
            Ok(()) => Ok(created),
            Err(e) => {
                self.remove_folders(&created);
                Err(Error::io(format!("{}: cannot create folder: {e}", dir.display())))
            }
        }
    }

    /// Removes the folders `created` made (innermost first), those that are empty, and forgets
    /// them all.
    fn remove_folders(&mut self, created: &[PathBuf]) {
        for d in created.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
        self.forget_folders(created);
    }

    /// Removes the temporary file `tmp` and forgets it.
    fn remove_file(&mut self, tmp: &Path) {
        let _ = std::fs::remove_file(tmp);
        self.forget_file(tmp);
    }

    /// Renames the temporary file `tmp` to `dest` and forgets it; a failed rename removes it.
    fn rename(&mut self, tmp: &Path, dest: &Path) -> std::io::Result<()> {
        let renamed = std::fs::rename(tmp, dest);
        if renamed.is_err() {
            let _ = std::fs::remove_file(tmp);
        }
        self.forget_file(tmp);
        renamed
    }

    /// Removes every registered temporary file, then every registered folder that is empty,
    /// innermost first, and forgets them all.
    pub fn remove_all(&mut self) -> Removed {
        let mut removed = Removed::default();
        for f in self.files.drain(..) {
            removed.files += usize::from(std::fs::remove_file(f).is_ok());
        }
        // Innermost first: a folder is registered after the one holding it.
        for d in self.folders.drain(..).rev() {
            removed.folders += usize::from(std::fs::remove_dir(d).is_ok());
        }
        removed
    }
}

/// The registry of the process's temporary files and folders.
static SCRATCH: std::sync::Mutex<Scratch> = std::sync::Mutex::new(Scratch::new());

/// The registry, locked (a panic elsewhere while it was held leaves it consistent: every change
/// is made whole under the lock).
pub fn scratch() -> std::sync::MutexGuard<'static, Scratch> {
    SCRATCH.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A file written under a temporary name beside its destination, waiting to take its name.
struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
}

/// Writes what `write` writes for the output `path`: to a temporary file beside its final target
/// (returned with it, for the caller to rename), or through a FIFO or device (nothing returned).
/// On failure nothing is left: the temporary file, and the folders made for it, are removed.
fn stage<T>(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<T>) -> Result<(T, Option<Staged>, Vec<PathBuf>)> {
    let cannot = |e: std::io::Error| Error::io(format!("{}: cannot write: {e}", path.display()));
    refuse_input(path)?;
    let dest = match target(path)? {
        Target::Replace(dest) => dest,
        Target::Through(dest) => {
            let file = std::fs::OpenOptions::new().write(true).open(&dest).map_err(cannot)?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            let v = write(&mut w)?;
            w.flush().map_err(cannot)?;
            return Ok((v, None, Vec::new()));
        }
    };
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = dir.join(temporary_name(&name));
    // The folders and the temporary file are made and registered under one lock, so that a
    // cleanup on a signal finds every one that exists.
    let (created, file) = {
        let mut s = scratch();
        let created = s.create_folders(&dir)?;
        match File::create(&tmp) {
            Ok(file) => {
                s.files.push(tmp.clone());
                (created, file)
            }
            Err(e) => {
                s.remove_folders(&created);
                return Err(cannot(e));
            }
        }
    };
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let result = write(&mut w).and_then(|v| w.flush().map_err(cannot).map(|()| v));
    drop(w);
    match result {
        Ok(v) => Ok((v, Some(Staged { tmp, dest }), created)),
        Err(e) => {
            let mut s = scratch();
            s.remove_file(&tmp);
            s.remove_folders(&created);
            Err(e)
        }
    }
}

/// The temporary name beside a file called `name`: `.NAME.tmp-PID`, where a long NAME is cut to
/// its first characters and a hash of the whole, so that a destination whose own name takes the
/// 255 bytes a file name may have is written too (its temporary name was 255 + 10 bytes long).
fn temporary_name(name: &str) -> String {
    const LONGEST_KEPT: usize = 200;
    let pid = std::process::id();
    if name.len() <= LONGEST_KEPT {
        return format!(".{name}.tmp-{pid}");
    }
    let cut = name.char_indices().map(|(i, _)| i).take_while(|&i| i <= LONGEST_KEPT / 2).last().unwrap_or(0);
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(name, &mut hash);
    format!(".{}-{:016x}.tmp-{pid}", &name[..cut], std::hash::Hasher::finish(&hash))
}

/// Writes `path`: through a temporary file in the same folder (missing folders are created) that
/// is renamed over `path` only when `write` succeeds, so a failure never leaves a partial file
/// (nor the folders made for it) behind. A symbolic link is followed and its final target written
/// the same way; a path that is neither a regular file nor missing (a FIFO, a device) is opened and
/// written through, and a failed write (a full device) is an error all the same.
pub fn write_atomic<T>(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<T>) -> Result<T> {
    let (v, staged, created) = stage(path, write)?;
    if let Some(Staged { tmp, dest }) = staged {
        // Renamed and unregistered under the lock: a cleanup on a signal comes before (the
        // temporary file removed, the destination as it was) or after (the file in its place).
        let mut s = scratch();
        if let Err(e) = s.rename(&tmp, &dest) {
            s.remove_folders(&created);
            return Err(Error::io(format!("{}: cannot write: {e}", path.display())));
        }
        // The folders hold an output now.
        s.forget_folders(&created);
    }
    Ok(v)
}

/// The files of an output of several files (a folder of traces, a sweep): each is written as
/// [`write_atomic`] writes one, but under its temporary name until [`OutputSet::commit`] gives
/// every file its name, once all were written. Dropped without a commit (an error on the way),
/// it removes what it wrote and the folders it made, so that files that were there before stay as
/// they were and nothing partial is left. Files may be written from several threads.
#[derive(Default)]
pub struct OutputSet {
    staged: std::sync::Mutex<(Vec<Staged>, Vec<PathBuf>)>,
}

impl OutputSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<Staged>, Vec<PathBuf>)> {
        self.staged.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes `path` under a temporary name, to take its name at the commit. A FIFO or device is
    /// written through at once, as [`write_atomic`] does. A file the set already holds is an
    /// internal error: the caller named two outputs alike (both would share a temporary name).
    pub fn write<T>(&self, path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<T>) -> Result<T> {
        if let Ok(Target::Replace(dest)) = target(path) {
            if self.lock().0.iter().any(|s| s.dest == dest) {
                return Err(Error::internal(format!("{}: written twice in one output", path.display())));
            }
        }
        let (v, staged, created) = stage(path, write)?;
        let mut s = self.lock();
        s.0.extend(staged);
        s.1.extend(created);
        Ok(v)
    }

    /// [`OutputSet::write`], compressing with zstd when `path` ends in `.zst`.
    pub fn write_encoded<T>(&self, path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<T>) -> Result<T> {
        self.write(path, |w| encode(path, w, write))
    }

    /// Writes `bytes` as the file `path`.
    pub fn write_bytes(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.write(path, |w| w.write_all(bytes).map_err(write_error(path)))
    }

    /// Where the bytes written for `path` are until the commit (`path` itself if it was written
    /// through, or not written).
    pub fn staged_path(&self, path: &Path) -> PathBuf {
        let dest = match target(path) {
            Ok(Target::Replace(d)) => d,
            _ => return path.to_path_buf(),
        };
        self.lock().0.iter().rev().find(|s| s.dest == dest).map_or_else(|| path.to_path_buf(), |s| s.tmp.clone())
    }

    /// Gives every file written its name. A rename that fails (rare: each stays in its folder)
    /// leaves the files renamed before it in place and removes the others.
    pub fn commit(self) -> Result<()> {
        let mut s = self.lock();
        let staged = std::mem::take(&mut s.0);
        let created = std::mem::take(&mut s.1);
        // Every rename under the registry's lock: a cleanup on a signal comes before the first or
        // after the last, so the set still appears whole or not at all.
        let mut scratch = scratch();
        let mut rest = staged.into_iter();
        while let Some(Staged { tmp, dest }) = rest.next() {
            if let Err(e) = scratch.rename(&tmp, &dest) {
                for Staged { tmp: t, .. } in rest {
                    scratch.remove_file(&t);
                }
                scratch.forget_folders(&created);
                return Err(Error::io(format!("{}: cannot write: {e}", dest.display())));
            }
        }
        // The folders hold the outputs now.
        scratch.forget_folders(&created);
        Ok(())
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        let (staged, created) = self.staged.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut scratch = scratch();
        for Staged { tmp, .. } in staged.drain(..) {
            scratch.remove_file(&tmp);
        }
        // Innermost first: a folder made for a file of a folder made before.
        scratch.remove_folders(&std::mem::take(created));
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

    /// Bytes that are not UTF-8 are named by line and column, not only as "not UTF-8".
    #[test]
    fn text_that_is_not_utf8_names_where() {
        let e = text_of(Path::new("f.json"), b"{\n  \"a\": \"\xc3(\"\n}".to_vec()).unwrap_err();
        assert_eq!(e.message(), "f.json: cannot read: line 2 column 9: the byte 0xc3 is not UTF-8 text");
        assert_eq!(text_of(Path::new("f.json"), "{\"\u{e9}\": 1}".as_bytes().to_vec()).unwrap(), "{\"\u{e9}\": 1}");
    }

    #[test]
    fn an_output_set_dropped_by_a_panic_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("collsched-io-panic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let r = std::panic::catch_unwind(|| {
            let files = OutputSet::new();
            files.write_bytes(&dir.join("a/0.et"), b"zero").unwrap();
            files.write_bytes(&dir.join("a/1.et"), b"one").unwrap();
            panic!("a bug after the files were written");
        });
        assert!(r.is_err());
        // Neither the temporary files nor the folders made for them.
        assert!(!dir.exists());
    }

    /// Whether the registry holds the temporary file `file` and the folder `folder`.
    fn registered(file: &Path, folder: &Path) -> (bool, bool) {
        let s = scratch();
        (s.files.iter().any(|f| f == file), s.folders.iter().any(|d| d == folder))
    }

    #[test]
    fn temporary_files_and_new_folders_are_registered_while_they_exist() {
        let dir = fresh_dir("scratch");
        let (new, path) = (dir.join("new"), dir.join("new/sub/x.json"));
        let tmp = dir.join("new/sub").join(temporary_name("x.json"));
        write_atomic(&path, |w| {
            assert_eq!(registered(&tmp, &new), (true, true));
            assert!(scratch().folders.iter().any(|d| *d == dir.join("new/sub")));
            w.write_all(b"whole").map_err(write_error(&path))
        })
        .unwrap();
        // Renamed: neither the file nor the folders that now hold it are temporary.
        assert_eq!(registered(&tmp, &new), (false, false));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole");
        // A failed write: removed and unregistered.
        let (other, failed) = (dir.join("other"), dir.join("other/y.json"));
        let r: Result<()> = write_atomic(&failed, |_| Err(Error::bad("boom")));
        assert!(r.is_err() && !other.exists());
        assert_eq!(registered(&dir.join("other").join(temporary_name("y.json")), &other), (false, false));
        // An output set: registered until the commit, and after a drop without one.
        for commit in [true, false] {
            let (set_dir, file) = (dir.join(format!("set-{commit}")), dir.join(format!("set-{commit}/z.json")));
            let tmp = set_dir.join(temporary_name("z.json"));
            let files = OutputSet::new();
            files.write_bytes(&file, b"z").unwrap();
            assert_eq!(registered(&tmp, &set_dir), (true, true));
            if commit {
                files.commit().unwrap();
            } else {
                drop(files);
            }
            assert_eq!(registered(&tmp, &set_dir), (false, false));
            assert_eq!(file.exists(), commit);
            assert_eq!(set_dir.exists(), commit);
        }
        // A FIFO is written through, not staged: nothing is registered.
        let fifo = dir.join("fifo");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).unwrap())
        };
        write_atomic(&fifo, |w| {
            assert!(!scratch().files.iter().any(|f| f.starts_with(&dir)));
            w.write_all(b"through").map_err(write_error(&fifo))
        })
        .unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_cleanup_removes_what_is_registered_and_folders_innermost_first() {
        // A registry of its own: the process's may hold other tests' files.
        let dir = fresh_dir("cleanup");
        let mut s = Scratch::new();
        // a/b/c made for two files; a/b also holds a file that is not temporary.
        let abc = s.create_folders(&dir.join("a/b/c")).unwrap();
        assert_eq!(abc, [dir.join("a"), dir.join("a/b"), dir.join("a/b/c")]);
        let xy = s.create_folders(&dir.join("x/y")).unwrap();
        for f in ["a/b/c/.1.tmp-0", "a/b/.2.tmp-0", "x/y/.3.tmp-0"] {
            std::fs::write(dir.join(f), "partial").unwrap();
            s.files.push(dir.join(f));
        }
        std::fs::write(dir.join("a/b/kept.json"), "there before").unwrap();
        // Renamed: no longer temporary.
        std::fs::write(dir.join("x/.4.tmp-0"), "whole").unwrap();
        s.files.push(dir.join("x/.4.tmp-0"));
        s.rename(&dir.join("x/.4.tmp-0"), &dir.join("x/done.json")).unwrap();
        s.forget_folders(&xy[..1]);
        // Not registered: stays.
        std::fs::write(dir.join("unregistered.tmp-0"), "not ours").unwrap();
        let removed = s.remove_all();
        // Three files; c and y (x holds done.json, a/b kept.json, so they and a stay).
        assert_eq!(removed, Removed { files: 3, folders: 2 });
        assert!(s.files.is_empty() && s.folders.is_empty());
        let mut left: Vec<String> = Vec::new();
        for f in ["a", "a/b", "a/b/c", "a/b/kept.json", "a/b/.2.tmp-0", "x", "x/y", "x/done.json", "unregistered.tmp-0"] {
            if dir.join(f).exists() {
                left.push(f.into());
            }
        }
        assert_eq!(left, ["a", "a/b", "a/b/kept.json", "x", "x/done.json", "unregistered.tmp-0"]);
        // Folders left empty are removed innermost first: all of a nested chain goes.
        let mut s = Scratch::new();
        s.create_folders(&dir.join("p/q/r")).unwrap();
        assert_eq!(s.remove_all(), Removed { files: 0, folders: 3 });
        assert!(!dir.join("p").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_output_set_refuses_a_file_twice_as_a_bug() {
        let dir = std::env::temp_dir().join(format!("collsched-io-twice-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = OutputSet::new();
        files.write_bytes(&dir.join("t.csv"), b"first").unwrap();
        let e = files.write_bytes(&dir.join("t.csv"), b"second").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Internal, "{e}");
        assert!(e.to_string().contains("t.csv: written twice in one output"), "{e}");
        // The first stays whole and takes its name.
        files.commit().unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("t.csv")).unwrap(), "first");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_name_of_255_bytes_is_written() {
        let dir = std::env::temp_dir().join(format!("collsched-io-long-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["x".repeat(255), format!("{}.json", "é".repeat(125))] {
            let path = dir.join(&name);
            write_atomic(&path, |w| w.write_all(b"whole").map_err(write_error(&path))).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole");
        }
        // Two long names alike in their first characters stage apart, and nothing else is left.
        let (a, b) = (dir.join(format!("{}a", "y".repeat(250))), dir.join(format!("{}b", "y".repeat(250))));
        assert_ne!(temporary_name(&a.file_name().unwrap().to_string_lossy()), temporary_name(&b.file_name().unwrap().to_string_lossy()));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
        // Nor the folder made for it.
        assert!(!dir.exists());
        write_atomic(&path, |w| w.write_all(b"whole").map_err(write_error(&path))).unwrap();
        // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh, empty folder for one test.
    fn fresh_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("collsched-io-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Makes a FIFO at `path` (a special file a test may create, unlike a device).
    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    }

    #[test]
    fn symlinks_are_followed_and_stay_links() {
        let dir = fresh_dir("link");
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/target.json"), "old").unwrap();
        // A relative link to a relative link: both stay, the final target gets the bytes.
        std::os::unix::fs::symlink("sub/target.json", dir.join("inner.json")).unwrap();
        std::os::unix::fs::symlink("inner.json", dir.join("link.json")).unwrap();
        let link = dir.join("link.json");
        write_atomic(&link, |w| w.write_all(b"new").map_err(write_error(&link))).unwrap();
        for l in ["link.json", "inner.json"] {
            assert!(std::fs::symlink_metadata(dir.join(l)).unwrap().file_type().is_symlink(), "{l}");
        }
        assert_eq!(std::fs::read_to_string(dir.join("sub/target.json")).unwrap(), "new");
        // No temporary file is left beside the link or the target.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
        assert_eq!(std::fs::read_dir(dir.join("sub")).unwrap().count(), 1);
        // A failed write through a link leaves the target as it was.
        let r: Result<()> = write_atomic(&link, |w| {
            w.write_all(b"partial").unwrap();
            Err(Error::bad("boom"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(dir.join("sub/target.json")).unwrap(), "new");
        // A link to a folder is refused, not replaced.
        std::os::unix::fs::symlink("sub", dir.join("folder.json")).unwrap();
        let to_folder = dir.join("folder.json");
        let e = write_atomic(&to_folder, |w| w.write_all(b"x").map_err(write_error(&to_folder))).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Io, "{e:?}");
        assert!(std::fs::symlink_metadata(&to_folder).unwrap().file_type().is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fifos_are_written_through_and_a_failed_write_is_an_error() {
        let dir = fresh_dir("fifo");
        let fifo = dir.join("out.json");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).unwrap())
        };
        write_atomic(&fifo, |w| w.write_all(b"through").map_err(write_error(&fifo))).unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::symlink_metadata(&fifo).unwrap().file_type()));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        // A reader that goes away: more than a pipe holds cannot be written (EPIPE, as a full
        // device gives ENOSPC), which is a write error (exit 5), not success.
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || drop(File::open(&fifo).unwrap()))
        };
        let big = vec![b'x'; 8 << 20];
        let e = write_atomic(&fifo, |w| w.write_all(&big).map_err(write_error(&fifo))).unwrap_err();
        reader.join().unwrap();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Io, "{e:?}");
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::symlink_metadata(&fifo).unwrap().file_type()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn zst_files_round_trip_and_plain_ones_stay_plain() {
        let dir = std::env::temp_dir().join(format!("collsched-io-zst-{}", std::process::id()));
        let text = "{\"steps\": []}\n".repeat(1000);
        for name in ["x.json", "x.json.zst"] {
            let path = dir.join(name);
            write_atomic_encoded(&path, |w| w.write_all(text.as_bytes()).map_err(write_error(&path))).unwrap();
            let stored = std::fs::read(&path).unwrap();
            assert_eq!(stored == text.as_bytes(), name == "x.json", "{name}");
            let mut back = String::new();
            std::io::Read::read_to_string(&mut open_decoded(&path).unwrap(), &mut back).unwrap();
            assert_eq!(back, text, "{name}");
        }
        // A .zst name over plain bytes is an error that names the file, not a panic.
        let bad = dir.join("plain.json.zst");
        std::fs::write(&bad, b"{}").unwrap();
        let mut sink = Vec::new();
        let e = std::io::Read::read_to_end(&mut open_decoded(&bad).unwrap(), &mut sink).unwrap_err();
        assert!(!e.to_string().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An integer beyond 64 bits is named as written, on any line; what serde_json already shows
    /// as written stays as it is.
    #[test]
    fn json_messages_show_numbers_as_written() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Ids {
            a: u32,
            b: Vec<u64>,
        }
        let message = |text: &str| json_message(&serde_json::from_str::<Ids>(text).unwrap_err(), text.as_bytes());
        let m = message(r#"{"a": 18446744073709551616, "b": []}"#);
        assert!(m.starts_with("invalid type: floating point `18446744073709551616`, expected u32 at line 1"), "{m}");
        let m = message("{\n  \"a\": 1,\n  \"b\": [2, -99999999999999999999999]\n}");
        assert!(m.starts_with("invalid type: floating point `-99999999999999999999999`, expected u64 at line 3"), "{m}");
        let m = message(r#"{"a": 1.5e0, "b": []}"#);
        assert!(m.starts_with("invalid type: floating point `1.5e0`, expected u32"), "{m}");
        let m = message(r#"{"a": -1, "b": []}"#);
        assert!(m.starts_with("invalid value: integer `-1`, expected u32"), "{m}");
        // A position that holds no number leaves the message as serde_json wrote it.
        let e = serde_json::from_str::<Ids>(r#"{"a": 1e300, "b": []}"#).unwrap_err();
        assert_eq!(json_message(&e, b"{}"), e.to_string());
    }
}
