//! kube's CEL environment for DRA device selectors: one variable,
//! `device`, with `driver`, `attributes[domain][name]`,
//! `capacity[domain][name]` and `allowMultipleAllocations`; version
//! attributes are semantic versions and capacities are quantities, with the
//! helpers kube's library adds for both (`quantity("1Gi")`,
//! `semver("1.2.3")`, `compareTo`, `isGreaterThan`, `isLessThan`, …).
//!
//! A selector is compiled once, when its class or claim is stored; a
//! device's `device` value is built once, when its slice is stored.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Key, Map, Opaque};
use cel::{Context, ExecutionError, Program, Value};

/// A device attribute as a slice publishes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    Int(i64),
    Bool(bool),
    String(String),
    Version(semver::Version),
}

impl Attribute {
    fn value(&self) -> Value {
        match self {
            Attribute::Int(i) => Value::Int(*i),
            Attribute::Bool(b) => Value::Bool(*b),
            Attribute::String(s) => Value::String(Arc::new(s.clone())),
            Attribute::Version(v) => Value::Opaque(Arc::new(SemVer(v.clone()))),
        }
    }
}

/// A compiled selector expression.
pub struct Selector {
    pub source: String,
    /// Unique per compilation: what devices remember their verdicts by.
    pub id: u64,
    program: Program,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

impl Selector {
    /// `Err`: kube's validation would have refused it; said as the
    /// compiler says it.
    pub fn compile(source: &str) -> Result<Selector, String> {
        let program = Program::compile(source).map_err(|e| format!("compilation failed: {e}"))?;
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Selector { source: source.to_string(), id, program })
    }

