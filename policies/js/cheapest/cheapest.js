// Prefers the node with the lowest price: the JavaScript twin of
// policies/cheapest (Rust). The price comes from a node annotation a price
// annotator maintains (default `hightower.com/cost`) or, with `metric`
// configured, from a node metric the scheduler supplies. Nodes without a
// usable price rank behind every priced node, and the policy logs which.
//
// Built with ComponentizeJS against wit/0.1.0, unchanged: this module
// exports the `wasmsched:policy/policy` interface as `policy`.

import { config, log, nodeMetrics } from "wasmsched:policy/host@0.1.0";

const NAME = "cheapest-js";
const VERSION = "0.1.0";

// Module state lives as long as the component instance.
let source = null; // { annotation } or { metric, maxAgeMs }
const annotations = new Map(); // node id -> { name, annotations: Map }

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

export const policy = {
  describe() {
    return {
      name: NAME,
      version: VERSION,
      description: "lowest price annotation wins (JavaScript)",
      phases: { filter: false, score: true },
      scoreOrder: "lower-is-better",
    };
  },

  init() {
    source = readConfig();
  },

  syncNodes(reset, changes) {
    if (reset) annotations.clear();
    for (const change of changes) {
      if (change.tag === "upsert") {
        const node = change.val;
        annotations.set(node.id, { name: node.name, annotations: new Map(node.annotations) });
      } else {
        annotations.delete(change.val);
      }
    }
  },

  filter(pod, candidates) {
    // Not called: describe() declares the score phase only.
    return { reasons: [], verdicts: new Uint32Array(candidates.nodes.length) };
  },

  score(pod, candidates, seed) {
    const ids = candidates.nodes;
    const unpriced = [];
    const prices = new Array(ids.length);
    if (source.metric !== undefined) {
      const { metric, maxAgeMs } = source;
      const samples = nodeMetrics(metric, ids);
      for (let i = 0; i < ids.length; i++) {
        const s = samples[i];
        const name = annotations.get(ids[i])?.name ?? `#${ids[i]}`;
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
      const key = source.annotation;
      for (let i = 0; i < ids.length; i++) {
        const node = annotations.get(ids[i]);
        if (node === undefined) throw `candidate ${i} names node id ${ids[i]} which the host never sent`;
        const raw = node.annotations.get(key);
        if (raw === undefined) {
          unpriced.push(`node ${node.name}: no ${key} annotation`);
          prices[i] = null;
          continue;
        }
        const price = parsePrice(raw);
        if (price === null) {
          unpriced.push(`node ${node.name}: annotation ${key}=${JSON.stringify(raw)} is not a number`);
          prices[i] = null;
        } else {
          prices[i] = price >= 0 ? price : null;
          if (price < 0) unpriced.push(`node ${node.name}: no ${key} annotation`);
        }
      }
    }
    const priced = prices.filter((p) => p !== null);
    if (priced.length === 0) {
      throw source.metric !== undefined
        ? `no candidate node has a ${source.metric} metric younger than ${source.maxAgeMs / 1000n} s`
        : `no candidate node has a numeric ${source.annotation} annotation`;
    }
    const max = Math.max(...priced);
    if (unpriced.length > 0) {
      log("warn", "nodes without a usable price rank last", [
        ["count", String(unpriced.length)],
        ["first", unpriced[0]],
      ]);
    }
    return prices.map((p) => (p === null ? max * 2 + 1 : p));
  },
};
