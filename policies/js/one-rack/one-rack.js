// one-rack: a gang's members together in one rack, in JavaScript. The twin
// of policies/one-rack (Rust) and policies/python/one-rack (Python): the
// three decide alike (tests/it's source_policies module holds them to it).
// It speaks contract 0.4 (groups and the `place` phase) and ships as
// source, on wasmsched's JavaScript interpreter.
//
// - Place: a gang (`minCount` of 2 or more) is tried in each rack, the
//   racks being the values of node label `rackLabel`. With `required` (the
//   default) it waits rather than spread; without it, it spreads over every
//   node when no rack can take it. Of the racks that fit, the one that
//   places the most members wins, then the one that packs them on the
//   fewest nodes; a placement over every node comes after every rack.
// - Score: a member scheduled on its own (beyond the quorum, or a
//   replacement) prefers the rack where most of its group's placed members
//   are.
//
// Settings: `rackLabel` (default `topology.kubernetes.io/rack`), `required`
// (default true).

import { config } from "wasmsched:policy/host@0.4.0";
import { Nodes, Settings, packScores, scoreEach } from "./wasmsched-helpers.js";

const DEFAULT_RACK_LABEL = "topology.kubernetes.io/rack";
// What spreading over every node costs a placement's score: more than any
// rack's count of members can make up.
const SPREAD_PENALTY = 1e9;

// Module state lives as long as the component instance.
let settings = { rackLabel: DEFAULT_RACK_LABEL, required: true };
const nodes = new Nodes();

function readSettings(text) {
  const raw = new Settings(text);
  const rackLabel = raw.str("rackLabel", DEFAULT_RACK_LABEL);
  if (rackLabel.trim() === "") throw "rackLabel is empty: name the node label whose values are the racks";
  const required = raw.flag("required", true);
  raw.checkAllRead();
  return { rackLabel, required };
}

// How many of the pod's group's placed members are in this node's rack.
function score(pod, node) {
  const rack = node.label(settings.rackLabel);
  if (pod.group == null || rack === null) return 0;
  return pod.group.placed.filter((m) => nodes.get(m.node)?.label(settings.rackLabel) === rack).length;
}

function scorePlacement(placement) {
  const spread = placement.domain === "" ? SPREAD_PENALTY : 0;
  return placement.members.length * 1000 - placement.nodes().length - spread;
}

export const policy = {
  describe() {
    return {
      name: "one-rack-js",
      version: "0.1.0",
      description: "a gang's members together in one rack (JavaScript)",
      phases: { filter: false, score: true, place: true },
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

  filter(_pod, candidates) {
    // Not called: describe() declares no filter phase.
    return { reasons: [], verdicts: new Uint8Array(candidates.nodes.length) };
  },

  score(pod, candidates, seed) {
    return scoreEach(nodes, pod, candidates, score, seed);
  },

  explainScore(_pod, candidates) {
    // No breakdown: the score is one count.
    return Array.from({ length: candidates.nodes.length / 4 }, () => []);
  },

  placementDomains(pod) {
    if (pod.group == null || pod.group.minCount < 2) return undefined;
    return { key: settings.rackLabel, required: settings.required };
  },

  scorePlacement(_pod, placements) {
    return packScores(nodes.placements(placements).map(scorePlacement));
  },
};
