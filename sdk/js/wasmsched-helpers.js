// wasmsched's helpers for policies in JavaScript: the Rust SDK's, with the
// same names and formulas (wasmsched's sdk/README.md, "The helpers,
// exactly"). `wasmsched new --lang js` ships this file in src/;
// ComponentizeJS builds it into the component beside policy.js.
//
// Settings: read each key with `str`, `number` or `flag`, then call
// `checkAllRead()`: a key the policy never asked for (most often a
// misspelled one) is refused, naming the nearest key it did ask for. Every
// error is a thrown string, which rejects the policy when it loads.
//
// CPU and memory are BigInts, as the contract's u64 values arrive.
//
// The contract (wit/policy.wit, wasmsched:policy 0.4) sends each call's
// per-node numbers as packed bytes, one Uint8Array a column:
// `columns(candidates)` reads them as typed arrays, `packScores` and
// `packVerdicts` pack an answer. `filterEach`, `scoreEach` and
// `explainEach` do all of that for a function of one node. A gang's
// placements (the `place` phase) arrive as the contract's records:
// `Nodes.placements` makes PlacementViews of them, and `packScores` packs
// their scores.
//
// The reference: wasmsched's sdk/reference/javascript.md lists every export
// with its signature, beside the Rust and Python names.

import { log, nodeMetrics } from "wasmsched:policy/host@0.4.0";

// kube-scheduler's MaxNodeScore: scores of the built-in plugins are 0..100.
export const MAX_NODE_SCORE = 100n;

// Packed little-endian numbers (wasm is little-endian) as a typed array
// of `Type`: a view where the bytes are aligned for it, else a copy.
function packed(bytes, Type, what) {
  const size = Type.BYTES_PER_ELEMENT;
  // Not `instanceof`: ComponentizeJS makes its Uint8Arrays in a realm
  // of its own.
  if (!ArrayBuffer.isView(bytes) || bytes.BYTES_PER_ELEMENT !== 1) {
    throw `the candidates' ${what} column is not packed bytes`;
  }
  if (bytes.length % size !== 0) throw `the candidates' ${what} column is ${bytes.length} bytes, not ${size} a node`;
  return bytes.byteOffset % size === 0
    ? new Type(bytes.buffer, bytes.byteOffset, bytes.length / size)
    : new Type(bytes.slice().buffer);
}

// A call's candidates as typed arrays over the contract's packed bytes,
// one entry per candidate in order: `nodes` and `podCount` (Uint32Array),
// `requestedMilliCpu`, `requestedMemory`, `requestedEphemeralStorage`,
// `nonzeroRequestedMilliCpu`, `nonzeroRequestedMemory` (BigUint64Array);
// `length`, the number of candidates.
export class Columns {
  constructor(candidates) {
    this.nodes = packed(candidates.nodes, Uint32Array, "nodes");
    this.requestedMilliCpu = packed(candidates.requestedMilliCpu, BigUint64Array, "requestedMilliCpu");
    this.requestedMemory = packed(candidates.requestedMemory, BigUint64Array, "requestedMemory");
    this.requestedEphemeralStorage = packed(
      candidates.requestedEphemeralStorage, BigUint64Array, "requestedEphemeralStorage",
    );
    this.nonzeroRequestedMilliCpu = packed(candidates.nonzeroRequestedMilliCpu, BigUint64Array, "nonzeroRequestedMilliCpu");
    this.nonzeroRequestedMemory = packed(candidates.nonzeroRequestedMemory, BigUint64Array, "nonzeroRequestedMemory");
    this.podCount = packed(candidates.podCount, Uint32Array, "podCount");
    this.length = this.nodes.length;
  }
}

// The call's candidates as columns of numbers (see `Columns`).
export function columns(candidates) {
  return candidates instanceof Columns ? candidates : new Columns(candidates);
}

// Raw scores (Numbers), one a candidate in order, as the contract's
// `score` returns them: f64s, little-endian.
export function packScores(scores) {
  return new Uint8Array(Float64Array.from(scores).buffer);
}

// Filter verdicts, one a candidate in order (0 passes, k is the k-th
// reason), as the contract's `filter-verdicts` carries them: u32s,
// little-endian.
export function packVerdicts(verdicts) {
  return new Uint8Array(Uint32Array.from(verdicts).buffer);
}

