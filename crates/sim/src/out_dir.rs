//! Output files and directories made inside an output directory without
//! following a link that stands there.
//!
//! A results directory may be shared, and the emulator runs as root: a
//! link planted at `metrics.json` or `traces/` must not make a run write
//! through it to a file elsewhere. Every name is therefore opened relative
//! to the directory's descriptor, never through a path: files are created
//! exclusively and without following a link ([`OutDir::create`]) or
//! written whole to a temporary name that is then renamed over the name
//! ([`OutDir::write_atomic`]); directories are made and opened the same way
//! ([`OutDir::subdir`]). A link at a name is replaced, never followed; a
//! directory where a file goes (or the reverse) is refused. The directory
//! itself, which a user may have made a link on purpose, is followed once,
//! when it is opened.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, AtFlags, OFlag, AT_FDCWD};
use nix::sys::stat::{fstatat, mkdirat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// An open output directory.
#[derive(Clone, Debug)]
pub struct OutDir {
    path: PathBuf,
    fd: Arc<OwnedFd>,
}

/// The suffix of the temporary files [`OutDir::write_atomic`] writes
/// (`.NAME.PID.N.tmp`); one left by a killed process may be removed.
pub const TEMPORARY_SUFFIX: &str = ".tmp";

/// Tells apart the temporaries of one process.
static TEMPORARIES: AtomicU64 = AtomicU64::new(0);

impl OutDir {
    /// Opens the directory `path`, creating it and its parents. A link at
    /// `path` (or above it) is followed here, once; everything made inside
    /// afterwards is relative to the directory this opened.
    pub fn open(path: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(path)?;
        let fd = openat(
            AT_FDCWD,
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(OutDir {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    /// The directory's path as it was given (for messages and reports).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in the directory (for messages and reports).
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The directory `name` inside this one, made if missing. A link at
    /// `name` is removed and a directory made in its place; a file there is
    /// refused.
    pub fn subdir(&self, name: &str) -> io::Result<OutDir> {
        plain(name)?;
        // Twice at most: a link found at the first try is removed, then the
        // directory is made; a link that comes back is refused.
        for _ in 0..2 {
            match mkdirat(&*self.fd, name, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
            match openat(
                &*self.fd,
                name,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => {
                    return Ok(OutDir {
                        path: self.path.join(name),
                        fd: Arc::new(fd),
                    })
                }
                Err(Errno::ELOOP | Errno::ENOTDIR) if self.is_link(name)? => {
                    remove_entry(&self.fd, name)?;
                }
                Err(Errno::ELOOP | Errno::ENOTDIR) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "exists and is not a directory",
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a link keeps coming back at this name",
        ))
    }

    /// The directory `name` inside this one, emptied: whatever a previous
    /// run left in it goes (a link at `name` is removed, not followed).
    pub fn fresh_subdir(&self, name: &str) -> io::Result<OutDir> {
        plain(name)?;
        if self.exists(name)? {
            if self.is_link(name)? {
                remove_entry(&self.fd, name)?;
            } else {
                // Removes a link it meets rather than following it.
                std::fs::remove_dir_all(self.path.join(name))?;
            }
        }
        self.subdir(name)
    }

    /// A new, empty file `name` to write as it grows (a capture, a trace
    /// table). A file or link already at `name` is removed first; a
    /// directory there is refused. The file is created exclusively, so a
    /// link planted after the removal makes this fail rather than be
    /// followed.
    pub fn create(&self, name: &str) -> io::Result<File> {
        plain(name)?;
        match remove_entry(&self.fd, name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let fd = openat(
            &*self.fd,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        )?;
        Ok(File::from(fd))
    }

    /// Writes the file `name` whole: `write` fills a temporary file in the
    /// directory, which is then renamed over `name` (replacing a file or a
    /// link there; a directory is refused). Readers, and a process stopped
    /// midway, never see half a file. Returns the file's path.
    pub fn write_atomic(
        &self,
        name: &str,
        write: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> io::Result<PathBuf> {
        plain(name)?;
        let (temporary, mut file) = self.temporary(name)?;
        let written = write(&mut file).and_then(|()| file.flush());
        drop(file);
        let renamed = written.and_then(|()| {
            renameat(&*self.fd, temporary.as_str(), &*self.fd, name).map_err(|e| match e {
                Errno::EISDIR | Errno::ENOTEMPTY | Errno::EEXIST => {
                    io::Error::new(io::ErrorKind::AlreadyExists, "is a directory")
                }
                e => e.into(),
            })
        });
        if renamed.is_err() {
            let _ = unlinkat(&*self.fd, temporary.as_str(), UnlinkatFlags::NoRemoveDir);
        }
        renamed.map(|()| self.path.join(name))
    }

    /// A temporary file for `name`, created exclusively in the directory.
    fn temporary(&self, name: &str) -> io::Result<(String, File)> {
        loop {
            let n = TEMPORARIES.fetch_add(1, Ordering::Relaxed);
            let temporary = format!(".{name}.{}.{n}{TEMPORARY_SUFFIX}", std::process::id());
            match openat(
                &*self.fd,
                temporary.as_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o666),
            ) {
                Ok(fd) => return Ok((temporary, File::from(fd))),
                // Left by a process of the same id before: take the next.
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        match fstatat(&*self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn is_link(&self, name: &str) -> io::Result<bool> {
        let stat = fstatat(&*self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
        Ok(SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
    }
}

/// Removes the file or link `name` (never what a link points to); a
/// directory is refused.
fn remove_entry(dir: &OwnedFd, name: &str) -> io::Result<()> {
    unlinkat(dir, name, UnlinkatFlags::NoRemoveDir).map_err(|e| match e {
        Errno::EISDIR | Errno::EPERM => {
            io::Error::new(io::ErrorKind::AlreadyExists, "is a directory")
        }
        e => e.into(),
    })
}

/// Refuses a name that is not one plain component of a path.
fn plain(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fresh directory with a victim file outside it.
    fn setup(tag: &str) -> (PathBuf, PathBuf) {
        let root =
            std::env::temp_dir().join(format!("rtolab-out-dir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("out")).unwrap();
        let victim = root.join("victim.txt");
        std::fs::write(&victim, "precious").unwrap();
        (root, victim)
    }

    #[test]
    fn a_link_at_a_created_file_is_replaced_not_followed() {
        let (root, victim) = setup("create");
        let out = OutDir::open(&root.join("out")).unwrap();
        symlink(&victim, root.join("out/a.pcap")).unwrap();
        out.create("a.pcap").unwrap().write_all(b"pcap").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let meta = std::fs::symlink_metadata(root.join("out/a.pcap")).unwrap();
        assert!(meta.is_file());
        assert_eq!(std::fs::read(root.join("out/a.pcap")).unwrap(), b"pcap");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_link_at_a_file_written_whole_is_replaced_not_followed() {
        let (root, victim) = setup("atomic");
        let out = OutDir::open(&root.join("out")).unwrap();
        symlink(&victim, root.join("out/metrics.json")).unwrap();
        out.write_atomic("metrics.json", |f| f.write_all(b"{}"))
            .unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read(root.join("out/metrics.json")).unwrap(), b"{}");
        // No temporary is left behind.
        let names: Vec<_> = std::fs::read_dir(root.join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["metrics.json"]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_the_earlier_file_and_no_temporary() {
        let (root, _) = setup("failed");
        let out = OutDir::open(&root.join("out")).unwrap();
        out.write_atomic("m.json", |f| f.write_all(b"old")).unwrap();
        let err = out
            .write_atomic("m.json", |f| {
                f.write_all(b"half")?;
                Err(io::Error::other("stopped"))
            })
            .unwrap_err();
        assert_eq!(err.to_string(), "stopped");
        assert_eq!(std::fs::read(root.join("out/m.json")).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(root.join("out")).unwrap().count(), 1);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_link_at_a_subdirectory_is_replaced_by_a_directory() {
        let (root, victim) = setup("subdir");
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        symlink(&elsewhere, root.join("out/traces")).unwrap();
        let out = OutDir::open(&root.join("out")).unwrap();
        let traces = out.subdir("traces").unwrap();
        traces.create("tcp_cwnd.0.parquet").unwrap();
        assert!(std::fs::symlink_metadata(root.join("out/traces"))
            .unwrap()
            .is_dir());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_fresh_subdirectory_loses_what_an_earlier_run_left() {
        let (root, victim) = setup("fresh");
        let out = OutDir::open(&root.join("out")).unwrap();
        out.subdir("traces")
            .unwrap()
            .create("old.0.parquet")
            .unwrap();
        symlink(&victim, root.join("out/traces/link")).unwrap();
        let traces = out.fresh_subdir("traces").unwrap();
        assert_eq!(std::fs::read_dir(traces.path()).unwrap().count(), 0);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_directory_where_a_file_goes_is_refused_and_kept() {
        let (root, _) = setup("dir");
        let out = OutDir::open(&root.join("out")).unwrap();
        std::fs::create_dir(root.join("out/a.pcap")).unwrap();
        std::fs::write(root.join("out/a.pcap/keep"), "x").unwrap();
        assert!(out.create("a.pcap").is_err());
        assert!(out.write_atomic("a.pcap", |_| Ok(())).is_err());
        std::fs::write(root.join("out/plots"), "a file").unwrap();
        assert!(out.subdir("plots").is_err());
        assert!(root.join("out/a.pcap/keep").is_file());
        assert!(root.join("out/plots").is_file());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn names_that_are_not_plain_are_refused() {
        let (root, _) = setup("names");
        let out = OutDir::open(&root.join("out")).unwrap();
        for name in ["", ".", "..", "../x", "a/b", "a\0b"] {
            assert_eq!(
                out.create(name).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{name:?}"
            );
        }
        assert!(!root.join("x").exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_directory_itself_may_be_a_link() {
        let (root, _) = setup("linked");
        std::fs::create_dir(root.join("real")).unwrap();
        symlink(root.join("real"), root.join("link")).unwrap();
        let out = OutDir::open(&root.join("link")).unwrap();
        out.create("a.pcap").unwrap();
        assert!(root.join("real/a.pcap").is_file());
        std::fs::remove_dir_all(root).unwrap();
    }
}
