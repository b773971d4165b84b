//! What a component holds before it is compiled: its functions, the
//! locals of its largest function and the bytes of its largest function
//! body, over every core module inside it. Compile time grows with these,
//! so a component far past what any real policy has (the Python and
//! JavaScript interpreters included) is refused before a compile starts.

use wasmparser::{Parser, Payload};

/// What real policies stay far below: the Python interpreter's component
/// has the most functions and the largest bodies of those we ship
/// (docs/security.md gives their figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeLimits {
    pub functions: u64,
    pub locals_per_function: u64,
    pub body_bytes: u64,
}

impl Default for ShapeLimits {
    /// About four to seven times the Python interpreter's component (13,365
    /// functions, 271 locals in its largest function, a 427 KB body).
    fn default() -> Self {
        ShapeLimits { functions: 50_000, locals_per_function: 2_000, body_bytes: 2 << 20 }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    pub functions: u64,
    pub max_locals: u64,
    pub max_body_bytes: u64,
}

/// The component's shape, or why it cannot be read.
pub fn shape_of(bytes: &[u8]) -> Result<Shape, String> {
    let mut shape = Shape::default();
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| e.to_string())?;
        if let Payload::CodeSectionEntry(body) = payload {
            shape.functions += 1;
            shape.max_body_bytes = shape.max_body_bytes.max(body.range().len() as u64);
            let mut locals = 0u64;
            for local in body.get_locals_reader().map_err(|e| e.to_string())? {
                let (count, _) = local.map_err(|e| e.to_string())?;
                locals = locals.saturating_add(u64::from(count));
            }
            shape.max_locals = shape.max_locals.max(locals);
        }
    }
    Ok(shape)
}

impl Shape {
    /// The first limit this shape is past, in words.
    pub fn past(&self, limits: &ShapeLimits) -> Option<String> {
        if self.functions > limits.functions {
            return Some(format!("{} functions, over the limit of {}", self.functions, limits.functions));
        }
        if self.max_locals > limits.locals_per_function {
            return Some(format!(
                "a function with {} locals, over the limit of {}",
                self.max_locals, limits.locals_per_function
            ));
        }
        if self.max_body_bytes > limits.body_bytes {
            return Some(format!(
                "a function body of {} bytes, over the limit of {}",
                self.max_body_bytes, limits.body_bytes
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component whose one core function declares `locals` locals.
    fn component_with_locals(locals: u32) -> Vec<u8> {
        use wasm_encoder::{
            CodeSection, Component, Function, FunctionSection, Module, ModuleSection, TypeSection, ValType,
        };
        let mut module = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], []);
        module.section(&types);
        let mut functions = FunctionSection::new();
        functions.function(0);
        module.section(&functions);
        let mut code = CodeSection::new();
        let mut body = Function::new([(locals, ValType::I64)]);
        body.instructions().end();
        code.function(&body);
        module.section(&code);
        let mut component = Component::new();
        component.section(&ModuleSection(&module));
        component.finish()
    }

    #[test]
    fn a_component_past_the_limits_is_refused_before_compiling() {
        let shape = shape_of(&component_with_locals(20_000)).unwrap();
        assert_eq!((shape.functions, shape.max_locals), (1, 20_000));
        let source = crate::PolicySource::new("locals.wasm", component_with_locals(20_000));
        let engine = crate::PolicyEngine::new().unwrap();
        let err = engine.load(&source, "{}", crate::PolicyLimits::default()).err().unwrap();
        assert_eq!(
            err.to_string(),
            "locals.wasm: compiling failed: refused before compiling: a function with 20000 locals, over the limit of 2000; no real policy comes near"
        );
    }

    #[test]
    fn past_names_the_first_limit_crossed() {
        let limits = ShapeLimits::default();
        let real = Shape { functions: 13_365, max_locals: 271, max_body_bytes: 426_843 };
        assert_eq!(real.past(&limits), None);
        let locals = Shape { max_locals: 20_000, ..real };
        assert_eq!(locals.past(&limits).unwrap(), "a function with 20000 locals, over the limit of 2000");
        let functions = Shape { functions: 100_000, ..real };
        assert_eq!(functions.past(&limits).unwrap(), "100000 functions, over the limit of 50000");
    }
}
