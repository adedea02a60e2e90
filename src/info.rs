//! What `phpinfo()` and `php --ri resilient` show: the build's version, the shared-memory
//! layout it uses and the segment file of this process, then the settings. Two builds that
//! share a version number can differ in layout; the layout version tells an operator whether
//! processes of two builds count in one segment (same layout) or apart (see
//! docs/shared-memory.md, "Upgrading").

use std::panic::{catch_unwind, AssertUnwindSafe};

use ext_php_rs::zend::ModuleEntry;
use ext_php_rs::{info_table_end, info_table_row, info_table_start};

/// The module's info function (`PHP_MINFO`).
///
/// # Safety
/// Called by the engine only, with its live module entry.
pub unsafe extern "C" fn module_info(module: *mut ModuleEntry) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let layout = resilient_core::layout::LAYOUT_VERSION.to_string();
        // The path in effect for this process (its uid's default, or resilient.shm_path); the
        // one way it fails is a refused resilient.shm_path.
        let segment = crate::segment::path().map_or_else(
            |_| "(unknown: resilient.shm_path was refused)".to_owned(),
            |path| path.display().to_string(),
        );
        info_table_start!();
        info_table_row!("Version", env!("CARGO_PKG_VERSION"));
        info_table_row!("Shared-memory layout version", layout);
        info_table_row!("Shared-memory segment (this process)", segment);
        info_table_end!();
        if let Some(display_ini_entries) = crate::engine::display_ini_entries() {
            // SAFETY: the engine passes its live module entry.
            unsafe { display_ini_entries(module) };
        }
    }));
}
