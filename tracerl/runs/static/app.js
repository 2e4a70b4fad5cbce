// tracerl dashboard: curves, groups, episodes (call tree, conversation, coloured tokens) and why
// rewards were zero. Reads the dashboard server's JSON, or the data a report embeds
// (window.TRACERL_REPORT), so `tracerl report` is this same page in one file.
"use strict";

const REPORT = window.TRACERL_REPORT || null;
const KEY = new URLSearchParams(location.hash.slice(1)).get("key");
const COLOURS = ["#2f6fde", "#e0703c", "#1f9d55", "#8e44ad", "#c0392b", "#16a2b8", "#7f8c8d", "#d4a017"];
const KEY_METRICS = [
  [["rollout/reward_mean"], "reward (rollouts)"], [["eval/accuracy"], "held-out accuracy"],
  [["rollout/response_length_mean"], "response length (tokens)"], [["stats/entropy"], "entropy"],
  [["loss/kl"], "KL to the reference"], [["stats/clip_frac"], "clip fraction"], [["stats/grad_norm"], "grad norm"],
  [["groups/zero_variance_share"], "zero-variance groups (share)"], [["async/staleness_mean"], "staleness (versions)"],
  [["time/rollout_s", "time/update_s"], "rollout vs update (s)"],
];
const TERMINATIONS = ["success", "truncated", "max_turns", "timeout", "error", "cancelled", "no_llm_calls",
  "missing_token_ids", "grading_error"];
const CAUSES = {agent_error: "agent exception", timeout: "timeout", cancelled: "cancelled", grading_error: "grading error",
  missing_token_ids: "missing token ids", no_llm_calls: "no LLM calls", tool_error: "tool error",
  truncated: "truncated at max tokens", max_turns: "max turns", format: "no answer extracted (format)",
  no_reward: "no reward (nothing graded it)", wrong_answer: "wrong answer"};
const STEP_TICKS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
const state = {runs: [], shown: [], focus: null, metrics: {}, charts: [], detail: null};
// a flat series gets a little room around it instead of uPlot's 0..100
const padRange = (u, min, max) => min === max ? [min - (Math.abs(min) || 1) * 0.5, max + (Math.abs(max) || 1) * 0.5] : [min, max];
const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v; else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) n.setAttribute(k, v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined) n.append(kid.nodeType ? kid : String(kid));
  return n;
};
const fmt = (v, d = 3) => v === null || v === undefined ? "–" : typeof v === "number" ? +v.toFixed(d) + "" : v;
const pct = (v) => v === null || v === undefined ? "–" : (100 * v).toFixed(1) + " %";

async function api(path) {
  if (REPORT) return fromReport(path);
  const r = await fetch(path, {headers: KEY ? {Authorization: "Bearer " + KEY} : {}});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function fromReport(path) {
  const url = new URL(path, "http://report/");
  const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);  // api runs NAME what ID
  if (parts.length === 2) return REPORT.runs;
  const name = parts[2], what = parts[3];
  if (what === "metrics") return REPORT.metrics[name] || [];
  if (what === "diagnosis") return REPORT.diagnosis[name];
  if (what === "episodes" && parts[4]) {
    const found = (REPORT.details[name] || {})[parts[4]];
    if (!found) throw new Error("this report holds a sample of the episodes; that one is not in it");
    return found;
  }
  if (what === "episodes") return filterRows(REPORT.episodes[name] || [], url.searchParams);
  throw new Error("not in a report");
}

function filterRows(rows, p) {
  const num = (k) => p.get(k) === null || p.get(k) === "" ? null : +p.get(k);
  const out = rows.filter((r) => (!p.get("kind") || r.kind === p.get("kind")) && (num("step") === null || r.step === num("step"))
    && (!p.get("termination") || r.termination === p.get("termination"))
    && (!p.get("cause") || (r.diagnosis && r.diagnosis.code === p.get("cause")))
    && (!p.get("agent") || r.agents.includes(p.get("agent")))
    && (!p.get("task") || (r.task || "").includes(p.get("task")))
    && (num("min_reward") === null || (r.reward || 0) >= num("min_reward"))
    && (num("max_reward") === null || (r.reward || 0) <= num("max_reward"))
    && (!p.get("q") || (r.id + " " + (r.task || "")).toLowerCase().includes(p.get("q").toLowerCase())));
  return {total: out.length, rows: out};
}

