// Plan view: `scalelab plan` over a range of compute budgets from a chinchilla fit: predicted loss (with
// its interval) against cost on a device, and the Pareto curve of cost vs loss. The inputs carry
// scalelab plan's flag names and defaults (device: none, precision bf16, num-devices 1, mfu auto).
import { el, fmt, getJSON, plot, downloadLink, sortableTable, setStatus } from "../ui.js";

const INPUTS = [  // [flag name, label, attributes]
  ["device", "device", { tag: "select" }], ["precision", "precision", { tag: "select" }],
  ["num-devices", "num devices", { type: "number", min: 1, step: 1, placeholder: "1", size: 5 }],
  ["mfu", "MFU", { type: "text", placeholder: "auto", size: 6 }],
  ["usd-per-device-hour", "$/device-hour", { type: "number", min: 0, step: "any", placeholder: "none", size: 7 }],
  ["ci", "interval", { type: "number", min: 0.5, max: 0.99, step: 0.01, value: 0.95, size: 5 }],
  ["from", "budgets from (FLOPs)", { type: "text", placeholder: "largest fitted C", size: 9 }],
  ["to", "to", { type: "text", placeholder: "1000x from", size: 9 }],
  ["points", "points", { type: "number", min: 2, max: 40, value: 13, size: 4 }],
];
const COLS = [
  { key: "compute", label: "C (FLOPs)" },
  { key: "verdict", label: "verdict", text: true, render: r => r.verdict == null ? "" : el("span", { class: r.identified ? "muted verdict" : "error verdict", title: [...(r.verdict_reasons || []), ...(r.verdict_warnings || [])].join("\n") }, r.identified ? r.verdict : "✗ " + r.verdict) },
  { key: "N_opt", label: "N_opt [interval]", render: r => r.N_opt == null ? "" : fmt(r.N_opt) + (r.N_opt_lo != null ? ` [${fmt(r.N_opt_lo)}, ${fmt(r.N_opt_hi)}]` : "") },
  { key: "model", label: "model", text: true }, { key: "N", label: "N" }, { key: "tokens", label: "D (tokens)" },
  { key: "loss", label: "predicted loss", render: r => r.loss == null ? "—" : fmt(r.loss) + (r.loss_lo != null ? ` [${fmt(r.loss_lo)}, ${fmt(r.loss_hi)}]` : "") },
  { key: "device_hours", label: "device-hours", render: r => r.device_hours == null ? "" : fmt(r.device_hours) + (r.device_hours_lo != null ? ` [${fmt(r.device_hours_lo)}, ${fmt(r.device_hours_hi)}]` : "") },
  { key: "days", label: "days" },
  { key: "usd", label: "USD", render: r => r.usd == null ? "" : fmt(r.usd) + (r.usd_lo != null ? ` [${fmt(r.usd_lo)}, ${fmt(r.usd_hi)}]` : "") },
  { key: "mfu", label: "MFU", render: r => r.mfu == null ? "" : el("span", { title: [r.mfu_source, r.layout].filter(Boolean).join("\n") }, fmt(r.mfu)) },
  { key: "tokens_per_s", label: "tokens/s needed" }, { key: "pareto", label: "Pareto", render: r => r.pareto ? "✓" : "" },
];

// The budgets the law cannot answer for (scaling.planning.verdict), first, with the reasons and the
// warnings that explain them grouped once (they repeat from budget to budget).
function verdictSummary(rows) {
  const bad = (rows || []).filter(r => r.identified === false);
  if (!bad.length) return rows?.length ? el("p", { class: "muted", id: "plan-verdict" }, `verdict: identified at all ${rows.length} budgets`) : "";
  const why = [...new Set(bad.flatMap(r => [...r.verdict_reasons.map(x => x.replace(/\[[^\]]*\]|[\d.e+]+x/g, "…")), ...r.verdict_warnings]))];
  return el("div", { class: "error flag", id: "plan-verdict" },
    el("strong", {}, `not identified at ${bad.length} of ${rows.length} budgets`), ` (from C = ${fmt(Math.min(...bad.map(r => r.compute)))}): the law cannot answer there; \`scalelab study next\` proposes the runs that would let it.`,
    el("ul", {}, why.map(w => el("li", {}, w))));
}

