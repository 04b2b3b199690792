// Profile view: per run, where the log steps' time goes (data wait, forward+backward, optimizer,
// the rest; DeepSpeed's communication as a line inside them) and the peak memory per log window.
import { el, getJSON, plot, setStatus } from "../ui.js";

export default {
  async render(root, params) {
    const { runs } = await getJSON("/api/runs");
    if (!runs.length) { root.append(el("p", { id: "no-profile" }, "No runs under this runs root.")); return; }
    const sel = el("select", { id: "profile-run" }, ...runs.map(r => el("option", { value: r.id }, r.id)));
    if (params.get("run")) sel.value = params.get("run");
    const info = el("p", { class: "muted", id: "profile-info" }), plots = el("div", { class: "plots", id: "profile-plots" });
    root.append(el("div", { class: "toolbar" }, el("label", {}, "run: ", sel)), info, plots);
    const show = async () => {
      const d = await getJSON("/api/profile?run=" + encodeURIComponent(sel.value));
      info.textContent = `status ${d.row.status ?? "?"} · times are seconds of one logged step (max over ranks); ` +
        "communication happens inside forward+backward and the optimizer";
      plots.replaceChildren(...d.figures.map(f => el("div", { class: "plot", id: "profile-" + f.id })));
      if (!d.figures.length) plots.append(el("p", { id: "profile-none" }, "This run logged no time/* or mem/* metrics."));
      for (const f of d.figures) plot("profile-" + f.id, f.data, f.layout, `${sel.value.replace(/\//g, "_")}-${f.id}`);
      setStatus(`${runs.length} runs`);
    };
    sel.addEventListener("change", show);
    await show();
  },
};
