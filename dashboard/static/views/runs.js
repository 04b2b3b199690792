// Runs view: sortable, filterable table of every run (auto-refresh while sweeps run), problems list.
import { el, fmt, getJSON, sortableTable, downloadLink, problemsBox, setStatus, state, saveSelection } from "../ui.js";

const COLS = [
  { key: "sel", label: "", render: r => el("input", { type: "checkbox", class: "sel", checked: state.selected.has(r.id),
      onchange: e => { e.target.checked ? state.selected.add(r.id) : state.selected.delete(r.id); saveSelection(); } }), sortValue: r => state.selected.has(r.id) ? 0 : 1 },
  { key: "sweep", label: "sweep", text: true }, { key: "run", label: "run", text: true },
  { key: "branch_of", label: "branch of", text: true, title: "the run this one branched from (train.init_from) and the step it branched at",
    render: r => r.branch_of == null ? "" : el("span", { title: r.branch_of }, `${r.branch_of.split("/").pop()} step ${r.branch_step ?? "?"}`),
    sortValue: r => r.branch_of == null ? null : `${r.branch_of} ${String(r.branch_step ?? 0).padStart(12, "0")}` },
  { key: "model", label: "model", text: true },
  { key: "params", label: "N" }, { key: "active_params", label: "active N" }, { key: "tokens", label: "D (tokens)" },
  { key: "epochs", label: "epochs", title: "passes over the training split's unique tokens (tokens / unique_tokens)",
    render: r => r.epochs == null ? "" : (r.epochs < 10 ? r.epochs.toFixed(2) : r.epochs.toFixed(1)) },
  { key: "batch_size", label: "batch" }, { key: "lr", label: "lr" },
  { key: "optim", label: "optimizer", text: true, title: "optim.name (a config without the key: adamw, the default)" },
  { key: "router", label: "router", text: true },
  { key: "status", label: "status", text: true, render: r => el("span", { class: `status-${r.status}`, title: r.error || r.problem || "" }, r.status + (r.status !== "done" && r.steps != null ? ` · step ${r.steps}${r.total_steps ? "/" + r.total_steps : ""}` : "")) },
  { key: "final_loss", label: "loss" }, { key: "final_val_loss", label: "val loss" },
  { key: "tokens_per_s", label: "tokens/s" }, { key: "mfu", label: "MFU", render: r => r.mfu == null ? "" : (100 * r.mfu).toFixed(1) + "%" },
  { key: "n_evals", label: "evals" },
];

function matches(r, q, status) {
  if (status && r.status !== status) return false;
  if (!q) return true;
  return q.toLowerCase().split(/\s+/).filter(Boolean).every(term => {
    const m = term.match(/^([a-z_]+)(<=|>=|=|<|>)(.+)$/);  // e.g. lr<0.005, status=done
    if (m) {
      const v = r[m[1]], t = Number(m[3]);
      if (m[2] === "=") return String(v ?? "").toLowerCase() === m[3];
      if (v == null || Number.isNaN(t)) return false;
      return { "<": v < t, ">": v > t, "<=": v <= t, ">=": v >= t }[m[2]];
    }
    return ["id", "sweep", "run", "branch_of", "model", "status", "optim", "router", "name"].some(k => String(r[k] ?? "").toLowerCase().includes(term));
  });
}

let timer = null;
export default {
  async render(root) {
    const filter = el("input", { id: "filter", type: "search", placeholder: "filter: text, or lr<0.005 optim=muon", size: 34 });
    const statusSel = el("select", { id: "status-filter" }, el("option", { value: "" }, "any status"),
      ...["done", "running", "partial", "pending", "failed", "preempted", "stale"].map(s => el("option", { value: s }, s)));
    const auto = el("input", { id: "autorefresh", type: "checkbox", checked: true });
    const count = el("span", { id: "count", class: "muted" });
    const plotBtn = el("button", { id: "plot-selected", onclick: () => { location.hash = "#curves"; } }, "Plot selected →");
    root.append(el("div", { class: "toolbar" }, filter, statusSel, el("label", {}, auto, " auto-refresh (5 s)"), plotBtn,
      downloadLink("/api/runs.csv", "runs CSV"), downloadLink("/api/problems.csv", "problems CSV"), count));
    const wrap = el("div", { class: "tablewrap" });
    const probs = el("div");
    root.append(wrap, probs);
    let all = [], table = null, lastSig = null;
    const apply = () => {
      const rows = all.filter(r => matches(r, filter.value.trim(), statusSel.value));
      table.setRows(rows);
      count.textContent = `${rows.length} of ${all.length} runs`;
    };
    const load = async () => {
      const d = await getJSON("/api/runs");
      const sig = JSON.stringify([d.runs, d.problems]);
      if (sig === lastSig && table) { setStatus(`${d.runs.length} runs · unchanged · ${new Date(d.time * 1000).toLocaleTimeString()}`); return; }
      lastSig = sig;
      all = d.runs;
      if (!table) { table = sortableTable(COLS, [], { id: "runs-table", sortKey: "sweep" }); wrap.append(table); }
      apply();
      probs.replaceChildren(problemsBox(d.problems, "Malformed or half-written run directories"));
      setStatus(`${d.runs.length} runs · scan ${(1000 * d.scan_s).toFixed(0)} ms · ${new Date(d.time * 1000).toLocaleTimeString()}`);
    };
    filter.addEventListener("input", apply);
    statusSel.addEventListener("change", apply);
    await load();
    timer = setInterval(() => { if (auto.checked) load().catch(e => setStatus(`refresh failed: ${e.message}`)); }, 5000);
  },
  stop() { clearInterval(timer); timer = null; },
};
