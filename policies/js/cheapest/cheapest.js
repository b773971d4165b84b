// Prefers the node with the lowest price: the JavaScript twin of
// policies/cheapest (Rust). The price comes from a node annotation a price
// annotator maintains (default `hightower.com/cost`) or, with `metric`
// configured, from a node metric the scheduler supplies. Nodes without a
// usable price rank behind every priced node, and the policy logs which.
//
// Built with ComponentizeJS against wit/0.4.0: this module exports the
// `wasmsched:policy/policy` interface as `policy`. The per-node columns
// arrive as packed little-endian bytes (one Uint8Array each), read here
// through typed-array views, and the scores go back the same way.

import { config, log, nodeMetrics } from "wasmsched:policy/host@0.4.0";

const NAME = "cheapest-js";
const VERSION = "0.1.0";

// Module state lives as long as the component instance.
let source = null; // { annotation } or { metric, maxAgeMs }
// node id -> { name, price, unpriced }: the annotation's price is read
// once per node version, when the node arrives, not once per pod.
const nodes = new Map();

function readConfig() {
  const text = config().trim();
  const value = text === "" ? {} : JSON.parse(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw `configuration must be an object, got ${text}`;
  }
  const str = (key) => {
    const v = value[key];
    if (v === undefined || v === null) return null;
    if (typeof v !== "string") throw `configuration field \`${key}\` must be a string, got ${JSON.stringify(v)}`;
    return v;
  };
  const num = (key) => {
    const v = value[key];
    if (v === undefined || v === null) return null;
    if (typeof v === "number") return v;
    if (typeof v === "string" && v.trim() !== "" && !Number.isNaN(Number(v.trim()))) return Number(v.trim());
    throw `configuration field \`${key}\` must be a number, got ${JSON.stringify(v)}`;
  };
  const metric = str("metric");
  if (metric !== null) {
    if (str("annotation") !== null) throw "give either `metric` or `annotation`, not both";
    const maxAge = num("maxAgeSeconds") ?? 3600;
    if (!(Number.isFinite(maxAge) && maxAge > 0)) {
      throw `configuration field \`maxAgeSeconds\` must be a positive number, got ${maxAge}`;
    }
    return { metric, maxAgeMs: BigInt(Math.trunc(maxAge * 1000)) };
  }
  const annotation = str("annotation") ?? "hightower.com/cost";
  if (annotation === "") throw "configuration field `annotation` must not be empty";
  return { annotation };
}

// Rust's f64 parse of a trimmed string: a number, not hex, not empty.
function parsePrice(raw) {
  const t = raw.trim();
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t)) return null;
  const v = Number(t);
  return Number.isFinite(v) ? v : null;
}

// A packed column as the numbers it holds: a view where the bytes are
// aligned for it (as ComponentizeJS gives them), else a copy.
function u32s(bytes) {
  return bytes.byteOffset % 4 === 0
    ? new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length >> 2)
    : new Uint32Array(bytes.slice().buffer);
}

// Scores as the contract carries them: f64s, little-endian (as wasm is).
function packScores(scores) {
  return new Uint8Array(Float64Array.from(scores).buffer);
}

// A node's name and, with an annotation source, its price or why it has
// none (the reason the score's warning gives).
function priced(node) {
  const entry = { name: node.name, price: null, unpriced: null };
  if (source.annotation === undefined) return entry;
  const key = source.annotation;
  const raw = node.annotations.find(([k]) => k === key)?.[1];
  const price = raw === undefined ? null : parsePrice(raw);
  if (raw !== undefined && price === null) {
    entry.unpriced = `node ${node.name}: annotation ${key}=${JSON.stringify(raw)} is not a number`;
  } else if (price === null || price < 0) {
    entry.unpriced = `node ${node.name}: no ${key} annotation`;
  } else {
    entry.price = price;
  }
  return entry;
}

export const policy = {
  describe() {
    return {
      name: NAME,
      version: VERSION,
      description: "lowest price annotation wins (JavaScript)",
      phases: { filter: false, score: true, place: false },
      scoreOrder: "lower-is-better",
      // A node's price is its own: the scheduler may split a call over
      // its cores.
      independentNodes: true,
    };
  },

  init() {
    source = readConfig();
  },

  syncNodes(reset, changes) {
    if (reset) nodes.clear();
    for (const change of changes) {
      if (change.tag === "upsert") {
        nodes.set(change.val.id, priced(change.val));
      } else {
        nodes.delete(change.val);
      }
    }
  },

  filter(pod, candidates) {
    // Not called: describe() declares the score phase only.
    // Every verdict 0 (feasible): a zero u32 per node, as many bytes as
    // the node-id column has.
    return { reasons: [], verdicts: new Uint8Array(candidates.nodes.length) };
  },

  score(pod, candidates, seed) {
    const ids = u32s(candidates.nodes);
    const unpriced = [];
    const prices = new Array(ids.length);
    if (source.metric !== undefined) {
      const { metric, maxAgeMs } = source;
      const samples = nodeMetrics(metric, ids);
      for (let i = 0; i < ids.length; i++) {
        const s = samples[i];
        const name = nodes.get(ids[i])?.name ?? `#${ids[i]}`;
        if (s === undefined || s === null) {
          unpriced.push(`node ${name}: no ${metric} metric`);
          prices[i] = null;
        } else if (s.ageMs <= maxAgeMs && s.value >= 0) {
          prices[i] = s.value;
        } else {
          unpriced.push(`node ${name}: ${metric} is ${s.ageMs / 1000n} s old or negative`);
          prices[i] = null;
        }
      }
    } else {
      for (let i = 0; i < ids.length; i++) {
        const node = nodes.get(ids[i]);
        if (node === undefined) throw `candidate ${i} names node id ${ids[i]} which the host never sent`;
        prices[i] = node.price;
        if (node.price === null) unpriced.push(node.unpriced);
      }
    }
    const known = prices.filter((p) => p !== null);
    if (known.length === 0) {
      throw source.metric !== undefined
        ? `no candidate node has a ${source.metric} metric younger than ${source.maxAgeMs / 1000n} s`
        : `no candidate node has a numeric ${source.annotation} annotation`;
    }
    const max = Math.max(...known);
    if (unpriced.length > 0) {
      log("warn", "nodes without a usable price rank last", [
        ["count", String(unpriced.length)],
        ["first", unpriced[0]],
      ]);
    }
    return packScores(prices.map((p) => (p === null ? max * 2 + 1 : p)));
  },

  explainScore(pod, candidates, seed) {
    // No breakdown: the score is the price.
    return Array.from({ length: candidates.nodes.length >> 2 }, () => []);
  },

  // Contract 0.4's place phase, not declared: never called, but a
  // component exports every call of the contract.
  placementDomains() {
    return undefined;
  },

  scorePlacement(_pod, placements) {
    return new Uint8Array(8 * placements.length);
  },
};
