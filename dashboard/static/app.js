// Tab routing (#view?query): which view draws into the page. Helpers and shared state live in ui.js.
import runs from "./views/runs.js";
import curves from "./views/curves.js";
import evals from "./views/evals.js";
import scaling from "./views/scaling.js";
import moe from "./views/moe.js";
import plan from "./views/plan.js";
import profile from "./views/profile.js";
import { showError } from "./ui.js";

const VIEWS = { runs, curves, evals, scaling, moe, plan, profile };

let current = null;
function route() {
  const [name, query] = (location.hash.slice(1) || "runs").split("?");
  const view = VIEWS[name] || runs;
  if (current && current.stop) current.stop();
  document.querySelectorAll("#tabs a").forEach(a => a.classList.toggle("active", a.dataset.view === name));
  const root = document.getElementById("view");
  root.replaceChildren();
  current = view;
  Promise.resolve(view.render(root, new URLSearchParams(query || ""))).catch(err => showError(root, err));
}
window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);