// ---------------------------------------------------------------- runs and the header
async function loadRuns() {
  state.runs = await api("api/runs");
  if (!state.shown.length) state.shown = state.runs.slice(0, 4).map((r) => r.name);
  state.focus = state.focus || state.shown[0];
  const box = $("#runs");
  box.replaceChildren(...state.runs.map((r, i) => el("label", {},
    el("input", {type: "checkbox", value: r.name, ...(state.shown.includes(r.name) ? {checked: ""} : {}),
      onchange: (e) => toggleRun(r.name, e.target.checked)}),
    el("span", {style: `color:${COLOURS[i % COLOURS.length]}`}, " ● "), r.name, " ",
    el("span", {class: "badge " + ({finished: "good", failed: "bad", interrupted: "warn", running: "info"}[r.status] || "")}, r.status))));
  renderSummary();
}

function renderSummary() {
  const r = state.runs.find((x) => x.name === state.focus);
  if (!r) return;
  const rule = r.accuracy_rule ? ` (${r.accuracy_rule})` : "";
  // an evaluation that nothing graded says so: "no reward", never a 0 % it did not measure
  const none = (ungraded) => (ungraded ? "no reward" : "–");
  const reward = (x, ungraded) => (x === null || x === undefined ? none(ungraded) : x.toFixed(3));
  const acc = (x, ungraded) => (x === null || x === undefined ? none(ungraded)
    : pct(x) + (ungraded ? ` (${ungraded} ungraded)` : ""));
  $("#summary").textContent = `${r.task} · ${r.algo || ""} · step ${r.steps_done}/${r.steps} · accuracy ${acc(r.accuracy_before, r.ungraded_before)} → ${acc(r.accuracy_after, r.ungraded_after)}${rule} · mean reward ${reward(r.reward_before, r.ungraded_before)} → ${reward(r.reward_after, r.ungraded_after)}`;
}

async function toggleRun(name, on) {
  state.shown = on ? [...new Set([...state.shown, name])] : state.shown.filter((n) => n !== name);
  if (on) state.focus = name;
  await loadMetrics();
  renderCharts();
  renderSummary();
}

// ---------------------------------------------------------------- curves
async function loadMetrics() {
  for (const name of state.shown) if (!state.metrics[name]) state.metrics[name] = await api(`api/runs/${encodeURIComponent(name)}/metrics`);
}

function byStep(records) {  // step -> merged record (a step's update and its evaluation)
  const out = new Map();
  for (const r of records) out.set(r.step, Object.assign(out.get(r.step) || {}, r));
  return out;
}

