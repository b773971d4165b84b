// team-fit: a platform team's placement rules, read from node labels and
// annotations, in JavaScript. The twin of policies/team-fit (Rust) and
// policies/python/team-fit (Python): the three decide alike (tests/it's
// team_fit module holds them to it).
//
// - Filter: refuses nodes under maintenance (annotation
//   `example.com/maintenance: "true"`), nodes labelled for another team
//   (label `teamLabel`, compared with the pod's), and nodes whose rack
//   load annotation is not a number.
// - Score, in parts: the node's free memory after the pod, in percent
//   (integer arithmetic); `gpuBonus` for a pod that asks for
//   `nvidia.com/gpu` on a node that has some; minus a quarter of the
//   rack's load (annotation `example.com/rack-load`, 0-100).
//
// What depends on the node alone (its maintenance flag, team, rack load,
// GPUs and memory) is read once per version of the node, by `prepare`, not
// once per pod: the per-node functions read `node.prepared`.
//
// Built with ComponentizeJS against wit/0.4.0, beside the SDK's
// wasmsched-helpers.js (sdk/js); see docs/development.md.

import { config } from "wasmsched:policy/host@0.4.0";
import { Nodes, ScoreParts, Settings, explainEach, filterEach, parseNumber, scoreEach } from "./wasmsched-helpers.js";

const MAINTENANCE = "example.com/maintenance";
const RACK_LOAD = "example.com/rack-load";
const GPU = "nvidia.com/gpu";
const UNREADABLE_LOAD = `node(s) had a ${RACK_LOAD} annotation that is not a number`;

// Module state lives as long as the component instance.
let settings = { teamLabel: "team", gpuBonus: 10 };

// What the rules need of one node, read from its labels and annotations
// when it arrives or changes.
function prepare(node) {
  const raw = node.annotation(RACK_LOAD);
  const rackLoad = raw === null ? null : parseNumber(raw);
  return {
    maintenance: node.annotation(MAINTENANCE) === "true",
    team: node.label(settings.teamLabel),
    rackLoad,
    loadUnreadable: raw !== null && rackLoad === null,
    gpus: node.allocatableScalar(GPU),
    memory: node.allocatable.memory,
  };
}

const nodes = new Nodes({ prepare });

function reject(pod, node) {
  const p = node.prepared;
  if (p.maintenance) return "node(s) are under maintenance";
  if (p.team !== null && pod.label(settings.teamLabel) !== p.team) return "node(s) belong to another team";
  if (p.loadUnreadable) return UNREADABLE_LOAD;
  return null;
}

function asksForGpu(pod) {
  return pod.requests.scalar.some(([name, amount]) => name === GPU && amount > 0n);
}

// The node's free memory after the pod, in whole percent.
function freeMemoryPercent(pod, node, p) {
  const free = p.memory - node.requestedMemory - pod.requests.memory;
  return free > 0n && p.memory > 0n ? Number((free * 100n) / p.memory) : 0;
}

// The raw score, a number: what the scheduler asks for every node of every
// pod. Written out rather than summed from `parts` below, because each call
// and object costs the interpreter about as much as the rest of the score
// (docs/benchmarks.md); the tests hold the two to the same sums.
function score(pod, node) {
  const p = node.prepared;
  let total = freeMemoryPercent(pod, node, p);
  if (p.gpus > 0n && asksForGpu(pod)) total += settings.gpuBonus;
  if (p.rackLoad !== null) total += -p.rackLoad / 4;
  return total;
}

// The same score in parts, for `--explain` only.
function parts(pod, node) {
  const p = node.prepared;
  const parts = new ScoreParts().add("free memory", freeMemoryPercent(pod, node, p));
  if (p.gpus > 0n && asksForGpu(pod)) parts.add("gpu", settings.gpuBonus);
  if (p.rackLoad !== null) parts.add("rack load", -p.rackLoad / 4);
  return parts;
}

function readSettings(text) {
  const raw = new Settings(text);
  const teamLabel = raw.str("teamLabel", "team");
  if (teamLabel === "") throw "teamLabel must be a label key, got an empty string";
  const gpuBonus = raw.number("gpuBonus", 10);
  if (gpuBonus < 0) throw `gpuBonus must be a number, 0 or more; got ${gpuBonus}`;
  raw.checkAllRead();
  return { teamLabel, gpuBonus };
}

export const policy = {
  describe() {
    return {
      name: "team-fit-js",
      version: "0.1.0",
      description: "maintenance, team, free memory, GPUs and rack load, from labels and annotations (JavaScript)",
      phases: { filter: true, score: true, place: false },
      scoreOrder: "higher-is-better",
      independentNodes: true,
    };
  },

  init() {
    settings = readSettings(config());
  },

  syncNodes(reset, changes) {
    nodes.sync(reset, changes);
  },

  filter(pod, candidates) {
    return filterEach(nodes, pod, candidates, reject);
  },

  score(pod, candidates, seed) {
    return scoreEach(nodes, pod, candidates, score, seed);
  },

  explainScore(pod, candidates, seed) {
    return explainEach(nodes, pod, candidates, parts, seed);
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
