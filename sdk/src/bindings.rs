//! Raw bindings generated from `wit/0.5.0`. Policies normally use the
//! typed views of the crate root instead.
wit_bindgen::generate!({
    path: "../wit/0.5.0",
    world: "scheduler-policy",
    pub_export_macro: true,
    export_macro_name: "__export_scheduler_policy",
    default_bindings_module: "wasmsched_sdk::bindings",
    runtime_path: "wasmsched_sdk::__wit_bindgen::rt",
    additional_derives: [PartialEq],
});
