//! Components no SDK would build: a raw core module, made a component of
//! the policy world by wit-component, whose `score` grows a table, or a
//! second memory, until it is refused. Both count against the instance's
//! one memory budget: the call fails as out of memory naming what grew,
//! after little CPU, and the next call gets a fresh instance.

use std::time::Duration;

use wasm_encoder::{
    AbstractHeapType, BlockType, CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function,
    FunctionSection, GlobalSection, GlobalType, HeapType, Instruction, MemorySection, MemoryType, Module, RefType,
    TableSection, TableType, TypeSection, ValType,
};
use wasmsched_runtime::{PolicyError, PolicyLimits, PolicySource};

use crate::policy_runtime::{engine, pod, three_nodes};

#[derive(Clone, Copy)]
enum Grows {
    Table,
    SecondMemory,
}

/// Where `describe`'s answer lies in memory.
const INFO: u32 = 1024;
const INIT_OK: u32 = 1200;
const NAME: &str = "hostile-raw";
const VERSION: &str = "0.1.0";

fn component(grows: Grows) -> Vec<u8> {
    let mut module = core_module(grows);
    let mut resolve = wit_parser::Resolve::default();
    let wit = concat!(env!("CARGO_MANIFEST_DIR"), "/../wit/0.1.0");
    let (package, _) = resolve.push_dir(wit).unwrap();
    let world = resolve.select_world(&[package], Some("scheduler-policy")).unwrap();
    wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8).unwrap();
    wit_component::ComponentEncoder::default().module(&module).unwrap().validate(true).encode().unwrap()
}

/// The policy world's exports in the canonical ABI: `describe` and `init`
/// answer from data, `score` misbehaves, `filter` is never called (the
/// policy says it does not filter), `sync-nodes` ignores its nodes.
fn core_module(grows: Grows) -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], [ValType::I32]); // describe, init
    types.ty().function([ValType::I32; 3], []); // sync-nodes
    types.ty().function([ValType::I32], [ValType::I32]); // filter, score (parameters by pointer)
    types.ty().function([ValType::I32; 4], [ValType::I32]); // cabi_realloc
    module.section(&types);
    let mut functions = FunctionSection::new();
    for ty in [0, 0, 1, 2, 2, 3] {
        functions.function(ty);
    }
    module.section(&functions);
    let mut tables = TableSection::new();
    tables.table(TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: 0,
        maximum: None,
        shared: false,
    });
    module.section(&tables);
    let mut memories = MemorySection::new();
    for minimum in [1, 0] {
        memories.memory(MemoryType { minimum, maximum: None, memory64: false, shared: false, page_size_log2: None });
    }
    module.section(&memories);
    let mut globals = GlobalSection::new();
    globals.global(GlobalType { val_type: ValType::I32, mutable: true, shared: false }, &ConstExpr::i32_const(4096));
    module.section(&globals);
    let mut exports = ExportSection::new();
    let interface = "wasmsched:policy/policy@0.1.0";
    for (i, name) in ["describe", "init", "sync-nodes", "filter", "score"].iter().enumerate() {
        exports.export(&format!("{interface}#{name}"), ExportKind::Func, i as u32);
    }
    exports.export("cabi_realloc", ExportKind::Func, 5);
    exports.export("memory", ExportKind::Memory, 0);
    module.section(&exports);
    let mut code = CodeSection::new();
    code.function(&returns(INFO));
    code.function(&returns(INIT_OK));
    code.function(&body(&[], &[]));
    code.function(&body(&[], &[Instruction::Unreachable]));
    code.function(&grow_until_refused(grows));
    code.function(&bump_allocator());
    module.section(&code);
    module.section(&describe_data());
    module.finish()
}

fn body(locals: &[(u32, ValType)], instructions: &[Instruction]) -> Function {
    let mut f = Function::new(locals.iter().copied());
    for i in instructions {
        f.instruction(i);
    }
    f.instruction(&Instruction::End);
    f
}

fn returns(address: u32) -> Function {
    body(&[], &[Instruction::I32Const(address as i32)])
}

