// Scaling view: pick a fit record; its parameters with intervals, warnings, and the server-built figures.
// A fit the server flags as not identified shows the flag and its table; its law is not drawn.
// Task-loss and accuracy records: one task at a time, chained with a record of the other step.
import { el, fmt, getJSON, plot, downloadLink, problemsBox, setStatus } from "../ui.js";

// The compare block of a --by chinchilla record: each value's compute multiplier over the baseline, at each compute level.
function compareTable(cmp, by) {
  const iv = v => v ? `[${v[0] == null ? "?" : fmt(v[0])}, ${v[1] == null ? "∞" : fmt(v[1])}]` : "";
  const rows = [];
  for (const [name, o] of Object.entries(cmp.others || {})) {
    if (!o.levels) { rows.push(el("tr", { "data-group": name }, el("td", { class: "text" }, name), el("td", { colspan: 4, class: "text" }, o.note || "no multiplier"))); continue; }
    for (const lv of o.levels) rows.push(el("tr", { "data-group": name },
      el("td", { class: "text" }, name), el("td", {}, fmt(lv.C)), el("td", {}, fmt(lv.loss)),
      el("td", {}, lv.compute_multiplier == null ? "—" : fmt(lv.compute_multiplier)), el("td", {}, iv(lv.interval)), el("td", { class: "text" }, lv.where)));
    if (o.note) rows.push(el("tr", {}, el("td", {}), el("td", { colspan: 5, class: "text muted" }, o.note)));
  }
  return el("div", { id: "fit-compare" },
    el("p", { class: "muted" }, `compute multiplier over ${cmp.baseline} (${by}): ${cmp.definition}. Intervals: ${cmp.interval_method}.`),
    el("table", { class: "data" }, el("thead", {}, el("tr", {}, ...["other", "C", "loss", "multiplier", "interval", "at"].map(h => el("th", {}, h)))), el("tbody", {}, rows)));
}

