// anylaunch ui: live refresh, the log stream, confirmed actions. No framework, no build.
"use strict";

const actionToken = () => document.querySelector('meta[name="anylaunch-action"]').content;

// Elements with data-refresh are re-fetched while data-live="1"; data-pick names the
// element to take from the response (a whole page), else the response is the element.
function refreshLoop(el) {
  const every = Number(el.dataset.every || 2000);
  const tick = async () => {
    if (el.dataset.live !== "1" || !document.body.contains(el)) return;
    try {
      const response = await fetch(el.dataset.refresh, { headers: { accept: "text/html" } });
      if (response.ok) {
        const text = await response.text();
        const fresh = el.dataset.pick
          ? new DOMParser().parseFromString(text, "text/html").querySelector(el.dataset.pick)
          : null;
        if (fresh) {
          el.replaceWith(fresh);
          wire(fresh);
          refreshLoop(fresh);
          return;
        }
        if (!el.dataset.pick) {
          const holder = document.createElement("div");
          holder.innerHTML = text;
          const first = holder.firstElementChild;
          if (first && first.id === el.id) {
            el.replaceWith(first);
            wire(first);
            refreshLoop(first);
            return;
          }
          el.innerHTML = text;
          if (el.id === "curve" && text.trim()) el.closest("section").hidden = false;
        }
      }
    } catch (err) { /* the server may be restarting: try again next tick */ }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

// Buttons with data-action POST to it after the user confirms data-confirm.
function wire(root) {
  root.querySelectorAll("button[data-action]").forEach((button) => {
    button.addEventListener("click", async () => {
      if (!window.confirm(button.dataset.confirm)) return;
      button.disabled = true;
      try {
        const response = await fetch(button.dataset.action, {
          method: "POST",
          headers: { "x-anylaunch-action": actionToken() },
        });
        const body = await response.json().catch(() => ({}));
        if (!response.ok) {
          window.alert((body.error && body.error.message) || `failed: HTTP ${response.status}`);
          button.disabled = false;
          return;
        }
        window.location.reload();
      } catch (err) {
        window.alert(`failed: ${err}`);
        button.disabled = false;
      }
    });
  });
}

// The job page's logs: one event stream for every node; tabs filter by node.
function followLogs(section) {
  const log = section.querySelector("#log");
  const status = section.querySelector("#log-status");
  const head = document.querySelector("#job");
  const badge = document.querySelector("#state");
  const startedLive = head && head.dataset.live === "1";
  const nodes = new Set();
  const show = (node) => {
    log.dataset.show = node;
    for (const line of log.children) line.hidden = node !== "all" && line.dataset.node !== node;
    section.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("on", b.dataset.node === node));
  };
  section.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => show(b.dataset.node)));
  const source = new EventSource(section.dataset.stream);
  source.addEventListener("lines", (event) => {
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
    const fragment = document.createDocumentFragment();
    for (const item of JSON.parse(event.data)) {
      nodes.add(item.node);
      const line = document.createElement("div");
      line.dataset.node = String(item.node);
      const tag = document.createElement("span");
      tag.className = "node";
      tag.textContent = `[node ${item.node}] `;
      line.append(tag, document.createTextNode(item.text));
      line.hidden = log.dataset.show !== "all" && log.dataset.show !== line.dataset.node;
      fragment.append(line);
    }
    log.append(fragment);
    if (atBottom) log.scrollTop = log.scrollHeight;
  });
  source.addEventListener("state", (event) => {
    const state = JSON.parse(event.data).state;
    if (badge) { badge.textContent = state; badge.className = `badge st-${state}`; }
  });
  source.addEventListener("end", () => {
    source.close();
    if (status) status.textContent = "complete";
    // A job that ended while watched: reload once for its diagnosis and final facts.
    if (startedLive) setTimeout(() => window.location.reload(), 500);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  wire(document);
  document.querySelectorAll("[data-refresh]").forEach(refreshLoop);
  const logs = document.querySelector("#logs[data-stream]");
  if (logs) followLogs(logs);
  const filters = document.querySelector("#filters");
  if (filters) filters.querySelectorAll("select").forEach((s) => s.addEventListener("change", () => filters.submit()));
});