/// Grows by 64k table elements (or 16 pages) until refused, then traps.
fn grow_until_refused(grows: Grows) -> Function {
    let grow = match grows {
        Grows::Table => vec![
            Instruction::RefNull(HeapType::Abstract { shared: false, ty: AbstractHeapType::Func }),
            Instruction::I32Const(1 << 16),
            Instruction::TableGrow(0),
        ],
        Grows::SecondMemory => vec![Instruction::I32Const(16), Instruction::MemoryGrow(1)],
    };
    let mut instructions = vec![Instruction::Block(BlockType::Empty), Instruction::Loop(BlockType::Empty)];
    instructions.extend(grow);
    instructions.extend([
        Instruction::I32Const(-1),
        Instruction::I32Eq,
        Instruction::BrIf(1),
        Instruction::Br(0),
        Instruction::End,
        Instruction::End,
        Instruction::Unreachable,
    ]);
    body(&[], &instructions)
}

/// `cabi_realloc(old, old_size, align, size)`: a bump allocator in
/// memory 0, growing it as needed.
fn bump_allocator() -> Function {
    use Instruction::*;
    body(
        &[(1, ValType::I32)],
        &[
            // start = (heap + align - 1) & -align
            GlobalGet(0),
            LocalGet(2),
            I32Add,
            I32Const(1),
            I32Sub,
            I32Const(0),
            LocalGet(2),
            I32Sub,
            I32And,
            LocalTee(4),
            LocalGet(3),
            I32Add,
            GlobalSet(0),
            Block(BlockType::Empty),
            Loop(BlockType::Empty),
            GlobalGet(0),
            MemorySize(0),
            I32Const(16),
            I32Shl,
            I32LeU,
            BrIf(1),
            I32Const(1),
            MemoryGrow(0),
            I32Const(-1),
            I32Eq,
            If(BlockType::Empty),
            Unreachable,
            End,
            Br(0),
            End,
            End,
            LocalGet(4),
        ],
    )
}

/// `policy-info` at `INFO` (name, version, description as pointer and
/// length; phases: no filter, score; higher is better), its strings after.
fn describe_data() -> DataSection {
    let description = "grows what it is given";
    let strings = INFO + 32;
    let (version_at, description_at) = (strings + NAME.len() as u32, strings + (NAME.len() + VERSION.len()) as u32);
    let mut info = Vec::new();
    for word in [strings, NAME.len() as u32, version_at, VERSION.len() as u32, description_at, description.len() as u32]
    {
        info.extend(word.to_le_bytes());
    }
    info.extend([0, 1, 0, 0]);
    info.resize(32, 0);
    info.extend(NAME.bytes().chain(VERSION.bytes()).chain(description.bytes()));
    let mut data = DataSection::new();
    data.active(0, &ConstExpr::i32_const(INFO as i32), info);
    data
}

#[test]
fn a_table_or_a_second_memory_grows_only_within_the_instances_memory_budget() {
    // The memory cap alone stops the growth: a deadline a busy machine
    // can pass while the call waits for a core would stop it first.
    let limits =
        PolicyLimits { memory_bytes: 16 << 20, call_deadline: Duration::from_secs(30), ..PolicyLimits::default() };
    for (grows, what) in [(Grows::Table, "table"), (Grows::SecondMemory, "linear memory")] {
        let source = PolicySource::new("raw.wasm", component(grows));
        let policy = engine().load(&source, "{}", limits.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(policy.name(), NAME);
        let (ctx, candidates) = three_nodes();
        // A 0.1 policy has no breakdown of its scores: none is asked for.
        assert!(policy.explain_score(&ctx, &pod("p", &[]), &candidates, 0).unwrap().is_none());
        let created = policy.instances_created();
        // Refused at the cap, not after growing for long: the call's own
        // CPU (it runs on this thread), which a busy machine does not grow.
        let (scored, cpu) = wasmsched_runtime::cpu_time::measure(|| policy.score(&ctx, &pod("p", &[]), &candidates, 0));
        let err = scored.unwrap_err();
        match &err {
            PolicyError::OutOfMemory { what: grew, limit, requested, .. } => {
                assert_eq!((*grew, *limit), (what, 16 << 20), "{err}");
                assert!(*requested > *limit, "{err}");
            }
            other => panic!("{what}: expected out of memory, got {other}"),
        }
        assert!(cpu < Duration::from_secs(2), "{what}: refused after {cpu:?} of CPU");
        // The instance is replaced: the next call starts from a fresh one.
        let _ = policy.score(&ctx, &pod("q", &[]), &candidates, 0);
        assert!(policy.instances_created() > created, "{what}: the trapped instance was replaced");
    }
}