export class Settings {
  // `text`: the document the scheduler hands over as JSON (it converts the
  // YAML file).
  constructor(text) {
    let raw;
    try {
      raw = JSON.parse(text.trim() === "" ? "{}" : text);
    } catch (e) {
      throw `the settings are not JSON: ${e.message}`;
    }
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      throw `the settings must be a mapping, got ${text}`;
    }
    this.raw = raw;
    this.asked = [];
  }

  #get(key) {
    if (!this.asked.includes(key)) this.asked.push(key);
    return Object.hasOwn(this.raw, key) ? this.raw[key] : null;
  }

  // A string setting; `fallback` when absent or null.
  str(key, fallback = null) {
    const value = this.#get(key);
    if (value === null) return fallback;
    if (typeof value !== "string") throw `setting \`${key}\` must be a string, got ${JSON.stringify(value)}`;
    return value;
  }

  // A finite number (or a string that parses as one); `fallback` when
  // absent or null.
  number(key, fallback = null) {
    let value = this.#get(key);
    if (value === null) return fallback;
    if (typeof value === "string" && value.trim() !== "") value = Number(value.trim());
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw `setting \`${key}\` must be a number, got ${JSON.stringify(this.raw[key])}`;
    }
    return value;
  }

  // A true/false setting; `fallback` when absent or null.
  flag(key, fallback = null) {
    const value = this.#get(key);
    if (value === null) return fallback;
    if (typeof value !== "boolean") throw `setting \`${key}\` must be true or false, got ${JSON.stringify(value)}`;
    return value;
  }

  // Refuses the settings the policy never asked for, with the nearest name
  // it did ask for. Call it last in `init`.
  checkAllRead() {
    const unread = Object.keys(this.raw).filter((k) => !this.asked.includes(k)).sort();
    if (unread.length === 0) return;
    const known = [...this.asked].sort();
    const named = unread.map((key) => {
      const near = nearest(key, known);
      return near === null ? `\`${key}\`` : `\`${key}\` (did you mean \`${near}\`?)`;
    });
    const plural = unread.length > 1 ? "s" : "";
    const reads = known.length > 0 ? known.join(", ") : "no settings";
    throw `unknown setting${plural} ${named.join(", ")}; this policy reads ${reads}`;
  }
}

// The name in `known` closest to `typed` by edit distance, if close enough
// to be a misspelling: at most a third of its letters differ.
function nearest(typed, known) {
  const limit = Math.max(Math.ceil(typed.length / 3), 1);
  let best = null;
  for (const name of known) {
    const distance = editDistance(typed.toLowerCase(), name.toLowerCase());
    if (distance <= limit && (best === null || distance < best[0])) best = [distance, name];
  }
  return best === null ? null : best[1];
}

