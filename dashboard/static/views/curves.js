// Curves view: loss / val loss / lr vs step, tokens or FLOPs for the selected runs; log axes, EMA smoothing.
// "with branches": a selected stable run or branch brings its whole family (the stable run and every run
// branched from it), drawn in one colour family: the stable run solid, each branch a lighter shade starting
// at the stable run's point where it branched (a diamond marks each branch point).
import { el, getJSON, plot, downloadLink, state, saveSelection, setStatus } from "../ui.js";

const PANELS = [["loss", "train loss"], ["val_loss", "val loss"], ["lr", "learning rate"]];
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

function shade(hex, t) {  // mix with white: 0 = the colour, 1 = white
  const n = parseInt(hex.slice(1), 16);
  return "#" + [n >> 16, (n >> 8) & 255, n & 255].map(v => Math.round(v + (255 - v) * t).toString(16).padStart(2, "0")).join("");
}

// {id: {color, width, family, role}}: families of 2+ runs share a hue; other runs take the next colour.
function styles(data) {
  const members = {};
  for (const r of data) (members[r.family] = members[r.family] || []).push(r);
  const out = {};
  let next = 0;
  for (const r of data) {
    if (out[r.id]) continue;
    const fam = members[r.family];
    const base = PALETTE[next++ % PALETTE.length];
    if (fam.length < 2) { out[r.id] = { color: base, width: 2, family: null, role: "run" }; continue; }
    const branches = fam.filter(m => m.id !== r.family);
    for (const m of fam) {
      const i = branches.indexOf(m);
      out[m.id] = i < 0 ? { color: base, width: 2.5, family: r.family, role: "stable" }
        : { color: shade(base, 0.15 + 0.45 * i / Math.max(1, branches.length - 1)), width: 1.5, family: r.family, role: "branch" };
    }
  }
  return out;
}

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
    const fam = el("input", { type: "checkbox", id: "with-branches", checked: localStorage.getItem("scalelab.branches") !== "0",
      title: "a selected stable run or branch brings its stable run and every branch of it" });
    const smooth = el("input", { type: "range", id: "smooth", min: 0, max: 0.99, step: 0.01, value: 0 });
    const smoothLbl = el("span", { class: "muted" }, "0");
    const csv = downloadLink("#", "curves CSV");
    const list = el("div", { class: "runlist", id: "curve-runs" }, el("strong", {}, "runs"),
      ...runs.map(r => el("label", {}, el("input", { type: "checkbox", value: r.id, checked: state.selected.has(r.id),
        onchange: e => { e.target.checked ? state.selected.add(r.id) : state.selected.delete(r.id); saveSelection(); load(); } }), " ", r.id)));
    const plots = el("div", { class: "plots", style: "flex:1" }, ...PANELS.map(([k]) => el("div", { class: "plot", id: `plot-${k}` })));
    root.append(el("div", { class: "toolbar" }, el("label", {}, "x: ", xSel), el("label", {}, logx, " log x"), el("label", {}, logy, " log y"), el("label", {}, fam, " with branches"),
      el("label", {}, "smoothing ", smooth, " ", smoothLbl), csv), el("div", { class: "side" }, list, plots));
    let data = [];
    const draw = () => {
      const x = xSel.value, a = Number(smooth.value);
      smoothLbl.textContent = a.toFixed(2);
      const st = styles(data);
      for (const [k, title] of PANELS) {
        const traces = data.map(r => {
          const keep = r.series[k].map((y, i) => y != null && r.series[x][i] != null);
          let xs = r.series[x].filter((_, i) => keep[i]), ys = r.series[k].filter((_, i) => keep[i]);
          const s = st[r.id], j = s.family && r.join && r.join[k];
          if (j && j[x] != null && j[k] != null) { xs = [j[x], ...xs]; ys = [j[k], ...ys]; }  // drawn from its branch point
          return { type: "scatter", mode: k === "val_loss" ? "lines+markers" : "lines", x: xs, y: k === "lr" ? ys : ema(ys, a),
            name: s.role === "branch" ? `${r.id} (from step ${r.branch_step})` : r.id, legendgroup: s.family || r.id,
            line: { color: s.color, width: s.width }, marker: { color: s.color }, meta: { run: r.id, role: s.role, family: s.family } };
        });
        const fams = [...new Set(data.map(r => st[r.id].family).filter(Boolean))];
        for (const fam of fams) {
          const pts = data.filter(r => st[r.id].family === fam && r.join && r.join[k] && r.join[k][x] != null && r.join[k][k] != null);
          if (!pts.length) continue;
          traces.push({ type: "scatter", mode: "markers", x: pts.map(r => r.join[k][x]), y: pts.map(r => r.join[k][k]), name: `${fam}: branch points`,
            legendgroup: fam, showlegend: false, hovertext: pts.map(r => `${r.id} branches at step ${r.branch_step}`), hoverinfo: "text+x+y",
            marker: { symbol: "diamond", size: 9, color: st[fam] ? st[fam].color : "#000", line: { color: "#fff", width: 1 } },
            meta: { role: "branch_points", family: fam } });
        }
        plot(`plot-${k}`, traces, { title: { text: `${title} vs ${x}` }, margin: { t: 40, r: 10 }, showlegend: true, legend: { font: { size: 10 } },
          xaxis: { title: { text: x }, type: logx.checked ? "log" : "linear" }, yaxis: { title: { text: title }, type: logy.checked ? "log" : "linear" } }, `${k}-vs-${x}`);
      }
    };
    const load = async () => {
      const sel = [...state.selected].slice(0, 50);
      const q = sel.map(s => "run=" + encodeURIComponent(s)).join("&");
      csv.href = "/api/curves.csv?" + q;
      data = sel.length ? (await getJSON("/api/curves?" + q + (fam.checked ? "&branches=1" : ""))).runs : [];
      const added = data.filter(r => !r.requested).length;
      setStatus(`${data.length} runs plotted` + (added ? ` (${added} of the selected runs' families)` : ""));
      draw();
    };
    for (const c of [xSel, logx, logy]) c.addEventListener("change", draw);
    fam.addEventListener("change", () => { localStorage.setItem("scalelab.branches", fam.checked ? "1" : "0"); load(); });
    smooth.addEventListener("input", draw);
    await load();
    const live = id => { const r = runs.find(x => x.id === id); return r && r.status !== "done" && r.status !== "failed"; };
    timer = setInterval(() => { if ([...state.selected].some(live) || data.some(r => live(r.id))) load(); }, 5000);
  },
  stop() { clearInterval(timer); },
};