    /// Whether `device` matches; `Err` is a runtime error (a missing
    /// attribute, a result that is not a bool).
    pub fn matches(&self, device: &Value) -> Result<bool, String> {
        ROOT.with(|root| {
            let mut scope = root.new_inner_scope();
            scope.add_variable_from_value("device", device.clone());
            match self.program.execute(&scope) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!("expression must return a bool, got {:?}", other.type_of().to_string())),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

thread_local! {
    /// The functions kube adds, registered once per thread: building a
    /// context per evaluation would cost more than the evaluation.
    static ROOT: Context<'static, 'static> = root_context();
}

/// The `device` value of one device of `driver`: attribute and capacity
/// names without a domain are in the driver's.
pub fn device_value<'a>(
    driver: &str,
    attributes: impl Iterator<Item = (&'a str, &'a Attribute)>,
    capacity: impl Iterator<Item = (&'a str, u64)>,
    allow_multiple_allocations: bool,
) -> Value {
    let mut by_domain: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    by_domain.entry(key(driver)).or_default();
    for (name, attribute) in attributes {
        let (domain, id) = qualified(driver, name);
        by_domain.entry(key(domain)).or_default().insert(key(id), attribute.value());
    }
    let mut capacities: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    capacities.entry(key(driver)).or_default();
    for (name, milli) in capacity {
        let (domain, id) = qualified(driver, name);
        capacities.entry(key(domain)).or_default().insert(key(id), Value::Opaque(Arc::new(Quantity(milli))));
    }
    let nested = |m: HashMap<Key, HashMap<Key, Value>>| {
        Value::Map(Map::from(m.into_iter().map(|(k, v)| (k, Value::Map(Map::from(v)))).collect::<HashMap<_, _>>()))
    };
    let fields = HashMap::from([
        (key("driver"), Value::String(Arc::new(driver.to_string()))),
        (key("attributes"), nested(by_domain)),
        (key("capacity"), nested(capacities)),
        (key("allowMultipleAllocations"), Value::Bool(allow_multiple_allocations)),
    ]);
    Value::Map(Map::from(fields))
}

/// `domain/id`, or `id` in the driver's domain.
pub fn qualified<'a>(driver: &'a str, name: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

fn key(s: &str) -> Key {
    Key::String(Arc::new(s.to_string()))
}

/// A quantity in thousandths (device capacities are never negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(pub u64);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SemVer(semver::Version);

impl Opaque for SemVer {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

fn root_context() -> Context<'static, 'static> {
    let mut ctx = Context::default();
    let add = |ctx: &mut Context<'static, 'static>, result: Result<(), cel::DeclarationError>| {
        result.expect("kube's DRA functions do not clash with CEL's standard library");
        let _ = ctx;
    };
    let r = ctx.add_function("quantity", |s: Arc<String>| parse_quantity(&s));
    add(&mut ctx, r);
    let r = ctx.add_function("isQuantity", |s: Arc<String>| parse_quantity(&s).is_ok());
    add(&mut ctx, r);
    let r = ctx.add_function("semver", |s: Arc<String>| parse_semver(&s));
    add(&mut ctx, r);
    let r = ctx.add_function("isSemver", |s: Arc<String>| parse_semver(&s).is_ok());
    add(&mut ctx, r);
    let r = ctx.add_function("compareTo", |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
        compare(&a, &b).map(|o| o as i64)
    });
    add(&mut ctx, r);
    let r = ctx.add_function("isGreaterThan", |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
        compare(&a, &b).map(|o| o == Ordering::Greater)
    });
    add(&mut ctx, r);
    let r = ctx.add_function("isLessThan", |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
        compare(&a, &b).map(|o| o == Ordering::Less)
    });
    add(&mut ctx, r);
    add_version_parts(&mut ctx);
    add_quantity_members(&mut ctx);
    ctx
}

fn add_version_parts(ctx: &mut Context<'static, 'static>) {
    for (name, part) in [("major", 0), ("minor", 1), ("patch", 2)] {
        ctx.add_function(name, move |This(v): This<Arc<dyn Opaque>>| {
            let v = semver_of(&v)?;
            Ok::<i64, ExecutionError>([v.major, v.minor, v.patch][part] as i64)
        })
        .expect("no clash with the standard library");
    }
}

fn add_quantity_members(ctx: &mut Context<'static, 'static>) {
    ctx.add_function("asInteger", |This(q): This<Arc<dyn Opaque>>| {
        let q = quantity_of(&q)?;
        if q.0 % 1000 != 0 {
            return Err(ExecutionError::function_error("asInteger", "cannot convert value to integer"));
        }
        i64::try_from(q.0 / 1000).map_err(|_| ExecutionError::function_error("asInteger", "integer overflow"))
    })
    .expect("no clash with the standard library");
    ctx.add_function("isInteger", |This(q): This<Arc<dyn Opaque>>| {
        Ok::<bool, ExecutionError>(quantity_of(&q)?.0 % 1000 == 0)
    })
    .expect("no clash with the standard library");
    ctx.add_function("asApproximateFloat", |This(q): This<Arc<dyn Opaque>>| {
        Ok::<f64, ExecutionError>(quantity_of(&q)?.0 as f64 / 1000.0)
    })
    .expect("no clash with the standard library");
    ctx.add_function("sign", |This(q): This<Arc<dyn Opaque>>| {
        Ok::<i64, ExecutionError>(i64::from(quantity_of(&q)?.0 > 0))
    })
    .expect("no clash with the standard library");
}

fn parse_quantity(s: &str) -> Result<Value, ExecutionError> {
    wasmsched_rules::quantity::milli_value(s)
        .map(|m| Value::Opaque(Arc::new(Quantity(m))))
        .map_err(|e| ExecutionError::function_error("quantity", e.to_string()))
}

fn parse_semver(s: &str) -> Result<Value, ExecutionError> {
    semver::Version::parse(s)
        .map(|v| Value::Opaque(Arc::new(SemVer(v))))
        .map_err(|e| ExecutionError::function_error("semver", format!("invalid semver {s:?}: {e}")))
}

fn quantity_of(v: &Arc<dyn Opaque>) -> Result<Quantity, ExecutionError> {
    v.downcast_ref::<Quantity>().copied().ok_or_else(|| ExecutionError::function_error("quantity", "not a quantity"))
}

fn semver_of(v: &Arc<dyn Opaque>) -> Result<&semver::Version, ExecutionError> {
    v.downcast_ref::<SemVer>().map(|s| &s.0).ok_or_else(|| ExecutionError::function_error("semver", "not a semver"))
}

/// Quantities with quantities, versions with versions (kube ignores build
/// metadata, as semantic versioning says).
fn compare(a: &Arc<dyn Opaque>, b: &Arc<dyn Opaque>) -> Result<Ordering, ExecutionError> {
    if let (Some(x), Some(y)) = (a.downcast_ref::<Quantity>(), b.downcast_ref::<Quantity>()) {
        return Ok(x.cmp(y));
    }
    if let (Some(x), Some(y)) = (a.downcast_ref::<SemVer>(), b.downcast_ref::<SemVer>()) {
        return Ok(x.0.cmp_precedence(&y.0));
    }
    Err(ExecutionError::function_error("compareTo", "arguments of different types"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> Value {
        let attributes = [
            ("model".to_string(), Attribute::String("a100".into())),
            ("driverVersion".to_string(), Attribute::Version(semver::Version::parse("1.2.3").unwrap())),
            ("other.example.com/cores".to_string(), Attribute::Int(8)),
        ];
        let capacity = [("memory".to_string(), 80 * 1024 * 1024 * 1024 * 1000u64)];
        device_value(
            "gpu.example.com",
            attributes.iter().map(|(k, v)| (k.as_str(), v)),
            capacity.iter().map(|(k, v)| (k.as_str(), *v)),
            false,
        )
    }

    fn eval(expr: &str) -> Result<bool, String> {
        Selector::compile(expr)?.matches(&gpu())
    }

    #[test]
    fn attributes_are_read_by_domain_with_the_drivers_as_default() {
        assert_eq!(eval(r#"device.attributes["gpu.example.com"].model == "a100""#), Ok(true));
        assert_eq!(eval(r#"device.attributes["gpu.example.com"].model == "h100""#), Ok(false));
        assert_eq!(eval(r#"device.attributes["other.example.com"].cores >= 8"#), Ok(true));
        assert_eq!(eval(r#"device.driver == "gpu.example.com""#), Ok(true));
    }

    #[test]
    fn quantities_and_versions_compare_with_kubes_helpers() {
        let memory = r#"device.capacity["gpu.example.com"].memory"#;
        assert_eq!(eval(&format!(r#"{memory}.compareTo(quantity("40Gi")) > 0"#)), Ok(true));
        assert_eq!(eval(&format!(r#"{memory}.isLessThan(quantity("40Gi"))"#)), Ok(false));
        assert_eq!(eval(&format!(r#"{memory} == quantity("80Gi")"#)), Ok(true));
        let version = r#"device.attributes["gpu.example.com"].driverVersion"#;
        assert_eq!(eval(&format!(r#"{version}.isGreaterThan(semver("1.2.0"))"#)), Ok(true));
        assert_eq!(eval(&format!(r#"{version}.major() == 1"#)), Ok(true));
    }

    #[test]
    fn a_missing_attribute_or_a_non_bool_is_an_error_and_bad_syntax_does_not_compile() {
        assert!(eval(r#"device.attributes["gpu.example.com"].nothere == 1"#).is_err());
        assert!(eval(r#"device.driver"#).is_err());
        assert!(Selector::compile("device.driver ==").is_err());
    }
}
