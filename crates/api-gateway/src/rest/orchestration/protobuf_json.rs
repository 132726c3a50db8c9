//! JSON ⇄ `google.protobuf.Struct` for the Heat API: the shared conversion
//! of `ember_runtime`, re-exported where the REST handlers and the CLI use it.

pub use ember_runtime::protobuf_json::*;