export default {
  async render(root, params) {
    const fitSel = el("select", { id: "plan-fit", name: "fit" });
    const ctl = {};
    for (const [name, , a] of INPUTS) {
      const { tag, ...attrs } = a;
      ctl[name] = el(tag || "input", { id: "plan-" + name, name, ...attrs });
    }
    const xSel = el("select", { id: "plan-x", name: "x" });
    const csv = downloadLink("#", "plan CSV");
    const info = el("div", { id: "plan-info" }), plots = el("div", { class: "plots", id: "plan-plots" }), table = el("div", { class: "tablewrap", id: "plan-table-wrap" });
    root.append(el("div", { class: "toolbar" }, el("label", {}, "chinchilla fit: ", fitSel), ...INPUTS.map(([name, label]) => el("label", {}, label + ": ", ctl[name])),
      el("label", {}, "cost axis: ", xSel), csv), info, plots, el("h3", {}, "Plans per budget"), table);
    let first = true;
    const query = () => {
      const q = new URLSearchParams();
      if (fitSel.value) q.set("fit", fitSel.value);
      for (const [name] of INPUTS) if (ctl[name].value !== "") q.set(name, ctl[name].value);
      const x = xSel.value, dev = ctl.device.value, usd = ctl["usd-per-device-hour"].value;
      if (x && (x === "compute" || (dev && (x !== "usd" || usd)))) q.set("x", x);  // a cost axis the inputs can price
      return q;
    };
    const show = async () => {
      const q = first ? new URLSearchParams(params) : query();
      let d, err = null;
      try { d = await getJSON("/api/plan?" + q); } catch (e) {
        if (!first) throw e;
        err = e;  // bad #plan?... parameters: fill the controls (showing them) from a plain request, then say why
        d = await getJSON("/api/plan?points=2" + (params.get("fit") ? "&fit=" + encodeURIComponent(params.get("fit")) : ""));
      }
      if (first) {  // fill the controls from the server's lists and the page's #plan?... parameters
        fitSel.replaceChildren(...d.fits.map(f => el("option", { value: f.id }, `${f.id}${f.approach ? " (approach " + f.approach + ")" : ""}${f.not_identified ? " — not identified" : ""}`)));
        ctl.device.replaceChildren(el("option", { value: "" }, "none (compute only)"), ...d.devices.map(v => el("option", { value: v }, v)));
        ctl.precision.replaceChildren(...d.precisions.map(v => el("option", { value: v }, v)));
        ctl.precision.value = "bf16";
        for (const [name] of INPUTS) if (params.get(name) != null) ctl[name].value = params.get(name);
        first = false;
        if (err) throw err;
      }
      if (d.fit) fitSel.value = d.fit;
      xSel.replaceChildren(...Object.entries(d.cost_axes || {}).filter(([k]) => k === "compute" || (ctl.device.value && (k !== "usd" || ctl["usd-per-device-hour"].value)))
        .map(([k, t]) => el("option", { value: k }, t)));
      if (d.x) xSel.value = d.x;
      csv.href = "/api/plan.csv?" + query();
      const a = d.assumptions, flags = d.not_identified || [];
      info.replaceChildren(
        !d.fits.length ? el("p", { id: "no-plan-fits" }, "No chinchilla fit record under --fits (scalelab fit chinchilla runs/SWEEP --approach 3 --bootstrap 200 --out fits/ch.json).") : "",
        flags.length ? el("div", { class: "error flag", id: "plan-flag" }, el("strong", {}, "not identified: "), flags.join("; "),
          el("p", {}, "A law that is not identified cannot plan: nothing is drawn.")) : "",
        a ? el("p", { id: "plan-assumptions" }, `${a.device} × ${a.num_devices}, ${a.precision} dense peak ${fmt(a.peak_flops / 1e12)} TFLOP/s (${a.peak_source}); ` +
          (d.rows.some(r => r.mfu != null && r.mfu !== a.mfu) ? "MFU per budget (the table's MFU column), first " : "") +
          `MFU ${fmt(a.mfu)}${a.mfu_interval ? ` [${fmt(a.mfu_interval[0])}, ${fmt(a.mfu_interval[1])}]` : ""} (${a.mfu_source}); ` +
          (a.usd_per_device_hour ? `$${a.usd_per_device_hour}/device-hour` : "no price (usd-per-device-hour)")) :
          el("p", { class: "muted", id: "plan-assumptions" }, "No device: budgets in FLOPs only (pick a device to price them, as scalelab plan --device does)."),
        el("p", { class: "muted" }, `compute in the fit's convention (${d.conventions ?? "?"}); every row is what \`scalelab plan FIT --compute C\` prints with these inputs`),
        verdictSummary(d.rows),
        d.warnings?.length ? el("details", { id: "plan-warnings" }, el("summary", { class: "error" }, `other warnings of the plans (${d.warnings.length})`),
          el("ul", {}, d.warnings.map(w => el("li", {}, w)))) : "");
      plots.replaceChildren(...d.figures.map(f => el("div", { class: "plot", id: "plan-" + f.id })));
      for (const f of d.figures) plot("plan-" + f.id, f.data, f.layout, `${(d.fit || "plan").replace(/\.json$/, "")}-${f.id}`);
      table.replaceChildren(sortableTable(COLS, d.rows, { id: "plan-table", sortKey: "compute" }));
      setStatus(`${d.rows.length} budgets planned`);
    };
    const redraw = () => show().catch(e => info.replaceChildren(el("p", { class: "error", id: "plan-error" }, e.message)));
    for (const c of [fitSel, xSel, ...Object.values(ctl)]) c.addEventListener("change", redraw);
    await show();
  },
};
