// MoE view: loss vs compute for dense and MoE runs with a `fit moe` law; router comparison across MoE
// runs; per run, expert load heatmaps per layer, imbalance (step and micro-batch), dropped tokens, load entropy,
// dead experts, realised experts per token and their distribution, routing change (figures from dashboard/views/moe_router.py).
import { el, fmt, getJSON, plot, downloadLink, setStatus } from "../ui.js";

function paramsTable(rec, flags) {
  const iv = rec.intervals || {};
  const flagged = k => flags.some(f => f.startsWith(k + " ") || f.startsWith(k + "'s "));
  return el("table", { class: "data params", id: "moe-fit-params" },
    el("thead", {}, el("tr", {}, el("th", { class: "text" }, "param"), el("th", {}, "value"), el("th", {}, "interval"))),
    el("tbody", {}, Object.entries(rec.params || {}).map(([k, v]) => el("tr", { class: flagged(k) ? "flagged" : null, "data-param": k },
      el("td", {}, k), el("td", {}, v == null ? "not identified" : fmt(v)), el("td", {}, iv[k] && iv[k][0] != null ? `[${fmt(iv[k][0])}, ${fmt(iv[k][1])}]` : "")))));
}

async function scalingSection(host, params) {
  const color = el("select", { id: "moe-color" }, ...[["experts", "experts E"], ["granularity", "granularity G"], ["router", "router"]].map(([v, t]) => el("option", { value: v }, t)));
  const xSel = el("select", { id: "moe-x" }, el("option", { value: "6nd" }, "C = 6 N_active D"), el("option", { value: "flops" }, "trainer FLOPs"));
  const fitSel = el("select", { id: "moe-fit" });
  const fitCsv = downloadLink("#", "law parameters CSV");
  const info = el("div", { id: "moe-fit-info" }), plots = el("div", { class: "plots", id: "moe-scaling" });
  host.append(el("h3", {}, "Loss vs compute: dense and MoE runs, and the fitted law"),
    el("div", { class: "toolbar" }, el("label", {}, "colour by: ", color), el("label", {}, "x: ", xSel), el("label", {}, "fit moe record: ", fitSel),
      downloadLink("/api/moe/scaling.csv", "runs CSV"), fitCsv), info, plots);
  for (const [k, c] of [["color", color], ["x", xSel]]) if (params.get(k)) c.value = params.get(k);
  let fit = params.get("fit");
  const show = async () => {
    const q = new URLSearchParams({ color: color.value, x: xSel.value });
    if (fit != null) q.set("fit", fit);
    const d = await getJSON("/api/moe/scaling?" + q);
    fitSel.replaceChildren(el("option", { value: "" }, "none"), ...d.fits.map(f => el("option", { value: f.id }, `${f.id}${f.not_identified ? " — not identified" : ""}`)));
    fitSel.value = d.fit ? d.fit.id : "";
    fitCsv.hidden = !d.fit;
    const figs = [d.runs_figure, ...(d.fit ? d.fit.figures : [])];
    if (d.fit) {
      const r = d.fit.record, flags = d.fit.not_identified || [];
      fitCsv.href = "/api/fit.csv?id=" + encodeURIComponent(d.fit.id);
      info.replaceChildren(
        flags.length ? el("div", { class: "error flag", id: "moe-fit-flag" }, el("strong", {}, "not identified: "), flags.join("; "),
          el("p", {}, "The fitted law is not drawn; the table shows its parameters as fitted.")) : "",
        paramsTable(r, flags),
        el("p", { class: "muted" }, `${(r.settings || {}).law ?? "?"} law · ${r.n_points} points · N = ${r.n_kind ?? "?"} · C = ${(r.conventions || {}).compute ?? "?"}` +
          (d.fit.points_note ? ` · data points not shown: ${d.fit.points_note}` : ` · ${d.fit.n_data_points} data points`)),
        ...(r.warnings || []).map(w => el("p", { class: "error" }, "warning: " + w)));
    } else info.replaceChildren(d.fits.length ? "" : el("p", { class: "muted", id: "no-moe-fit" }, "No `fit moe` record under --fits (scalelab fit moe runs/SWEEP --out fits/moe.json)."));
    plots.replaceChildren(...figs.map(f => el("div", { class: "plot", id: "moe-" + f.id })));
    for (const f of figs) plot("moe-" + f.id, f.data, f.layout, f.id);
  };
  const redraw = () => show().catch(e => info.replaceChildren(el("p", { class: "error" }, e.message)));
  color.addEventListener("change", redraw);
  xSel.addEventListener("change", redraw);
  fitSel.addEventListener("change", () => { fit = fitSel.value; redraw(); });
  await show();
}

export default {
  async render(root, params) {
    await scalingSection(root, params);
    const { runs } = await getJSON("/api/runs");
    const moe = runs.filter(r => r.num_experts);
    if (!moe.length) { root.append(el("p", { id: "no-moe" }, "No MoE runs (model.moe) under this runs root.")); return; }
    const sel = el("select", { id: "moe-run" }, ...moe.map(r => el("option", { value: r.id }, `${r.id} — ${r.router ?? "?"} router, ${r.num_experts} experts, top-${r.top_k ?? "?"}`)));
    if (params.get("run")) sel.value = params.get("run");
    const info = el("p", { class: "muted" }), plots = el("div", { class: "plots", id: "moe-plots" });
    const cmp = el("div", { class: "plots", id: "moe-compare" });
    root.append(el("h3", {}, "Routers compared (all MoE runs)"), cmp, el("h3", {}, "One run, per layer"),
      el("div", { class: "toolbar" }, el("label", {}, "MoE run: ", sel)), info, plots);
    const c = await getJSON("/api/moe/compare");
    cmp.replaceChildren(...c.figures.map(f => el("div", { class: "plot", id: "moe-" + f.id })));
    for (const f of c.figures) plot("moe-" + f.id, f.data, f.layout, f.id);
    const show = async () => {
      const d = await getJSON("/api/moe?run=" + encodeURIComponent(sel.value));
      info.textContent = `router ${d.row.router ?? "?"} · ${d.row.num_experts} experts · top-${d.row.top_k ?? "?"}` +
        (d.row.granularity != null ? ` · granularity ${fmt(d.row.granularity)}` : "") + ` · status ${d.row.status}`;
      plots.replaceChildren(...d.figures.map(f => el("div", { class: "plot", id: "moe-" + f.id })));
      if (!d.figures.length) plots.append(el("p", {}, "This run logged no moe/* metrics yet."));
      for (const f of d.figures) plot("moe-" + f.id, f.data, f.layout, `${sel.value.replace(/\//g, "_")}-${f.id}`);
      setStatus(`${moe.length} MoE runs`);
    };
    sel.addEventListener("change", show);
    await show();
  },
};
