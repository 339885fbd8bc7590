// agents.js: multi-agent (PettingZoo) recordings in the viewer: the per-agent columns named by
// agent, each agent's rewards in one chart, and an agent picker that shows that agent's leaves.
// A multi-agent episode's leaves are the joint rows of the format spec ("Multi-agent
// recordings"): observations/observations/<agent>/..., actions/actions/<agent>/..., and
// vectors with one column an agent, in the order of the manifest's agents.

// The leaves whose columns are one an agent.
const AGENT_VECTORS = ["observations/observed", "observations/live", "observations/rewards",
  "observations/terminations", "observations/truncations", "observations/cumulative_rewards",
  "actions/given"];

/** The series names of a leaf's columns: by agent for a per-agent vector, else path[j]. */
export function columnNames(leaf, cols, multiagent) {
  if (cols.length === 1) return [leaf.path];
  if (multiagent && AGENT_VECTORS.includes(leaf.path) && cols.length === multiagent.agents.length) {
    return multiagent.agents.map((a) => `${leaf.path}[${a}]`);
  }
  return cols.map((_, j) => `${leaf.path}[${j}]`);
}

/** The leaves of one agent (its observation and action leaves), or null for "all". */
export function agentLeaves(leaves, agent) {
  const mine = [`observations/observations/${agent}`, `actions/actions/${agent}`];
  return [...leaves.keys()].filter((p) => mine.some((m) => p === m || p.startsWith(m + "/")));
}

/** Fills the agent picker for this episode (hidden for a single-agent one). */
export function showPicker(select, multiagent, current) {
  select.parentElement.hidden = !multiagent;
  if (!multiagent) return "";
  const options = ["", ...multiagent.agents];
  select.innerHTML = options.map((a) => `<option value="${escapeHTML(a)}">${a ? escapeHTML(a) : "all agents"}</option>`).join("");
  select.value = options.includes(current) ? current : "";
  return select.value;
}

function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
