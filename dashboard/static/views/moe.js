// MoE view: per-router health of one MoE run — expert load heatmap per layer, imbalance, dropped tokens.
import { el, getJSON, plot, setStatus } from "../app.js";

export default {
  async render(root, params) {
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
      info.textContent = `router ${d.row.router ?? "?"} · ${d.row.num_experts} experts · top-${d.row.top_k ?? "?"} · status ${d.row.status}`;
      plots.replaceChildren(...d.figures.map(f => el("div", { class: "plot", id: "moe-" + f.id })));
      if (!d.figures.length) plots.append(el("p", {}, "This run logged no moe/* metrics yet."));
      for (const f of d.figures) plot("moe-" + f.id, f.data, f.layout, `${sel.value.replace(/\//g, "_")}-${f.id}`);
      setStatus(`${moe.length} MoE runs`);
    };
    sel.addEventListener("change", show);
    await show();
  },
};
