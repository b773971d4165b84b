// The entry module of wasmsched's JavaScript interpreter component
// (`wasmsched-js.wasm`): it runs a policy shipped as source, a `.js` module
// written exactly as for a componentized build (it exports `policy`).
//
// ComponentizeJS builds this module and the SDK (wasmsched-helpers.js)
// into one component, SpiderMonkey inside: once per language, not once per
// policy. When an instance starts, the host hands over the policy's files
// (`wasmsched:interpreter/source`, wit/interpreter/0.2.0, on the policy
// contract 0.4); the first call
// evaluates the entry file and every export is the policy's own method
// from then on.
//
// The file is a module, evaluated as a function body: its `import`
// declarations become lookups of the modules a policy may import (the
// host interface and the SDK), its `export` declarations the function's
// result. Both keep their lines, so an error's line is the file's.

import * as host from "wasmsched:policy/host@0.4.0";
import { files } from "wasmsched:interpreter/source@0.2.0";
import * as helpers from "./wasmsched-helpers.js";

// What a policy may import, by the names a componentized build uses: a
// policy written against contract 0.3 imports the same host as 0.4's
// (0.4 added records and calls, and changed none).
const MODULES = {
  "wasmsched:policy/host@0.4.0": host,
  "wasmsched:policy/types@0.4.0": {},
  "wasmsched:policy/host@0.3.0": host,
  "wasmsched:policy/types@0.3.0": {},
  "./wasmsched-helpers.js": helpers,
  "wasmsched-helpers.js": helpers,
};