export default {
  async render(root, params) {
    const { fits, problems } = await getJSON("/api/fits");
    const sel = el("select", { id: "fit-select" }, ...fits.map(f => el("option", { value: f.id },
      `${f.id} — ${f.law}${f.approach ? " (approach " + f.approach + ")" : ""}${f.by ? " per " + f.by : ""}, ${f.n_points ?? "?"} points` +
      (f.not_identified ? " — not identified" : ""))));
    const csv = downloadLink("#", "parameters CSV");
    // a record of several tasks (fit task-loss / fit accuracy) is shown one task at a time, chained with a partner record
    const taskSel = el("select", { id: "fit-task" }), partnerSel = el("select", { id: "fit-partner" });
    const taskLbl = el("label", { hidden: true }, "task: ", taskSel), partnerLbl = el("label", { hidden: true }, "chained with: ", partnerSel);
    // a --by record (one law per value of a key, e.g. optim.name) is shown one value at a time, with its comparison table
    const groupSel = el("select", { id: "fit-group" }), groupLbl = el("label", { hidden: true }, el("span", { id: "fit-by" }), " = ", groupSel);
    const info = el("div", { id: "fit-info" }), plots = el("div", { class: "plots", id: "scaling-plots" });
    root.append(el("div", { class: "toolbar" }, el("label", {}, "fit record: ", sel), groupLbl, taskLbl, partnerLbl, csv), info, plots, problemsBox(problems, "Unreadable fit records"));
    if (!fits.length) { info.append(el("p", { id: "no-fits" }, "No fit records (write one with `scalelab fit chinchilla runs/SWEEP --out fits/NAME.json`).")); return; }
    if (params.get("fit") && fits.some(f => f.id === params.get("fit"))) sel.value = params.get("fit");
    let want = { task: params.get("task"), with: params.get("with"), group: params.get("group") };
    const show = async () => {
      const q = new URLSearchParams({ id: sel.value });
      for (const [k, v] of Object.entries(want)) if (v != null && v !== "") q.set(k, v);
      const d = await getJSON("/api/fit?" + q);
      taskLbl.hidden = !d.tasks; partnerLbl.hidden = !d.partners; groupLbl.hidden = !d.groups;
      if (d.groups) { groupLbl.querySelector("#fit-by").textContent = d.by; groupSel.replaceChildren(...d.groups.map(g => el("option", { value: g }, g))); groupSel.value = d.group; }
      if (d.tasks) { taskSel.replaceChildren(...d.tasks.map(t => el("option", { value: t }, t))); taskSel.value = d.task; }
      if (d.partners) {
        partnerSel.replaceChildren(el("option", { value: "none" }, "none"), ...d.partners.map(p => el("option", { value: p }, p)));
        partnerSel.value = d.partner ?? "none";
      }
      csv.href = "/api/fit.csv?id=" + encodeURIComponent(sel.value);
      const rec = d.record, iv = rec.intervals || {}, flags = d.not_identified || [];
      const flagged = k => flags.some(f => f.startsWith(k + " ") || f.startsWith(k + "'s "));
      const prow = Object.entries(rec.params || {}).filter(([, v]) => v == null || typeof v === "number").map(([k, v]) =>
        el("tr", { class: flagged(k) ? "flagged" : null, "data-param": k }, el("td", {}, k), el("td", {}, v == null ? (flagged(k) ? "not identified" : "—") : fmt(v)),
          el("td", {}, iv[k] && iv[k][0] != null ? `[${fmt(iv[k][0])}, ${fmt(iv[k][1])}]` : "")));
      const flagBox = flags.length ? el("div", { class: "error flag", id: "fit-flag" },
        el("strong", {}, "not identified: "), flags.join("; "),
        el("p", {}, "The fitted law is not drawn (no curves, extrapolation or bands); the table shows its parameters as fitted.")) : null;
      info.replaceChildren(flagBox ?? "",
        el("table", { class: "data params", id: "fit-params" }, el("thead", {}, el("tr", {}, el("th", { class: "text" }, "param"), el("th", {}, "value"), el("th", {}, "interval"))), el("tbody", {}, prow)),
        el("p", { class: "muted" }, `${rec.law}${rec.approach ? " approach " + rec.approach : ""}${rec.task ? " · task " + rec.task : ""} · ${rec.n_points} points${rec.n_kind ? " · N = " + rec.n_kind : ""} · objective ${fmt(rec.objective)}` +
          (d.points_note ? ` · data points not shown: ${d.points_note}` : ` · ${d.n_data_points} data points`)),
        d.compare ? compareTable(d.compare, d.by) : "",
        ...(rec.warnings || []).map(w => el("p", { class: "error" }, "warning: " + w)),
        d.partner ? el("p", { class: "muted", id: "fit-partner-note" }, `chained with ${d.partner} (${d.partner_law})` +
          (d.partner_not_identified?.length ? ` — its law is not identified for this task: ${d.partner_not_identified.join("; ")}` : "") +
          (d.partner_points_note ? ` · its data points not shown: ${d.partner_points_note}` : "")) : "");
      plots.replaceChildren(...d.figures.map(f => el("div", { class: "plot", id: "scaling-" + f.id })));
      for (const f of d.figures) plot("scaling-" + f.id, f.data, f.layout, f.id);
      setStatus(`${fits.length} fit records`);
    };
    const redraw = () => show().catch(e => info.replaceChildren(el("p", { class: "error" }, e.message)));
    sel.addEventListener("change", () => { want = {}; redraw(); });
    groupSel.addEventListener("change", () => { want = { group: groupSel.value }; redraw(); });
    taskSel.addEventListener("change", () => { want = { task: taskSel.value, with: partnerSel.value }; redraw(); });
    partnerSel.addEventListener("change", () => { want = { task: taskSel.value, with: partnerSel.value }; redraw(); });
    await show();
  },
};
