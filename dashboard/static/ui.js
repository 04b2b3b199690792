// Shared state (selected runs) and the small helpers every view uses. Views import this module, never app.js.
export const state = { selected: new Set(JSON.parse(localStorage.getItem("scalelab.selected") || "[]")) };
export function saveSelection() { localStorage.setItem("scalelab.selected", JSON.stringify([...state.selected])); }

export async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
  return body;
}

export function showError(root, err) {
  const p = el("p", { class: "error" }, `Could not load: ${err.message || err}`);
  root.append(p);
}

export function setStatus(text) { document.getElementById("status").textContent = text; }

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, "");
    else if (v !== false && v != null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c != null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

export function fmt(v) {
  if (v == null) return "";
  if (typeof v === "number") {
    if (Number.isInteger(v) && Math.abs(v) < 1e6) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(3) : v.toPrecision(4).replace(/\.?0+$/, "");
  }
  return String(v);
}

// A sortable table: columns [{key, label, text?, render?}], rows [obj]. Click a header to sort.
export function sortableTable(columns, rows, opts = {}) {
  const table = el("table", { class: "data", id: opts.id || null });
  let sortKey = opts.sortKey || null, dir = opts.sortDir || 1;
  const tbody = el("tbody");
  const ths = columns.map(c => el("th", { class: c.text ? "text" : null, "data-key": c.key, title: c.title || null,
    onclick: () => { dir = sortKey === c.key ? -dir : 1; sortKey = c.key; draw(); } }, c.label ?? c.key));
  table.append(el("thead", {}, el("tr", {}, ths)), tbody);
  function value(r, c) { return c.sortValue ? c.sortValue(r) : r[c.key]; }
  function draw() {
    const col = columns.find(c => c.key === sortKey);
    const sorted = col ? [...rows].sort((a, b) => {
      const x = value(a, col), y = value(b, col);
      if (x == null && y == null) return 0; if (x == null) return 1; if (y == null) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true })) * dir;
    }) : rows;
    ths.forEach(th => { th.classList.toggle("sorted-asc", th.dataset.key === sortKey && dir > 0); th.classList.toggle("sorted-desc", th.dataset.key === sortKey && dir < 0); });
    tbody.replaceChildren(...sorted.map(r => {
      const tr = el("tr", { "data-id": r.id ?? null });
      for (const c of columns) {
        const td = el("td", { class: c.text ? "text" : null, "data-key": c.key });
        const out = c.render ? c.render(r) : fmt(r[c.key]);
        if (out instanceof Node) td.append(out); else td.textContent = out ?? "";
        tr.append(td);
      }
      return tr;
    }));
  }
  draw();
  table.setRows = (r) => { rows = r; draw(); };
  return table;
}

// Plotly with PNG/SVG export in the mode bar (toImage); one call for every view.
export function plot(div, data, layout = {}, name = "plot") {
  const config = { responsive: true, displaylogo: false, toImageButtonOptions: { format: "png", filename: name },
    modeBarButtonsToAdd: [{ name: "Download as SVG", icon: Plotly.Icons.disk,
      click: gd => Plotly.downloadImage(gd, { format: "svg", filename: name }) }] };
  return Plotly.react(div, data, { autosize: true, ...layout }, config);
}

export function downloadLink(href, label = "CSV") { return el("a", { href, download: "", class: "csv" }, `↓ ${label}`); }

export function problemsBox(problems, title = "Problems") {
  if (!problems || !problems.length) return el("div", { id: "problems" });
  return el("div", { class: "problems", id: "problems" }, el("strong", {}, `${title} (${problems.length})`),
    el("ul", {}, problems.map(p => el("li", { "data-id": p.id }, `${p.id}: ${p.problem}`))));
}
