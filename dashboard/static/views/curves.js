// Curves view: loss / val loss / lr vs step, tokens or FLOPs for the selected runs; log axes, EMA smoothing.
import { el, getJSON, plot, downloadLink, state, saveSelection, setStatus } from "../app.js";

const PANELS = [["loss", "train loss"], ["val_loss", "val loss"], ["lr", "learning rate"]];

function ema(ys, a) {
  if (!a) return ys;
  let m = null;
  return ys.map(y => { if (y == null) return null; m = m == null ? y : a * m + (1 - a) * y; return m; });
}

let timer = null;
export default {
  async render(root) {
    const { runs } = await getJSON("/api/runs");
    const ids = new Set(runs.map(r => r.id));
    for (const s of [...state.selected]) if (!ids.has(s)) state.selected.delete(s);
    const xSel = el("select", { id: "xaxis" }, ...["step", "tokens", "flops"].map(x => el("option", { value: x }, x)));
    const logx = el("input", { type: "checkbox", id: "logx" }), logy = el("input", { type: "checkbox", id: "logy" });
    const smooth = el("input", { type: "range", id: "smooth", min: 0, max: 0.99, step: 0.01, value: 0 });
    const smoothLbl = el("span", { class: "muted" }, "0");
    const csv = downloadLink("#", "curves CSV");
    const list = el("div", { class: "runlist", id: "curve-runs" }, el("strong", {}, "runs"),
      ...runs.map(r => el("label", {}, el("input", { type: "checkbox", value: r.id, checked: state.selected.has(r.id),
        onchange: e => { e.target.checked ? state.selected.add(r.id) : state.selected.delete(r.id); saveSelection(); load(); } }), " ", r.id)));
    const plots = el("div", { class: "plots", style: "flex:1" }, ...PANELS.map(([k]) => el("div", { class: "plot", id: `plot-${k}` })));
    root.append(el("div", { class: "toolbar" }, el("label", {}, "x: ", xSel), el("label", {}, logx, " log x"), el("label", {}, logy, " log y"),
      el("label", {}, "smoothing ", smooth, " ", smoothLbl), csv), el("div", { class: "side" }, list, plots));
    let data = [];
    const draw = () => {
      const x = xSel.value, a = Number(smooth.value);
      smoothLbl.textContent = a.toFixed(2);
      for (const [k, title] of PANELS) {
        const traces = data.map(r => {
          const keep = r.series[k].map((y, i) => y != null && r.series[x][i] != null);
          const xs = r.series[x].filter((_, i) => keep[i]), ys = r.series[k].filter((_, i) => keep[i]);
          return { type: "scatter", mode: k === "val_loss" ? "lines+markers" : "lines", name: r.id, x: xs, y: k === "lr" ? ys : ema(ys, a) };
        });
        plot(`plot-${k}`, traces, { title: { text: `${title} vs ${x}` }, margin: { t: 40, r: 10 }, showlegend: true, legend: { font: { size: 10 } },
          xaxis: { title: { text: x }, type: logx.checked ? "log" : "linear" }, yaxis: { title: { text: title }, type: logy.checked ? "log" : "linear" } }, `${k}-vs-${x}`);
      }
    };
    const load = async () => {
      const sel = [...state.selected].slice(0, 50);
      const q = sel.map(s => "run=" + encodeURIComponent(s)).join("&");
      csv.href = "/api/curves.csv?" + q;
      data = sel.length ? (await getJSON("/api/curves?" + q)).runs : [];
      setStatus(`${data.length} runs plotted`);
      draw();
    };
    for (const c of [xSel, logx, logy]) c.addEventListener("change", draw);
    smooth.addEventListener("input", draw);
    await load();
    timer = setInterval(() => { if (runs.some(r => state.selected.has(r.id) && r.status !== "done" && r.status !== "failed")) load(); }, 5000);
  },
  stop() { clearInterval(timer); },
};
