// wasmsched's test builders for policies in JavaScript: the Rust SDK's
// `testing` module (NodeBuilder, PodBuilder, Harness), with the same names
// and defaults. `wasmsched new --lang js` ships this file in tests/; it
// drives the policy's own methods natively, with tests/host.js standing in
// for the scheduler's imports.
//
//   const h = new Harness(policy, { preferredZone: "zone-b" });
//   h.addNode(new NodeBuilder("a").cpu("8").memory("32Gi").requested("2", "4Gi"));
//   h.best(new PodBuilder("web").cpu("500m"));   // "a"
//
// The reference: wasmsched's sdk/reference/javascript.md.

import { ScoreParts } from "../src/wasmsched-helpers.js";
import { takeLogs, useMetrics, useSettings } from "./host.js";

// A Kubernetes quantity ("500m", "2", "1.5Gi", "1e3") times `scale`,
// rounded up as kube rounds a quantity's milli-value: a BigInt.
function quantity(what, text, scale) {
  const match = /^([+]?)([0-9]+)?(?:\.([0-9]*))?(?:(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)|[eE]([+-]?[0-9]+))?$/.exec(text);
  if (match === null || (match[2] ?? "") + (match[3] ?? "") === "") {
    throw new Error(`fixture ${what}: ${JSON.stringify(text)} is not a quantity`);
  }
  const [, , whole = "", fraction = "", suffix, exponent] = match;
  let numerator = BigInt(whole + fraction || "0") * scale;
  let denominator = 10n ** BigInt(fraction.length);
  const binary = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
  const decimal = { m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
  const power = suffix !== undefined && suffix in decimal ? decimal[suffix] : Number(exponent ?? 0);
  if (suffix in binary) numerator <<= binary[suffix];
  if (power >= 0) numerator *= 10n ** BigInt(power);
  else denominator *= 10n ** BigInt(-power);
  return (numerator + denominator - 1n) / denominator;
}

const cpu = (what, text) => quantity(what, text, 1000n);
const bytes = (what, text) => quantity(what, text, 1n);

// A fixture node: allocatable resources, labels, taints, and what is
// already requested on it.
export class NodeBuilder {
  // 4 cpu, 16Gi memory, 100Gi ephemeral storage, 110 pods, nothing used.
  constructor(name) {
    this.fields = {
      id: 0, name, labels: [["kubernetes.io/hostname", name]], annotations: [], taints: [],
      allocatable: { milliCpu: 4000n, memory: 16n << 30n, ephemeralStorage: 100n << 30n, pods: 110, scalar: [] },
      unschedulable: false,
    };
    this.used = {
      requestedMilliCpu: 0n, requestedMemory: 0n, requestedEphemeralStorage: 0n,
      nonzeroRequestedMilliCpu: 0n, nonzeroRequestedMemory: 0n, podCount: 0,
    };
  }

  cpu(text) {
    this.fields.allocatable.milliCpu = cpu("cpu", text);
    return this;
  }

  memory(text) {
    this.fields.allocatable.memory = bytes("memory", text);
    return this;
  }

  pods(count) {
    this.fields.allocatable.pods = count;
    return this;
  }

  // An extended resource such as `nvidia.com/gpu`.
  scalar(name, amount) {
    this.fields.allocatable.scalar.push([name, BigInt(amount)]);
    return this;
  }

  label(key, value) {
    this.fields.labels = this.fields.labels.filter(([k]) => k !== key).concat([[key, value]]);
    return this;
  }

  annotation(key, value) {
    this.fields.annotations.push([key, value]);
    return this;
  }

  // `effect`: "no-schedule", "prefer-no-schedule" or "no-execute".
  taint(key, value, effect) {
    this.fields.taints.push({ key, value, effect });
    return this;
  }

  unschedulable() {
    this.fields.unschedulable = true;
    return this;
  }

  // What bound pods already request (used as the scoring view too).
  requested(cpuText, memoryText) {
    const [milliCpu, memory] = [cpu("cpu", cpuText), bytes("memory", memoryText)];
    Object.assign(this.used, { requestedMilliCpu: milliCpu, requestedMemory: memory });
    Object.assign(this.used, { nonzeroRequestedMilliCpu: milliCpu, nonzeroRequestedMemory: memory });
    return this;
  }

  podCount(count) {
    this.used.podCount = count;
    return this;
  }

  // The node's facts under `id`, as the contract's node-info.
  info(id) {
    return structuredClone({ ...this.fields, id });
  }

  // The node's facts under `id` and what is placed on it.
  build(id) {
    return [this.info(id), { ...this.used }];
  }
}

// A fixture pod. Requests are summed as plain containers.
export class PodBuilder {
  // Namespace `default`, no requests (scored as 100m / 200 MB, like kube).
  constructor(name) {
    this.fields = {
      namespace: "default", name, uid: `uid-${name}`, labels: [], annotations: [], priority: 0,
      requests: { milliCpu: 0n, memory: 0n, ephemeralStorage: 0n, pods: 1, scalar: [] },
      nonzeroMilliCpu: 100n, nonzeroMemory: 200n * 1024n * 1024n,
      nodeSelector: [], requiredNodeAffinity: [], tolerations: [], group: undefined,
    };
    this.placed = [];
  }

  namespace(namespace) {
    this.fields.namespace = namespace;
    return this;
  }

  cpu(text) {
    const value = cpu("cpu", text);
    Object.assign(this.fields, { nonzeroMilliCpu: value === 0n ? 100n : value });
    this.fields.requests.milliCpu = value;
    return this;
  }

  memory(text) {
    const value = bytes("memory", text);
    Object.assign(this.fields, { nonzeroMemory: value === 0n ? 200n * 1024n * 1024n : value });
    this.fields.requests.memory = value;
    return this;
  }

  label(key, value) {
    this.fields.labels.push([key, value]);
    return this;
  }

  annotation(key, value) {
    this.fields.annotations.push([key, value]);
    return this;
  }

  priority(priority) {
    this.fields.priority = priority;
    return this;
  }

  nodeSelector(key, value) {
    this.fields.nodeSelector.push([key, value]);
    return this;
  }

  // `{ matchExpressions: [{ key, operator, values }], matchFields: [] }`;
  // operators "in", "not-in", "exists", "does-not-exist", "gt", "lt".
  requiredAffinityTerm(term) {
    this.fields.requiredNodeAffinity.push(term);
    return this;
  }

  // `operator`: "exists" or "equal"; `effect`: null for every effect.
  toleration(key, operator, value, effect) {
    this.fields.tolerations.push({ key, operator, value, effect: effect ?? undefined });
    return this;
  }

  // A member of PodGroup `name`: its quorum (`minCount`; 1 for a basic
  // group) and how many members it has.
  group(name, minCount, members) {
    this.fields.group = { name, minCount, members, placed: [] };
    return this;
  }

  // Another member of its group already placed on fixture node `node`.
  memberPlaced(pod, node) {
    if (this.fields.group === undefined) throw new Error("memberPlaced before group");
    this.placed.push([pod, node]);
    return this;
  }

  // The pod as the contract's pod-info; `idOf` gives a fixture node's id
  // by name, for the members placed (the Harness passes it).
  info(idOf = null) {
    const info = structuredClone(this.fields);
    if (this.placed.length > 0) {
      if (idOf === null) throw new Error("a pod with members placed is built by the Harness, which knows the nodes");
      const placed = this.placed.map(([pod, node]) => ({ pod, node: idOf(node) }));
      info.group.placed = placed.sort((a, b) => (a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : 0));
    }
    return info;
  }
}

// Runs one policy natively over fixture nodes, through its own contract
// methods, as the scheduler calls them.
export class Harness {
  static #active = null;

  // `settings`: an object (or JSON text) as the policy's settings file
  // holds them. The policy's own error (a thrown string) is thrown.
  constructor(policy, settings = {}) {
    Object.assign(this, { policy, settings, nodes: [], metrics: new Map(), logLines: [] });
    const described = policy.describe();
    Object.assign(this, { name: described.name, phases: described.phases, order: described.scoreOrder });
    const problem = describeProblem(described);
    if (problem) throw new Error(`${this.name}: malformed describe result: ${problem}`);
    this.#enter();
  }

  // Adds a node; candidates are offered in the order they were added.
  addNode(builder) {
    const [info, usage] = builder.build(this.nodes.length);
    this.#enter();
    this.policy.syncNodes(false, [{ tag: "upsert", val: info }]);
    this.nodes.push({ info, usage });
    return this;
  }

  // A metric sample for a node added earlier.
  setMetric(node, metric, value, ageMs) {
    this.metrics.set(`${this.#idOf(node)}/${metric}`, { value, ageMs: BigInt(ageMs) });
    return this;
  }

  // Removes a metric sample, as if its source went away.
  clearMetric(node, metric) {
    this.metrics.delete(`${this.#idOf(node)}/${metric}`);
    return this;
  }

  // Log lines the policy wrote, as `Info: message k=v`.
  logs() {
    this.logLines.push(...takeLogs());
    return this.logLines;
  }

  // Each node's reason for rejecting the pod, or null if it passes, by
  // name in the order added.
  filter(pod) {
    this.#enter();
    const answer = refusingLongErrors(this.name, "filter", () => this.policy.filter(this.#pod(pod), this.#candidates()));
    const { reasons } = answer;
    const [verdicts, unpacked] = unpack(answer.verdicts, "verdicts", Uint32Array, "u32");
    const problem = unpacked ?? filterProblem(reasons, verdicts, this.nodes.length);
    if (problem) throw new Error(`${this.name}: malformed filter result: ${problem}`);
    return Object.fromEntries(this.nodes.map((n, i) => [n.info.name, verdicts[i] ? reasons[verdicts[i] - 1] : null]));
  }

  // Each node's raw score, by name: `{ scores, error }`, one of them null.
  tryScore(pod, seed = 0n) {
    this.#enter();
    try {
      const [scores, unpacked] = unpack(this.policy.score(this.#pod(pod), this.#candidates(), BigInt(seed)), "scores", Float64Array, "f64");
      const problem = unpacked ?? scoreProblem(scores, this.nodes.map((n) => n.info.name));
      if (problem) return { scores: null, error: `${this.name}: malformed score result: ${problem}` };
      return { scores: Object.fromEntries(this.nodes.map((n, i) => [n.info.name, scores[i]])), error: null };
    } catch (error) {
      const problem = errorProblem(error);
      return { scores: null, error: problem ? `${this.name}: malformed score result: ${problem}` : error };
    }
  }

  // Each node's raw score with seed 0; the policy's error is thrown, and
  // a result the scheduler would refuse, in the scheduler's words.
  score(pod) {
    const { scores, error } = this.tryScore(pod, 0n);
    if (error !== null) throw error;
    return scores;
  }

  // Each node's ScoreParts with seed 0, by name (no parts where the
  // policy gives none): what `--explain` shows. The policy's error is
  // thrown, and parts the scheduler would refuse, in its words.
  explain(pod) {
    this.#enter();
    const explain = () => this.policy.explainScore(this.#pod(pod), this.#candidates(), 0n);
    const explained = refusingLongErrors(this.name, "explain-score", explain);
    const problem = partsProblem(explained, this.nodes.length);
    if (problem) throw new Error(`${this.name}: malformed explain-score result: ${problem}`);
    const parts = (list) => list.reduce((all, { name, value }) => all.add(name, value), new ScoreParts());
    return Object.fromEntries(this.nodes.map((n, i) => [n.info.name, parts(explained[i])]));
  }

  // The domains the policy asks a gang member's group to be placed in
  // (`{ key, required }`, or undefined); the policy's error is thrown, and
  // an answer the scheduler would refuse, in its words.
  placementDomains(pod) {
    this.#placing();
    const domains = refusingLongErrors(this.name, "placement-domains", () => this.policy.placementDomains(this.#pod(pod)));
    if (domains != null && WHITE_SPACE.test(domains.key)) {
      throw new Error(`${this.name}: malformed placement-domains result: the domains' label key is empty`);
    }
    return domains ?? undefined;
  }

  // Raw scores of placements, each given as its domain and its members on
  // fixture nodes (`["a", [["w-0", "a1"], ...]]`): `{ scores, error }`,
  // one of them null.
  tryScorePlacements(pod, placements) {
    this.#placing();
    const wire = placements.map(([domain, members]) => ({
      domain,
      members: members.map(([member, node]) => ({ pod: member, node: this.#idOf(node) })),
      unplaced: 0,
    }));
    try {
      const [scores, unpacked] = unpack(this.policy.scorePlacement(this.#pod(pod), wire), "scores", Float64Array, "f64");
      const refused = scores.length !== wire.length || scores.some((s) => !Number.isFinite(s) || Math.abs(s) > MAX_RAW_SCORE);
      const problem = unpacked ?? (refused ? `[${scores.join(", ")}] for ${wire.length} placements` : null);
      if (problem) return { scores: null, error: `${this.name}: malformed score-placement result: ${problem}` };
      return { scores: [...scores], error: null };
    } catch (error) {
      const problem = errorProblem(error);
      return { scores: null, error: problem ? `${this.name}: malformed score-placement result: ${problem}` : error };
    }
  }

  // The same; the policy's error is thrown.
  scorePlacements(pod, placements) {
    const { scores, error } = this.tryScorePlacements(pod, placements);
    if (error !== null) throw error;
    return scores;
  }

  // The node this policy alone would pick: among the nodes its filter
  // passes, the best raw score in its score order, the first on ties.
  best(pod) {
    const passed = this.phases.filter ? this.filter(pod) : {};
    const scores = this.phases.score ? this.score(pod) : Object.fromEntries(this.nodes.map((n) => [n.info.name, 0]));
    const better = (a, b) => (this.order === "lower-is-better" ? a < b : a > b);
    let best = null;
    for (const [name, score] of Object.entries(scores)) {
      if (passed[name] == null && (best === null || better(score, best[1]))) best = [name, score];
    }
    return best === null ? null : best[0];
  }

  // The policy's module state belongs to one harness at a time: another
  // harness used since gets this one's settings and nodes back first.
  #enter() {
    useSettings(this.settings);
    useMetrics(this.metrics);
    if (Harness.#active !== this) {
      Harness.#active?.logLines.push(...takeLogs());
      Harness.#active = this;
      this.policy.init();
      this.policy.syncNodes(true, this.nodes.map((n) => ({ tag: "upsert", val: n.info })));
    }
  }

  // Only a policy that declares the place phase is asked for placements.
  #placing() {
    if (!this.phases.place) throw new Error(`${this.name} does not declare the place phase: the scheduler never asks it`);
    this.#enter();
  }

  #pod(pod) {
    return pod.info((name) => this.#idOf(name));
  }

  #idOf(name) {
    const id = this.nodes.findIndex((n) => n.info.name === name);
    if (id < 0) throw new Error(`no fixture node ${name}`);
    return id;
  }

  // The nodes as the scheduler sends them: packed little-endian columns,
  // u32 ids and pod counts, u64 amounts.
  #candidates() {
    const bytes = (typed) => new Uint8Array(typed.buffer);
    const column = (key) => bytes(BigUint64Array.from(this.nodes, (n) => n.usage[key]));
    return {
      nodes: bytes(Uint32Array.from(this.nodes, (n) => n.info.id)),
      requestedMilliCpu: column("requestedMilliCpu"), requestedMemory: column("requestedMemory"),
      requestedEphemeralStorage: column("requestedEphemeralStorage"),
      nonzeroRequestedMilliCpu: column("nonzeroRequestedMilliCpu"),
      nonzeroRequestedMemory: column("nonzeroRequestedMemory"),
      podCount: bytes(Uint32Array.from(this.nodes, (n) => n.usage.podCount)),
    };
  }
}

// The scheduler's checks of a result (rules/src/answers.rs), in its
// words: a result it would refuse fails here first.
const MAX_RAW_SCORE = 2 ** 53;
const MAX_REASON_BYTES = 1024;
const MAX_SCORE_PARTS = 16;
const MAX_PART_NAME_BYTES = 64;
const MAX_ERROR_BYTES = 4096;
const [MAX_NAME_BYTES, MAX_VERSION_BYTES, MAX_DESCRIPTION_BYTES] = [253, 64, 1024];
// Unicode's White_Space, which Rust's `trim` strips (`String.trim` also
// strips U+FEFF).
const WHITE_SPACE = /^[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

function within(what, text, limit) {
  const size = new TextEncoder().encode(text).length;
  return size > limit ? `${what} is ${size} bytes, over the ${limit}-byte limit` : null;
}

function errorProblem(error) {
  return typeof error === "string" ? within("its error message", error, MAX_ERROR_BYTES) : null;
}

// The call's answer; the policy's error is thrown as it is, unless the
// scheduler would refuse its message as too long.
function refusingLongErrors(name, phase, call) {
  try {
    return call();
  } catch (error) {
    const problem = errorProblem(error);
    if (problem) throw new Error(`${name}: malformed ${phase} result: ${problem}`);
    throw error;
  }
}

function describeProblem({ name, version, description, phases }) {
  if (WHITE_SPACE.test(name)) return "the policy name is empty";
  const problem = within("its name", name, MAX_NAME_BYTES) ?? within("its version", version, MAX_VERSION_BYTES) ??
    within("its description", description, MAX_DESCRIPTION_BYTES);
  if (problem) return problem;
  if (/\p{Cc}/u.test(name + version)) return "its name or version holds control characters";
  if (!phases.filter && !phases.score) return "the policy implements neither filter nor score";
  return null;
}

function partsProblem(breakdowns, candidates) {
  if (breakdowns.length !== candidates) return `${breakdowns.length} breakdowns for ${candidates} candidates`;
  for (let i = 0; i < breakdowns.length; i++) {
    if (breakdowns[i].length > MAX_SCORE_PARTS) {
      return `${breakdowns[i].length} parts for candidate ${i}, over ${MAX_SCORE_PARTS}`;
    }
    for (const { name, value } of breakdowns[i]) {
      const problem = within(`a part name of candidate ${i}`, name, MAX_PART_NAME_BYTES);
      if (problem) return problem;
      if (!Number.isFinite(value) || Math.abs(value) > MAX_RAW_SCORE) {
        return `part ${rustDebug(name)} of candidate ${i} is ${rustExponent(value)}`;
      }
    }
  }
  return null;
}

// A string as Rust's `{:?}` quotes it, for the names these messages hold:
// quotes and backslashes escaped, control characters as escapes.
function rustDebug(text) {
  const escaped = { "\0": "\\0", "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  const quote = (c) => escaped[c] ?? (/\p{Cc}/u.test(c) ? `\\u{${c.codePointAt(0).toString(16)}}` : c);
  return `"${Array.from(text, quote).join("")}"`;
}

// A number as the scheduler prints it in these messages: 1e300, 9.1e15.
function rustExponent(value) {
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  return value.toExponential().replace("e+", "e");
}

// An answer's packed numbers, or the scheduler's words for bytes that are
// not a whole number of them: `[numbers, problem]`.
function unpack(packed, what, Type, kind) {
  const size = Type.BYTES_PER_ELEMENT;
  if (!ArrayBuffer.isView(packed) || packed.BYTES_PER_ELEMENT !== 1) {
    const pack = what === "scores" ? "packScores" : "packVerdicts";
    return [[], `the ${what} are not packed bytes (a Uint8Array: wasmsched-helpers' ${pack})`];
  }
  if (packed.length % size !== 0) {
    return [[], `the ${what} are ${packed.length} bytes, not a whole number of ${kind}s (${size} bytes each, little-endian)`];
  }
  return [new Type(packed.slice().buffer), null];
}

function scoreProblem(scores, names) {
  if (scores.length !== names.length) return `${scores.length} scores for ${names.length} candidates`;
  for (let i = 0; i < scores.length; i++) {
    const score = Number(scores[i]);
    if (!Number.isFinite(score) || Math.abs(score) > MAX_RAW_SCORE) {
      return `the score for node ${names[i]} (candidate ${i}) is ${rustExponent(score)}; ` +
        "scores must be finite, |score| <= 2^53";
    }
  }
  return null;
}

function filterProblem(reasons, verdicts, candidates) {
  if (verdicts.length !== candidates) return `${verdicts.length} verdicts for ${candidates} candidates`;
  if (reasons.length > Math.max(candidates, 1)) return `${reasons.length} reasons for ${candidates} candidates`;
  for (let i = 0; i < reasons.length; i++) {
    const bytes = new TextEncoder().encode(reasons[i]).length;
    if (bytes > MAX_REASON_BYTES) return `reason ${i} is ${bytes} bytes, over the ${MAX_REASON_BYTES}-byte limit`;
  }
  for (let i = 0; i < verdicts.length; i++) {
    if (verdicts[i] > reasons.length) {
      return `verdict ${verdicts[i]} of candidate ${i} names a reason beyond the ${reasons.length} given`;
    }
  }
  return null;
}
