//! Binding for `wasmsched:policy@0.1.x`, the first frozen version: the
//! calls every version has ([`super::binding`]), and nothing more.

super::binding::contract_binding!("../wit/0.1.0", "0.1.0");
