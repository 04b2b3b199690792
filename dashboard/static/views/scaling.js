// Scaling view: pick a fit record; its parameters with intervals, warnings, and the server-built figures.
// A fit the server flags as not identified shows the flag and its table; its law is not drawn.
// Task-loss and accuracy records: one task at a time, chained with a record of the other step.
import { el, fmt, getJSON, plot, downloadLink, problemsBox, setStatus } from "../app.js";

export default {
  async render(root, params) {
    const { fits, problems } = await getJSON("/api/fits");
    const sel = el("select", { id: "fit-select" }, ...fits.map(f => el("option", { value: f.id },
      `${f.id} — ${f.law}${f.approach ? " (approach " + f.approach + ")" : ""}, ${f.n_points ?? "?"} points` +
      (f.not_identified ? " — not identified" : ""))));
    const csv = downloadLink("#", "parameters CSV");
    // a record of several tasks (fit task-loss / fit accuracy) is shown one task at a time, chained with a partner record
    const taskSel = el("select", { id: "fit-task" }), partnerSel = el("select", { id: "fit-partner" });
    const taskLbl = el("label", { hidden: true }, "task: ", taskSel), partnerLbl = el("label", { hidden: true }, "chained with: ", partnerSel);
    const info = el("div", { id: "fit-info" }), plots = el("div", { class: "plots", id: "scaling-plots" });
    root.append(el("div", { class: "toolbar" }, el("label", {}, "fit record: ", sel), taskLbl, partnerLbl, csv), info, plots, problemsBox(problems, "Unreadable fit records"));
    if (!fits.length) { info.append(el("p", { id: "no-fits" }, "No fit records (write one with `scalelab fit chinchilla runs/SWEEP --out fits/NAME.json`).")); return; }
    if (params.get("fit") && fits.some(f => f.id === params.get("fit"))) sel.value = params.get("fit");
    let want = { task: params.get("task"), with: params.get("with") };
    const show = async () => {
      const q = new URLSearchParams({ id: sel.value });
      for (const [k, v] of Object.entries(want)) if (v != null && v !== "") q.set(k, v);
      const d = await getJSON("/api/fit?" + q);
      taskLbl.hidden = !d.tasks; partnerLbl.hidden = !d.partners;
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
    taskSel.addEventListener("change", () => { want = { task: taskSel.value, with: partnerSel.value }; redraw(); });
    partnerSel.addEventListener("change", () => { want = { task: taskSel.value, with: partnerSel.value }; redraw(); });
    await show();
  },
};