// `import ... from "x";` and `import "x";` at the start of a line.
const IMPORT = /^([ \t]*)import\s+(?:([\s\S]*?)\s+from\s+)?(["'])([^"'\n]+)\3[ \t]*;?/gm;
// `export` before a declaration at the start of a line.
const EXPORT_DECLARATION = /^([ \t]*)export\s+((?:async\s+)?function\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)/gm;
// `export { a, b as c };`
const EXPORT_LIST = /^([ \t]*)export\s*\{([^}]*)\}[ \t]*;?/gm;
// `import(` of a module at run time (static imports are gone by then).
const DYNAMIC_IMPORT = /\bimport\s*\(/g;

class SourceError extends Error {}

// The same number of line breaks as `text`, so that later lines keep
// their numbers.
function sameLines(text) {
  return "\n".repeat((text.match(/\n/g) || []).length);
}

// `{ a, b as c }` as a destructuring pattern `{ a, b: c }`.
function bindings(clause, path, line) {
  const trimmed = clause.trim();
  if (trimmed.startsWith("* as ")) return trimmed.slice(5).trim();
  if (trimmed.startsWith("{") && trimmed.endsWith("}")) {
    const names = trimmed.slice(1, -1).split(",").map((s) => s.trim()).filter(Boolean);
    return "{ " + names.map((n) => n.replace(/\s+as\s+/, ": ")).join(", ") + " }";
  }
  throw new SourceError(
    `${path}:${line}: import ${trimmed}: a policy's imports name what they take ({ a, b } or * as name); there are no default exports`,
  );
}

function lineOf(text, index) {
  return text.slice(0, index).split("\n").length;
}

// The module's text as the body of a function of `__import`, which
// returns what the module exports; its lines stay where they were.
function asFunctionBody(path, text) {
  const exported = [];
  let body = text.replace(IMPORT, (match, indent, clause, _quote, specifier, offset) => {
    const line = lineOf(text, offset);
    if (!(specifier in MODULES)) {
      const known = Object.keys(MODULES).join(", ");
      throw new SourceError(`${path}:${line}: imports "${specifier}"; a policy shipped as source may import ${known}`);
    }
    if (clause === undefined) return indent + sameLines(match);
    const pattern = bindings(clause, path, line);
    return `${indent}const ${pattern} = __import(${JSON.stringify(specifier)});` + sameLines(match);
  });
  body = body.replace(EXPORT_DECLARATION, (_match, indent, kind, name) => {
    exported.push(name);
    return `${indent}${kind} ${name}`;
  });
  body = body.replace(EXPORT_LIST, (match, indent, list) => {
    for (const item of list.split(",").map((s) => s.trim()).filter(Boolean)) {
      const [local, as] = item.split(/\s+as\s+/);
      exported.push(as === undefined ? local : `${as}: ${local}`);
    }
    return indent + sameLines(match);
  });
  body = body.replace(DYNAMIC_IMPORT, "__importAtRunTime(");
  if (/^[ \t]*export\s+default\b/m.test(body)) {
    throw new SourceError(`${path}: \`export default\`: a policy exports \`policy\` by name (export const policy = {...})`);
  }
  return `${body}\n;return { ${exported.join(", ")} };`;
}

let loaded = null;

// The policy's `policy` object, its file evaluated on the first call.
function load() {
  if (loaded !== null) return loaded;
  const all = files();
  if (all.length === 0) throw new Error("the host gave no source: this component runs policies shipped as .js files");
  const { path, text } = all[0];
  // The body starts on the header's line, so that line numbers are the
  // file's (the Function constructor would add two lines before it).
  const source = `(function (__import, __importAtRunTime, fetch) {${asFunctionBody(path, text)}\n})\n//# sourceURL=${path}`;
  const module = (0, eval)(source)((specifier) => MODULES[specifier], importAtRunTime, noNetwork);
  if (module.policy === undefined) {
    throw new SourceError(`${path} exports no \`policy\` (export const policy = { describe() {...}, ... })`);
  }
  loaded = module.policy;
  return loaded;
}

// What a policy has instead of `import()` and `fetch()`: it runs on what
// the scheduler hands it, and reaches nothing else.
function importAtRunTime(specifier) {
  throw new Error(
    `import(${JSON.stringify(specifier)}): a policy cannot load modules as it runs; import what it uses at the top of its file (the host interface and the SDK's helpers)`,
  );
}

function noNetwork(resource) {
  throw new Error(
    `fetch(${JSON.stringify(String(resource))}): a policy has no network; it decides on what the scheduler hands it (the pod, the nodes, node metrics, its settings)`,
  );
}

// Frames of a stack an author reads; the rest are counted.
const SHOWN_FRAMES = 12;

// An exception as its author reads it: its message, then the frames of the
// stack (file:line:column), as ComponentizeJS prints an uncaught one.
function authorsWords(e) {
  if (!(e instanceof Error)) {
    let shown;
    try {
      shown = JSON.stringify(e);
    } catch {
      shown = undefined;
    }
    return `uncaught exception: ${shown ?? String(e)}`;
  }
  // A recursion's frames, one line a run: `f@x.js:3:5 (1000 times)`.
  const runs = [];
  for (const frame of String(e.stack ?? "").split("\n").map((f) => f.trim()).filter((f) => f !== "")) {
    const last = runs[runs.length - 1];
    if (last !== undefined && last.frame === frame) last.times += 1;
    else runs.push({ frame, times: 1 });
  }
  const kept = runs.slice(0, SHOWN_FRAMES).map(({ frame, times }) => `  ${frame}${times > 1 ? ` (${times} times)` : ""}`);
  if (runs.length > SHOWN_FRAMES) kept.push(`  … ${runs.length - SHOWN_FRAMES} more frames`);
  return [`${e.name}: ${e.message}`, "Stack:", ...kept].join("\n");
}

// Runs a method whose contract answer may be an error (a `result`): a
// thrown string is that error, the policy's own words (a setting refused,
// a call declined); anything else thrown is the policy failing, told on
// stderr in its words and line before the call traps, as an uncaught
// exception in any other method is.
function guarded(call) {
  try {
    return call();
  } catch (e) {
    if (typeof e === "string") throw e;
    console.error(authorsWords(e));
    throw e;
  }
}

// A record made of a 0.3 policy's `describe()`, completed for 0.4: it
// names two phases, and does not place groups.
function described(info) {
  return { ...info, phases: { place: false, ...info.phases } };
}

export const policy = {
  describe() {
    return described(load().describe());
  },
  init() {
    return guarded(() => load().init());
  },
  syncNodes(reset, changes) {
    return load().syncNodes(reset, changes);
  },
  filter(pod, candidates) {
    return guarded(() => load().filter(pod, candidates));
  },
  score(pod, candidates, seed) {
    return guarded(() => load().score(pod, candidates, seed));
  },
  explainScore(pod, candidates, seed) {
    return guarded(() => load().explainScore(pod, candidates, seed));
  },
  // The place phase (contract 0.4). A policy that declares it and leaves
  // one of these out gets the Rust SDK's defaults: no domains (the group
  // placed over every node), every placement scored 0 (the first wins).
  placementDomains(pod) {
    const policy = load();
    // `null` is none too, as a policy run natively by its tests may say it.
    if (policy.placementDomains === undefined) return undefined;
    return guarded(() => policy.placementDomains(pod) ?? undefined);
  },
  scorePlacement(pod, placements) {
    const policy = load();
    if (policy.scorePlacement === undefined) return new Uint8Array(8 * placements.length);
    return guarded(() => policy.scorePlacement(pod, placements));
  },
};