function chartData(keys) {
  const perRun = state.shown.map((n) => byStep(state.metrics[n] || []));
  const xs = [...new Set(perRun.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
  const series = [];
  perRun.forEach((m, i) => keys.forEach((k) => series.push({run: state.shown[i], key: k,
    values: xs.map((x) => (m.get(x) && typeof m.get(x)[k] === "number") ? m.get(x)[k] : null)})));
  return {xs, series: series.filter((s) => s.values.some((v) => v !== null))};
}

function makeChart(parent, keys, title) {
  const box = el("div", {class: "chart", "data-metric": keys.join(",")}, el("h4", {}, title));
  parent.append(box);
  const chart = {box, keys, title, u: null};
  state.charts.push(chart);
  drawChart(chart);
}

function drawChart(chart) {
  const {xs, series} = chartData(chart.keys);
  const focus = series.find((s) => s.run === state.focus && s.key === chart.keys[0]);
  chart.box.dataset.points = focus ? focus.values.filter((v) => v !== null).length : 0;
  if (chart.u) { chart.u.destroy(); chart.u = null; }
  chart.box.querySelector(".empty")?.remove();
  if (!series.length) { chart.box.append(el("div", {class: "empty"}, "no points yet")); return; }
  const runIndex = (n) => state.runs.findIndex((r) => r.name === n);
  const opts = {width: Math.max(300, chart.box.clientWidth - 16), height: 180, legend: {show: series.length > 1},
    scales: {x: {time: false}, y: {range: padRange}}, axes: [{incrs: STEP_TICKS}, {}],
    series: [{label: "step"}, ...series.map((s, j) => ({label: `${s.run} ${s.key}`, spanGaps: true, width: 1.6,
      stroke: COLOURS[(runIndex(s.run) + (s.key === chart.keys[0] ? 0 : 3)) % COLOURS.length],
      points: {show: xs.length < 60}, dash: j % 2 && chart.keys.length > 1 ? [5, 3] : undefined}))]};
  chart.u = new uPlot(opts, [xs, ...series.map((s) => s.values)], chart.box);
}

function renderCharts() {
  state.charts.forEach((c) => c.u && c.u.destroy());
  state.charts = [];
  const key = $("#key-charts"), all = $("#all-charts");
  key.replaceChildren();
  all.replaceChildren();
  for (const [keys, title] of KEY_METRICS) makeChart(key, keys, title);
  const names = new Set(state.shown.flatMap((n) => (state.metrics[n] || []).flatMap((r) => Object.keys(r))));
  const groups = {};
  for (const k of [...names].sort()) if (k.includes("/")) (groups[k.split("/")[0]] ||= []).push(k);
  for (const [prefix, keys] of Object.entries(groups)) {
    const grid = el("div", {class: "charts"});
    const det = el("details", {"data-prefix": prefix}, el("summary", {}, `${prefix}/ (${keys.length})`), grid);
    det.addEventListener("toggle", () => { if (det.open && !grid.childElementCount) keys.forEach((k) => makeChart(grid, [k], k)); });
    all.append(det);
  }
}

async function poll() {
  let changed = false;
  for (const name of state.shown) {
    const have = state.metrics[name] || [];
    const fresh = await api(`api/runs/${encodeURIComponent(name)}/metrics?start=${have.length}`).catch(() => []);
    if (fresh.length) { state.metrics[name] = have.concat(fresh); changed = true; }
  }
  if (changed) { state.charts.forEach(drawChart); await loadRuns(); }
}

// ---------------------------------------------------------------- groups and side by side
async function renderGroups() {
  if ($("#group-step").value === "") {  // the latest step with rollouts
    const r = state.runs.find((x) => x.name === state.focus);
    $("#group-step").value = r ? Math.max(1, r.steps_done) : 1;
  }
  const step = +$("#group-step").value;
  const rows = await api(`api/runs/${encodeURIComponent(state.focus)}/groups?step=${step}`);
  const flat = rows.filter((g) => g.flat).length;
  $("#group-note").textContent = rows.length ? `${rows.length} groups, ${flat} flat (all rewards equal: no gradient)` : "no rollouts at this step";
  const agents = [...new Set(rows.map((g) => g.agent))];
  const head = el("tr", {}, ["task", "agent", "G", "solve rate", "mean", "std", "min", "max", ""].map((h) => el("th", {}, h)));
  $("#group-table").replaceChildren(head, ...rows.map((g) => el("tr", {class: "click", onclick: () => sideBySide(step, g.task_index)},
    el("td", {}, g.task || g.task_index), el("td", {}, agents.length > 1 ? g.agent : g.agent), el("td", {class: "num"}, g.n),
    el("td", {class: "num"}, pct(g.solve_rate)), el("td", {class: "num"}, fmt(g.reward_mean)), el("td", {class: "num"}, fmt(g.reward_std)),
    el("td", {class: "num"}, fmt(g.reward_min)), el("td", {class: "num"}, fmt(g.reward_max)),
    el("td", {}, g.flat ? el("span", {class: "badge warn"}, g.reward_max > 0 ? "flat: all solved" : "flat: all 0") : ""))));
  $("#side-by-side").replaceChildren();
}

async function sideBySide(step, taskIndex) {
  const eps = await api(`api/runs/${encodeURIComponent(state.focus)}/groups/${step}/${taskIndex}`);
  $("#side-by-side").replaceChildren(...eps.map((e) => el("div", {class: "col"},
    el("div", {class: "bar"}, el("b", {}, `reward ${fmt(e.reward)}`), el("span", {class: "dim"}, e.termination),
      el("button", {onclick: () => openEpisode(e.id)}, "open")),
    ...e.conversation.filter((m) => m.role !== "system").map(message))));
}

// ---------------------------------------------------------------- episodes
function fillFilters() {
  const f = $("#filters");
  f.termination.append(...TERMINATIONS.map((t) => el("option", {value: t}, t)));
  f.cause.append(...Object.entries(CAUSES).map(([k, v]) => el("option", {value: k}, v)));
  f.addEventListener("input", debounce(renderEpisodes, 250));
  f.addEventListener("submit", (e) => e.preventDefault());
}

async function renderEpisodes() {
  const params = new URLSearchParams();
  for (const [k, v] of new FormData($("#filters"))) if (v !== "") params.set(k, v);
  const table = $("#episode-table");
  const ticket = state.episodeTicket = (state.episodeTicket || 0) + 1;  // a slower, older answer must not win
  let found;
  try { found = await api(`api/runs/${encodeURIComponent(state.focus)}/episodes?${params}`); }
  catch (err) { table.replaceChildren(el("tr", {}, el("td", {class: "error"}, err.message))); return; }
  if (ticket !== state.episodeTicket) return;
  $("#episode-count").textContent = `${found.total} episodes` + (found.total > found.rows.length ? ` (first ${found.rows.length})` : "");
  const head = el("tr", {}, ["episode", "kind", "step", "task", "reward", "ending", "why no reward", "agents", "calls", "tokens"].map((h) => el("th", {}, h)));
  table.replaceChildren(head, ...found.rows.map((r) => el("tr", {class: "click", "data-id": r.id, "data-termination": r.termination,
    onclick: () => openEpisode(r.id)},
    el("td", {}, r.id), el("td", {}, r.kind), el("td", {class: "num"}, fmt(r.step)), el("td", {}, r.task || ""),
    el("td", {class: "num"}, fmt(r.reward)), el("td", {}, el("span", {class: "badge " + (r.termination === "success" ? "" : "warn")}, r.termination)),
    el("td", {}, r.diagnosis ? el("span", {class: "badge " + (r.diagnosis.kind === "infrastructure" ? "bad" : "")}, r.diagnosis.label) : ""),
    el("td", {}, r.agents.join(", ")), el("td", {class: "num"}, r.llm_calls), el("td", {class: "num"}, r.response_tokens))));
}

// ---------------------------------------------------------------- one episode
async function openEpisode(id) {
  const ep = await api(`api/runs/${encodeURIComponent(state.focus)}/episodes/${encodeURIComponent(id)}`).catch((e) => ({error: e.message}));
  $("#detail").hidden = false;
  $("#detail-title").textContent = id;
  if (ep.error) { $("#detail-head").replaceChildren(el("div", {class: "error"}, ep.error)); return; }
  state.detail = ep;
  $("#detail-head").replaceChildren(el("div", {class: "bar"},
    el("span", {}, `reward ${fmt(ep.reward)}`), el("span", {class: "badge"}, ep.termination),
    ep.diagnosis ? el("span", {class: "badge bad"}, ep.diagnosis.label + (ep.diagnosis.detail ? ": " + ep.diagnosis.detail : "")) : null,
    el("span", {class: "dim"}, `task ${ep.task || "–"} · answer ${JSON.stringify(ep.answer)}`)),
    ...(ep.traceback ? [el("pre", {class: "msg"}, ep.traceback)] : []));
  $("#detail-conversation").replaceChildren(...ep.trajectories.map((t) => el("div", {},
    el("h4", {}, `${t.name} · reward ${fmt(t.reward)}`), ...t.conversation.map(message))));
  $("#detail-tree").replaceChildren(callTree(ep.spans));
  await renderTokens();
}

function message(m) {
  const calls = (m.tool_calls || []).map((c) => el("div", {class: "call"}, `→ ${c.name}(${c.arguments})`));
  return el("div", {class: "msg " + m.role}, el("div", {class: "role"}, m.role + (m.name ? ` · ${m.name}` : "")), m.content || "", ...calls);
}

function callTree(spans) {
  const ids = new Set(spans.map((s) => s.span_id)), kids = new Map();
  for (const s of spans) { const p = ids.has(s.parent) ? s.parent : null; (kids.get(p) || kids.set(p, []).get(p)).push(s); }
  const build = (parent) => el("ul", {}, ...(kids.get(parent) || []).sort((a, b) => a.start_ns - b.start_ns).map((s) => el("li", {},
    el("span", {class: s.status === "ERROR" ? "err" : s.gateway ? "gw" : ""}, s.name), " ",
    el("span", {class: "dim"}, `${s.kind} ${s.duration_ms.toFixed(1)} ms${s.gateway ? " · gateway tokens" : ""}${s.message ? " · " + s.message : ""}`),
    toolIO(s.attributes), kids.has(s.span_id) ? build(s.span_id) : null)));
  return el("div", {class: "tree"}, build(null));
}

// A tool call's input and output under its span: a shell command as "$ command", then what it printed.
function toolIO(a) {
  const args = a["gen_ai.tool.call.arguments"], result = a["gen_ai.tool.call.result"] ?? a["tracerl.shell.output"];
  if (args === undefined && result === undefined) return null;
  let input = args;
  try { const parsed = JSON.parse(args); if (parsed && typeof parsed.command === "string") input = "$ " + parsed.command; } catch (e) { /* not JSON: as written */ }
  const text = [input, result].filter((x) => x !== undefined && x !== "").join("\n");
  return text ? el("pre", {class: "tool-io"}, text) : null;
}

function tokenStyle(mode, mask, adv, lp, gap) {
  if (mode === "gap") {
    if (!mask || gap === null || gap === undefined) return "color:#999";
    return `background:rgba(142,68,173,${Math.min(0.85, 0.1 + Math.abs(gap) * 8).toFixed(2)})`;
  }
  if (mode === "mask") return mask ? "background:#dbe8ff" : "background:#eeeeee;color:#777";
  if (mode === "advantage") {
    if (!mask || adv === null || adv === undefined) return "color:#999";
    const a = Math.min(1, Math.abs(adv) / 1.5);
    return adv >= 0 ? `background:rgba(31,157,85,${0.15 + 0.6 * a})` : `background:rgba(214,69,69,${0.15 + 0.6 * a})`;
  }
  if (!mask || lp === null || lp === undefined) return "color:#999";
  const p = Math.exp(lp);  // the sampler's probability of the token it drew
  return `background:rgba(199,125,0,${(0.75 * (1 - p)).toFixed(2)})`;
}

async function trainerLogprobs(ep) {
  if (ep.trainer === undefined) {
    ep.trainer = await api(`api/runs/${encodeURIComponent(state.focus)}/episodes/${encodeURIComponent(ep.id)}/trainer`)
      .catch((e) => ({error: e.message}));
  }
  return ep.trainer;
}

async function renderTokens() {
  const ep = state.detail, mode = $("#colour").value;
  if (!ep) return;
  let trainer = null, note = null;
  if (mode === "gap") {
    trainer = await trainerLogprobs(ep);
    if (trainer.error) { note = trainer.error; trainer = null; }
  }
  const gaps = [];
  $("#legend").replaceChildren(...({mask: [["#dbe8ff", "model tokens (trained)"], ["#eeeeee", "inserted: prompt, tools, template"]],
    advantage: [["rgba(31,157,85,.6)", "positive advantage"], ["rgba(214,69,69,.6)", "negative"], ["#fff", "none: not trained"]],
    logprob: [["rgba(199,125,0,.7)", "unlikely under the sampler"], ["#fff", "likely"]],
    gap: [["rgba(142,68,173,.7)", "sampler and trainer disagree"], ["#fff", "agree"]]}[mode]).map(([c, t]) => el("span", {style: `background:${c}`}, t)));
  const blocks = [];
  for (const t of ep.trajectories) {
    blocks.push(el("h4", {}, `${t.name}: ${t.sequences.length} chain(s)${t.flat ? " · flat group: not trained" : t.trained ? "" : " · not trained"}`));
    t.sequences.forEach((s, i) => {
      const from = s.parent === null || s.parent === undefined ? "" : ` from ${s.parent_agent ? s.parent_agent + "'s " : ""}chain ${s.parent + 1}`;
      if (s.start === "break") blocks.push(el("div", {class: "break"}, `chain ${i + 1}: prefix break${from}: the next call's prompt did not hold the reply as sampled, so a new chain starts`));
      else if (s.start === "fresh") blocks.push(el("div", {class: "chain"}, `chain ${i + 1}: a fresh context${from} (a sub-agent, a handoff, a compaction)`));
      const seq = el("div", {class: "seq", "data-trajectory": t.name, "data-sequence": i, "data-masked": s.mask.reduce((a, b) => a + b, 0)});
      const ti = ep.trajectories.indexOf(t), mine = trainer ? trainer.trajectories[ti][i] : null;
      s.token_ids.forEach((id, j) => {
        const adv = s.advantages ? s.advantages[j] : null, lp = s.logprobs ? s.logprobs[j] : null;
        const gap = mine && lp !== null && mine[j] !== null ? lp - mine[j] : null;
        if (gap !== null && s.mask[j]) gaps.push(Math.abs(gap));
        seq.append(el("span", {class: "tok", "data-mask": s.mask[j], style: tokenStyle(mode, s.mask[j], adv, lp, gap),
          title: `id ${id} · mask ${s.mask[j]}` + (adv !== null ? ` · advantage ${fmt(adv)}` : "") + (lp !== null && s.mask[j] ? ` · logprob ${fmt(lp)}` : "")
            + (gap !== null && s.mask[j] ? ` · sampler − trainer ${fmt(gap, 5)}` : "")},
          s.tokens ? s.tokens[j] : `[${id}]`));
      });
      blocks.push(seq);
    });
  }
  if (mode === "gap") blocks.unshift(el("p", {class: "dim"}, note || `weights of version ${trainer.version} (${trainer.model}): mean |Δ| ${fmt(
    gaps.reduce((a, b) => a + b, 0) / Math.max(1, gaps.length), 6)}, max ${fmt(Math.max(0, ...gaps), 6)} over ${gaps.length} model tokens`));
  $("#sequences").replaceChildren(...blocks);
}

// ---------------------------------------------------------------- why zero
async function renderDiagnosis() {
  const body = $("#diagnosis-body");
  let d;
  try { d = await api(`api/runs/${encodeURIComponent(state.focus)}/diagnosis`); }
  catch (err) { body.replaceChildren(el("div", {class: "error"}, err.message)); return; }
  const head = el("tr", {}, ["", "why the reward was zero", "episodes", "share", "examples"].map((h) => el("th", {}, h)));
  const rows = d.causes.map((c) => el("tr", {"data-cause": c.code},
    el("td", {}, el("span", {class: "badge " + (c.kind === "infrastructure" ? "bad" : "")}, c.kind)), el("td", {}, c.label),
    el("td", {class: "num"}, c.episodes), el("td", {class: "num"}, pct(c.episodes / Math.max(1, d.unrewarded))),
    el("td", {}, ...c.examples.map((x) => el("a", {href: "#", title: x.detail || "", onclick: (e) => { e.preventDefault(); openEpisode(x.id); }}, x.id.split("-").slice(-3).join("-") + " ")))));
  const excluded = Object.entries(d.excluded).map(([k, v]) => `${v} excluded (${k})`);
  body.replaceChildren(
    el("p", {}, `${d.episodes} training episodes, ${d.unrewarded} without reward (${pct(d.unrewarded / Math.max(1, d.episodes))}); ${d.eval_episodes} evaluation episodes.`),
    el("table", {class: "grid"}, head, ...rows),
    el("h4", {}, "why episodes did not train"),
    el("ul", {}, el("li", {}, `${d.flat_episodes} episodes in ${d.flat_groups} of ${d.groups} groups whose rewards were all equal (dropped: no gradient)`),
      ...excluded.map((t) => el("li", {}, t)), el("li", {}, `${d.prefix_break_episodes} episodes split by a prefix break into more than one sequence`)));
  const steps = Object.keys(d.by_step).map(Number).sort((a, b) => a - b);
  const box = $("#cause-chart");
  box.replaceChildren(el("h4", {}, "causes per step"));
  const codes = d.causes.map((c) => c.code);
  if (steps.length && codes.length) new uPlot({width: Math.max(320, box.clientWidth - 20), height: 220,
    scales: {x: {time: false}, y: {range: padRange}}, axes: [{incrs: STEP_TICKS}, {}],
    series: [{label: "step"}, ...codes.map((c, i) => ({label: CAUSES[c], stroke: COLOURS[i % COLOURS.length], width: 1.6}))]},
    [steps, ...codes.map((c) => steps.map((s) => d.by_step[s][c] || 0))], box);
}

// ---------------------------------------------------------------- wiring
function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }

function show(tab) {
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("on", b.dataset.tab === tab));
  document.querySelectorAll("main .tab").forEach((s) => s.classList.toggle("on", s.id === tab));
  if (tab === "groups") renderGroups().catch(showError);
  if (tab === "episodes") renderEpisodes();
  if (tab === "diagnosis") renderDiagnosis();
}

function showError(err) { $("main").prepend(el("div", {class: "error"}, String(err.message || err))); }

async function main() {
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => show(b.dataset.tab)));
  document.querySelectorAll("#detail-tabs button").forEach((b) => b.addEventListener("click", () => {
    document.querySelectorAll("#detail-tabs button").forEach((x) => x.classList.toggle("on", x === b));
    document.querySelectorAll("aside .view").forEach((v) => v.classList.toggle("on", v.id === "detail-" + b.dataset.view));
  }));
  $("#detail-close").addEventListener("click", () => { $("#detail").hidden = true; });
  $("#colour").addEventListener("change", () => renderTokens().catch(showError));
  $("#group-step").addEventListener("change", () => renderGroups().catch(showError));
  if (REPORT) document.querySelector('#tabs [data-tab="groups"]').remove();
  fillFilters();
  try {
    await loadRuns();
    await loadMetrics();
    renderCharts();
    document.body.dataset.ready = "1";
  } catch (err) { showError(err); }
  if (!REPORT) setInterval(() => poll().catch(() => {}), 2000);
}

main();