// Levenshtein distance: insertions, deletions and substitutions.
function editDistance(a, b) {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 0; i < a.length; i++) {
    let diagonal = row[0];
    row[0] = i + 1;
    for (let j = 0; j < b.length; j++) {
      const above = row[j + 1];
      row[j + 1] = Math.min(above + 1, row[j] + 1, diagonal + (a[i] === b[j] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length];
}

// Rust's f64 grammar for finite decimals, and the characters its `trim`
// removes (Unicode White_Space), so that every language reads the same
// strings as the same numbers: `Number` alone would also take "0x10" and
// "0b1", and `trim` removes U+FEFF, which Rust keeps.
const DECIMAL = /^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/;
const EDGE_SPACE =
  /^[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;

// A decimal number as the Rust and Python SDKs read one: leading and
// trailing white space ignored, `1e3`, `.5`, `+2` accepted; null for
// anything else (`Infinity`, `NaN`, `0x10`, `1_000`, an empty string).
export function parseNumber(text) {
  const t = text.replace(EDGE_SPACE, "");
  if (!DECIMAL.test(t)) return null;
  const value = Number(t);
  return Number.isFinite(value) ? value : null;
}

// CPU left on a node: allocatable minus what its pods request (the
// candidates' `requestedMilliCpu` column), never below 0. The pod being
// scheduled is not subtracted.
export function freeMilliCpu(allocatableMilliCpu, requestedMilliCpu) {
  return allocatableMilliCpu > requestedMilliCpu ? allocatableMilliCpu - requestedMilliCpu : 0n;
}

// Memory left on a node, in bytes: as `freeMilliCpu`.
export function freeMemory(allocatableMemory, requestedMemory) {
  return allocatableMemory > requestedMemory ? allocatableMemory - requestedMemory : 0n;
}

// One resource's LeastAllocated score, 0..100, in kube's integers:
// `(capacity - requested) * 100 / capacity`, 0 when it does not fit or the
// node has none.
export function leastAllocated(requested, capacity) {
  if (capacity === 0n || requested > capacity) return 0n;
  return ((capacity - requested) * MAX_NODE_SCORE) / capacity;
}

// kube-scheduler's NodeResourcesFit LeastAllocated score, 0..100 (a
// Number), cpu and memory weighted equally, with the pod's own non-zero
// request included. `allocatable` is the node's; the requests are the
// candidates' `nonzeroRequested*` columns.
export function leastAllocatedScore(allocatable, nonzeroRequestedMilliCpu, nonzeroRequestedMemory, pod) {
  const cpu = leastAllocated(nonzeroRequestedMilliCpu + pod.nonzeroMilliCpu, allocatable.milliCpu);
  const memory = leastAllocated(nonzeroRequestedMemory + pod.nonzeroMemory, allocatable.memory);
  return Number((cpu + memory) / 2n);
}

// kube's rule: the effects match (or the toleration names none), the keys
// match (an empty key matches every key), and `exists` or equal values.
export function tolerates(toleration, taint) {
  if (toleration.effect != null && toleration.effect !== taint.effect) return false;
  if (toleration.key !== "" && toleration.key !== taint.key) return false;
  return toleration.operator === "exists" || toleration.value === taint.value;
}

// One node-selector requirement against a label's value (null: the node
// lacks the label), as kube's NodeAffinity filter reads it: `gt` and `lt`
// compare integers and fail on anything else.
export function requirementMatches(requirement, value) {
  const { operator, values } = requirement;
  const integer = (text) => (/^[+-]?[0-9]+$/.test(text) ? BigInt(text) : null);
  const compare = (greater) => {
    if (value === null || values.length !== 1) return false;
    const [v, bound] = [integer(value), integer(values[0])];
    if (v === null || bound === null) return false;
    return greater ? v > bound : v < bound;
  };
  switch (operator) {
    case "in": return value !== null && values.includes(value);
    case "not-in": return value === null || !values.includes(value);
    case "exists": return value !== null;
    case "does-not-exist": return value === null;
    case "gt": return compare(true);
    case "lt": return compare(false);
    default: throw `unknown selector operator ${operator}`;
  }
}

// One required-affinity term: its requirements ANDed, fields naming
// `metadata.name` only; a term with neither matches nothing.
export function termMatches(term, node) {
  const { matchExpressions, matchFields } = term;
  if (matchExpressions.length === 0 && matchFields.length === 0) return false;
  return matchExpressions.every((r) => requirementMatches(r, node.label(r.key)))
    && matchFields.every((r) => r.key === "metadata.name" && requirementMatches(r, node.name));
}

// A log line to the scheduler's log, as the Rust SDK's `host::info` and
// `host::warn`. The scheduler caps what a policy logs (docs/security.md).
export function info(message) {
  log("info", message, []);
}

export function warn(message) {
  log("warn", message, []);
}

// kube-scheduler's tie-breaker generator (SplitMix64), the same numbers as
// the Rust SDK's for the same seed: `attempt.rng()` gives one seeded for
// the pod.
const U64 = (1n << 64n) - 1n;
export class SplitMix64 {
  constructor(seed) {
    this.state = BigInt(seed) & U64;
  }

  // The next number, a BigInt in 0..2^64.
  nextU64() {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & U64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & U64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & U64;
    return z ^ (z >> 31n);
  }

  // Uniform in [0, 1), 53 bits of precision.
  nextF64() {
    return Number(this.nextU64() >> 11n) / 2 ** 53;
  }
}

// The scheduling attempt a call belongs to: its seed, and node metrics
// fetched when first asked for, one host call per metric for every
// candidate.
export class Attempt {
  constructor(seed, candidates) {
    this.seedValue = BigInt(seed);
    this.candidates = columns(candidates);
    this.metrics = new Map();
  }

  // Derived by the scheduler from its `--seed` and the pod.
  seed() {
    return this.seedValue;
  }

  rng() {
    return new SplitMix64(this.seedValue);
  }

  // `{ value, ageMs }` of a node metric, or null when the scheduler has
  // none usable for this node.
  metric(name, node) {
    if (!this.metrics.has(name)) this.metrics.set(name, nodeMetrics(name, this.candidates.nodes));
    return this.metrics.get(name)[node.index()] ?? null;
  }

  // The metric's value if it is at most `maxAgeMs` old, else `fallback`.
  metricFreshOr(name, node, maxAgeMs, fallback) {
    const sample = this.metric(name, node);
    const fresh = sample !== null && sample.ageMs <= BigInt(maxAgeMs) && Number.isFinite(sample.value);
    return fresh ? sample.value : fallback;
  }
}

// The pod being scheduled, as the Rust SDK's `Pod`: the contract's fields,
// with `labels`, `annotations` and `nodeSelector` as Maps, and `group`, its
// PodGroup (`name`, `minCount`, `members`, `placed`: the members already
// on nodes, each a `pod` name and a `node` id), or undefined.
export class PodView {
  constructor(info) {
    Object.assign(this, info);
    this.labels = new Map(info.labels);
    this.annotations = new Map(info.annotations);
    this.nodeSelector = new Map(info.nodeSelector);
  }

  label(key) {
    return this.labels.get(key) ?? null;
  }

  annotation(key) {
    return this.annotations.get(key) ?? null;
  }

  // Whether one of the pod's tolerations tolerates `taint` (kube's rule).
  tolerates(taint) {
    return this.tolerations.some((toleration) => tolerates(toleration, taint));
  }

  // The node's first no-schedule or no-execute taint the pod does not
  // tolerate, as TaintToleration reports it; null if none.
  untoleratedTaint(node) {
    return node.taints.find((t) => t.effect !== "prefer-no-schedule" && !this.tolerates(t)) ?? null;
  }

  // nodeSelector and required node affinity, as kube's NodeAffinity
  // filter evaluates them.
  matchesNode(node) {
    for (const [key, value] of this.nodeSelector) if (node.label(key) !== value) return false;
    const terms = this.requiredNodeAffinity;
    return terms.length === 0 || terms.some((term) => termMatches(term, node));
  }
}

// The node table: each node as the scheduler sent it, kept by `syncNodes`
// (call `sync` from it). The scheduler sends each node once, then only its
// changes; calls name their candidates by id.
//
// `new Nodes({ prepare })`: `prepare`, a function of one NodeView, is the
// work that depends on the node alone (its labels, annotations,
// allocatable) and on the settings. It runs when a node arrives or
// changes, once per version of the node, and the per-node functions read
// its result as `node.prepared`, for every pod. What it throws is thrown
// again where `node.prepared` is read, so a node it cannot prepare is
// judged as if the work ran per pod (`filterEach` rejects that node alone).
export class Nodes {
  constructor({ prepare = null } = {}) {
    // Indexed by node id: the host's ids are dense, and an array index is
    // what the interpreter reads fastest, once per candidate per call.
    this.byId = [];
    this.prepare = prepare;
  }

  sync(reset, changes) {
    if (reset) this.byId = [];
    for (const change of changes) {
      if (change.tag === "upsert") {
        const view = new NodeView(change.val);
        if (this.prepare !== null) {
          try {
            view.prepared = this.prepare(view);
          } catch (e) {
            // Thrown again where it is read, for this node only: the
            // others keep a plain property, read at the cost of any other.
            Object.defineProperty(view, "prepared", {
              get() {
                throw e;
              },
            });
          }
        }
        this.byId[change.val.id] = view;
      } else {
        this.byId[change.val] = undefined;
      }
    }
  }

  // Any node of the table, by id, candidate or not: where a group's placed
  // members are (`pod.group.placed`); undefined if the host never sent it.
  // Outside a call's candidates, its usage reads zeros.
  get(nodeId) {
    return this.byId[nodeId];
  }

  // The contract's placements (`scorePlacement`'s) as PlacementViews over
  // the table. The host sends every node before naming it, so a miss is a
  // bug worth failing the call for.
  placements(placements) {
    return placements.map((placement) => {
      const members = placement.members.map((member) => {
        const node = this.byId[member.node];
        if (node === undefined) {
          throw `placement ${JSON.stringify(placement.domain)} names node id ${member.node} which the host never sent`;
        }
        return { pod: member.pod, node };
      });
      return new PlacementView(placement.domain, members, placement.unplaced);
    });
  }

  // The call's candidates (the contract's, or `Columns` of them), in
  // order, each with what its pods request
  // (valid for this call: the next one points them elsewhere). The host
  // sends every node before naming it, so a miss is a bug worth failing
  // the call for.
  views(calls) {
    const candidates = columns(calls);
    const views = new Array(candidates.length);
    for (let i = 0; i < views.length; i++) views[i] = candidateView(this, candidates, i);
    return views;
  }
}

// The call's `i`-th candidate (`candidates` are `Columns`) in `nodes`,
// pointed at the call's columns.
function candidateView(nodes, candidates, i) {
  const view = nodes.byId[candidates.nodes[i]];
  if (view === undefined) throw `node id ${candidates.nodes[i]} was never sent by the host`;
  view.position = i;
  view.columns = candidates;
  return view;
}

// What the pods on a candidate request, each read from the call's columns
// when asked for: a view serves every candidate of every call, and most
// policies read one or two of them (each read of a u64 makes a BigInt).
const USAGE_COLUMNS = [
  "requestedMilliCpu", "requestedMemory", "requestedEphemeralStorage",
  "nonzeroRequestedMilliCpu", "nonzeroRequestedMemory", "podCount",
];
// Before its first call a view reads zeros.
const NO_CALL = Object.fromEntries(USAGE_COLUMNS.map((name) => [name, name === "podCount" ? [0] : [0n]]));

// One feasible placement of a gang, as the Rust SDK's `PlacementView`:
// `domain` (the value of the label the policy named in `placementDomains`;
// "" for the placement over every node), `members` (`{ pod, node }`, the
// node a NodeView, in the order the scheduler tried them) and `unplaced`
// (members tried that did not fit).
export class PlacementView {
  constructor(domain, members, unplaced) {
    this.domain = domain;
    this.members = members;
    this.unplaced = unplaced;
  }

  // Every node this placement uses, each once, in name order.
  nodes() {
    const byName = new Map(this.members.map((m) => [m.node.name, m.node]));
    return [...byName.keys()].sort(ascending).map((name) => byName.get(name));
  }

  // How many members are on each value of node label `key` (nodes without
  // it count under ""), a Map in the label's order.
  spread(key) {
    const counts = new Map();
    for (const m of this.members) {
      const value = m.node.label(key) ?? "";
      counts.set(value, (counts.get(value) ?? 0) + 1);
    }
    return new Map([...counts].sort(([a], [b]) => ascending(a, b)));
  }
}

// Strings in ascending order, as Rust orders them: node names and label
// values are ASCII, where comparing UTF-16 units is comparing bytes.
function ascending(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

// One candidate, as the Rust SDK's `NodeView`: `id`, `name`, `labels` and
// `annotations` (Maps), `taints`, `allocatable`, `unschedulable`, and what
// the pods already on it request (`requestedMilliCpu`, `requestedMemory`,
// `requestedEphemeralStorage`, `nonzeroRequestedMilliCpu`,
// `nonzeroRequestedMemory`, `podCount`).
export class NodeView {
  constructor(info) {
    Object.assign(this, { id: info.id, name: info.name, labels: new Map(info.labels) });
    Object.assign(this, { annotations: new Map(info.annotations), taints: info.taints });
    Object.assign(this, { allocatable: info.allocatable, unschedulable: info.unschedulable });
    Object.assign(this, { position: 0, columns: NO_CALL });
    // What `new Nodes({ prepare })` made of this node when it arrived or
    // last changed: computed once per version of the node, not once per
    // pod. Throws what `prepare` threw for this node.
    this.prepared = null;
  }

  label(key) {
    return this.labels.get(key) ?? null;
  }

  annotation(key) {
    return this.annotations.get(key) ?? null;
  }

  // An annotation as a number: null when absent; a thrown string naming
  // the node when it is not a finite number.
  annotationF64(key) {
    const raw = this.annotation(key);
    if (raw === null) return null;
    const value = parseNumber(raw);
    if (value === null) throw `node ${this.name}: annotation ${key}=${JSON.stringify(raw)} is not a number`;
    return value;
  }

  // The allocatable amount of an extended resource such as
  // `nvidia.com/gpu` (a BigInt; 0n when the node has none).
  allocatableScalar(name) {
    const entry = this.allocatable.scalar.find(([n]) => n === name);
    return entry === undefined ? 0n : entry[1];
  }

  // Its position among this call's candidates.
  index() {
    return this.position;
  }

  // What the pods already on it request, as the Rust SDK's `Usage`.
  usage() {
    const { requestedMilliCpu, requestedMemory, requestedEphemeralStorage, podCount } = this;
    const { nonzeroRequestedMilliCpu, nonzeroRequestedMemory } = this;
    return {
      requestedMilliCpu, requestedMemory, requestedEphemeralStorage,
      nonzeroRequestedMilliCpu, nonzeroRequestedMemory, podCount,
    };
  }

  freeMilliCpu() {
    return freeMilliCpu(this.allocatable.milliCpu, this.requestedMilliCpu);
  }

  freeMemory() {
    return freeMemory(this.allocatable.memory, this.requestedMemory);
  }

  leastAllocatedScore(pod) {
    return leastAllocatedScore(this.allocatable, this.nonzeroRequestedMilliCpu, this.nonzeroRequestedMemory, pod);
  }
}

for (const name of USAGE_COLUMNS) {
  Object.defineProperty(NodeView.prototype, name, {
    get() {
      return this.columns[name][this.position];
    },
  });
}

// The contract's `filter` from a function of one node: `reject(pod, node,
// attempt)` (a PodView, a NodeView, an Attempt) returns null to pass the
// node, or the reason to reject it (phrased as kube-scheduler's: they are
// counted in the pod's FailedScheduling message). Each distinct reason is
// sent once. Anything thrown while judging one node (such as
// annotationF64's error for a value that is not a number) rejects that node
// alone, with the reason `policy error: ...`; the other nodes are judged.
// What is thrown outside `reject` still fails the call.
//
// The loops over the candidates are plain `for` loops, without a closure
// or an array of views: ComponentizeJS's engine interprets, and each call
// it saves is saved for every candidate of every call.
export function filterEach(nodes, pod, candidates, reject) {
  const reasons = [];
  const numbers = new Map();
  const cols = columns(candidates);
  const verdicts = new Uint32Array(cols.length);
  const podView = new PodView(pod);
  const attempt = new Attempt(0n, cols);
  for (let i = 0; i < verdicts.length; i++) {
    const node = candidateView(nodes, cols, i);
    let why;
    try {
      why = reject(podView, node, attempt);
    } catch (e) {
      why = `policy error: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (why === null || why === undefined) continue;
    let number = numbers.get(why);
    if (number === undefined) {
      reasons.push(why);
      number = reasons.length;
      numbers.set(why, number);
    }
    verdicts[i] = number;
  }
  return { reasons, verdicts: new Uint8Array(verdicts.buffer) };
}

// A node's raw score as named parts, as the Rust SDK's `ScoreParts`: a
// per-node score function may return one instead of a number; the score
// is the parts' sum, and `wasmsched simulate --explain` shows each part.
export class ScoreParts {
  constructor() {
    this.list = [];
    this.sum = 0;
  }

  // One more part: a short name (at most 64 bytes; at most 16 parts a
  // node) and its value.
  add(name, value) {
    this.list.push({ name, value });
    // Summed as added, in order: the sum the Rust SDK makes.
    this.sum += value;
    return this;
  }

  // The raw score: the sum of the parts.
  total() {
    return this.sum;
  }

  // Each part, `{ name, value }`, in the order added.
  parts() {
    return this.list;
  }
}

// The contract's `score` from a function of one node: `score(pod, node,
// attempt)` returns the node's raw score (any finite Number; the scheduler
// normalises them, sdk/README.md "How raw scores become points"), or a
// ScoreParts whose sum it is. Pass the call's `seed` for `attempt.seed()`
// and `attempt.rng()`. Returns the scores packed as the contract carries
// them.
export function scoreEach(nodes, pod, candidates, score, seed = 0n) {
  const cols = columns(candidates);
  const podView = new PodView(pod);
  const attempt = new Attempt(seed, cols);
  const scores = new Float64Array(cols.length);
  for (let i = 0; i < scores.length; i++) {
    const raw = score(podView, candidateView(nodes, cols, i), attempt);
    scores[i] = raw instanceof ScoreParts ? raw.total() : raw;
  }
  return new Uint8Array(scores.buffer);
}

// The contract's `explainScore` from the same function as `scoreEach`:
// each node's parts where it returns a ScoreParts, none where it returns
// a number. The scheduler asks only when a person asks (`--explain`).
export function explainEach(nodes, pod, candidates, score, seed = 0n) {
  const cols = columns(candidates);
  const [podView, attempt] = [new PodView(pod), new Attempt(seed, cols)];
  return nodes.views(cols).map((node) => {
    const raw = score(podView, node, attempt);
    return raw instanceof ScoreParts ? raw.parts() : [];
  });
}
