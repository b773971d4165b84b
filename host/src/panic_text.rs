//! What a caught panic said, for the error that replaces it (a tenant's
//! or a candidate's evaluation, a bundle's validation).

/// The panic's message, or "" when it carried no text.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}
