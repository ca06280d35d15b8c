//! A temp folder per run, so that tests running in parallel never share a file and a kept one
//! (`WEIR_KEEP_TEMP`) shows everything a failed run left.

use std::path::{Path, PathBuf};

/// A fresh temp folder holding one run's job file, input, output and checkpoints.
/// Deleted on drop, unless `WEIR_KEEP_TEMP` is set (then its path is printed).
pub(crate) struct Sandbox {
    dir: Option<tempfile::TempDir>,
}

impl Sandbox {
    /// A new empty folder, named after `label` for whoever looks at a kept one.
    pub(crate) fn new(label: &str) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix(&format!("weir-{label}-"))
            .tempdir()
            .expect("a temp dir");
        Sandbox { dir: Some(dir) }
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        self.dir.as_ref().expect("present until drop").path()
    }

    /// A path inside the folder.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }

    /// Where the job's file sink writes.
    pub(crate) fn out_dir(&self) -> PathBuf {
        self.join("out")
    }

    /// The job's checkpoint directory.
    pub(crate) fn checkpoint_dir(&self) -> PathBuf {
        self.join("checkpoints")
    }

    /// Where the job file goes.
    pub(crate) fn job_path(&self) -> PathBuf {
        self.join("job.toml")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if std::env::var_os("WEIR_KEEP_TEMP").is_some()
            && let Some(dir) = self.dir.take()
        {
            eprintln!("kept {}", dir.keep().display());
        }
    }
}
