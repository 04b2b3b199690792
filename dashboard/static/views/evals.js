// Evals view: task × run (or × checkpoint) matrix with stderr, sortable; accuracy vs FLOPs per task.
import { el, fmt, getJSON, sortableTable, plot, downloadLink, problemsBox, setStatus } from "../ui.js";

export default {
  async render(root) {
    const d = await getJSON("/api/evals");
    const perCkpt = el("input", { type: "checkbox", id: "per-checkpoint" });
    const taskSel = el("select", { id: "eval-task" });
    root.append(el("div", { class: "toolbar" }, el("label", {}, perCkpt, " one column per checkpoint (else: latest per run)"),
      downloadLink("/api/evals.csv", "evals CSV")));
    const wrap = el("div", { class: "tablewrap", id: "eval-matrix-wrap" });
    const plotDiv = el("div", { class: "plot", id: "plot-eval-flops" });
    root.append(wrap, el("h3", {}, "Score vs training FLOPs"), el("div", { class: "toolbar" }, el("label", {}, "task/metric: ", taskSel)), plotDiv,
      problemsBox(d.problems, "Unreadable eval files"));
    const ok = d.rows.filter(r => r.status !== "failed");
    if (!d.rows.length) {
      wrap.append(el("p", { id: "no-evals" }, "No evaluation results yet (run `scalelab eval RUN --suite tiny`)."));
      setStatus("0 eval results");
      return;
    }
    const tm = [...new Set(d.rows.map(r => `${r.task} / ${r.metric}`))].sort();
    taskSel.replaceChildren(...tm.filter(t => !t.endsWith("/ failed")).map(t => el("option", { value: t }, t)));
    const latest = {};
    for (const r of d.rows) latest[r.run] = Math.max(latest[r.run] ?? -Infinity, r.step ?? -1);
    const drawMatrix = () => {
      const rows = perCkpt.checked ? d.rows : d.rows.filter(r => (r.step ?? -1) === latest[r.run]);
      const colKey = r => perCkpt.checked ? `${r.run}@${r.step}` : r.run;
      const cols = [...new Set(rows.map(colKey))].sort();
      const byTask = {};
      for (const r of rows) {
        const k = `${r.task} / ${r.metric}`;
        (byTask[k] ??= { id: k, task: r.task, metric: r.metric })[colKey(r)] = r;
      }
      const columns = [{ key: "task", label: "task", text: true }, { key: "metric", label: "metric", text: true },
        ...cols.map(c => ({ key: c, label: c, sortValue: t => t[c]?.value,
          render: t => { const r = t[c]; if (!r) return ""; if (r.status === "failed") return el("span", { class: "error", title: r.error || "" }, "failed");
            return el("span", { title: `n=${r.n ?? "?"} suite=${r.suite ?? ""}` }, fmt(r.value) + (r.stderr != null ? ` ± ${fmt(r.stderr)}` : "")); } }))];
      wrap.replaceChildren(sortableTable(columns, Object.values(byTask), { id: "eval-matrix", sortKey: "task" }));
    };
    const drawPlot = () => {
      const [task, metric] = taskSel.value.split(" / ");
      const rs = ok.filter(r => r.task === task && r.metric === metric && r.flops != null && r.value != null);
      const runs = [...new Set(rs.map(r => r.run))];
      const traces = runs.map(run => { const pts = rs.filter(r => r.run === run).sort((a, b) => a.flops - b.flops);
        return { type: "scatter", mode: "lines+markers", name: run, x: pts.map(p => p.flops), y: pts.map(p => p.value),
          error_y: { type: "data", array: pts.map(p => p.stderr ?? 0), visible: true } }; });
      plot(plotDiv, traces, { title: { text: `${taskSel.value} vs training FLOPs` }, xaxis: { type: "log", title: { text: "training FLOPs at checkpoint" } },
        yaxis: { title: { text: metric } }, margin: { t: 40, r: 10 } }, `eval-${task}-${metric}`);
    };
    perCkpt.addEventListener("change", drawMatrix);
    taskSel.addEventListener("change", drawPlot);
    drawMatrix(); drawPlot();
    setStatus(`${d.rows.length} eval results from ${Object.keys(latest).length} runs`);
  },
};
