// margin site: the pages read without this script; it adds column sorting and opens the
// evidence a link or the address points at. No network, no dependency.
"use strict";

function sortValue(body, key, numeric) {
  const raw = body.getAttribute("data-sort-" + key.replace(/_/g, "-"));
  if (raw === null || raw === "") return null;
  return numeric ? Number(raw) : raw;
}

function sortTable(table, th) {
  const key = th.dataset.key;
  const numeric = th.dataset.numeric === "true";
  const now = th.getAttribute("aria-sort");
  const dir = now === "ascending" ? "descending" : now === "descending" ? "ascending" : th.dataset.first;
  const sign = dir === "ascending" ? 1 : -1;
  const bodies = Array.from(table.tBodies);
  bodies.sort((a, b) => {
    const x = sortValue(a, key, numeric), y = sortValue(b, key, numeric);
    if (x === null || y === null) return (x === null) - (y === null);  // missing values last, either way
    const order = numeric ? x - y : x.localeCompare(y);
    return order !== 0 ? sign * order : Number(a.dataset.sortRank) - Number(b.dataset.sortRank);
  });
  bodies.forEach((b) => table.appendChild(b));
  table.querySelectorAll("thead th[data-key]").forEach((h) => h.removeAttribute("aria-sort"));
  th.setAttribute("aria-sort", dir);
  const status = document.getElementById("sort-status");
  if (status) status.textContent = "Sorted by " + th.querySelector(".col-title").textContent + ", " + dir + ".";
}

function makeSortable(table) {
  table.querySelectorAll("thead th[data-key]").forEach((th) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    while (th.firstChild) button.appendChild(th.firstChild);
    th.appendChild(button);
    button.addEventListener("click", () => sortTable(table, th));
  });
}

function openTarget(id) {
  const target = id && document.getElementById(id);
  if (target && target.tagName === "DETAILS") {
    target.open = true;
    return target;
  }
  return null;
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("table.sortable").forEach(makeSortable);
  document.querySelectorAll("a[data-opens]").forEach((a) => {
    a.addEventListener("click", () => openTarget(a.dataset.opens));
  });
  openTarget(decodeURIComponent(location.hash.slice(1)));
  window.addEventListener("hashchange", () => openTarget(decodeURIComponent(location.hash.slice(1))));
});
