// dsh web: copy buttons and live updates. The pages read fine without it.
"use strict";

function copyButtons() {
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", async () => {
      const label = button.dataset.label || button.textContent;
      button.dataset.label = label;
      try {
        await navigator.clipboard.writeText(button.dataset.copy);
        button.textContent = "Copied";
        // Stays once the clipboard holds it (the label goes back after a moment).
        button.classList.add("copied");
      } catch (error) {
        button.textContent = "Copy failed";
      }
      setTimeout(() => { button.textContent = label; }, 1500);
    });
  }
}

function every(ms, poll) {
  let busy = false;
  setInterval(async () => {
    if (busy || document.hidden) return;
    busy = true;
    try { await poll(); } catch (error) { /* the next round tries again */ } finally { busy = false; }
  }, ms);
}

function followSession(ms) {
  const list = document.getElementById("messages");
  if (!list || !list.dataset.after) return;
  every(ms, async () => {
    const url = list.dataset.after + "?position=" + encodeURIComponent(list.dataset.position);
    const answer = await fetch(url, { credentials: "same-origin" });
    if (!answer.ok) return;
    const news = await answer.json();
    if (!news.html.trim()) return;
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    list.insertAdjacentHTML("beforeend", news.html);
    list.dataset.position = String(news.position);
    if (atBottom) window.scrollTo(0, document.body.scrollHeight);
  });
}

function followList(ms) {
  const rows = document.getElementById("rows");
  if (!rows || !rows.dataset.poll) return;
  let last = null;
  every(ms, async () => {
    const answer = await fetch(rows.dataset.poll, { credentials: "same-origin" });
    if (!answer.ok) return;
    const html = await answer.text();
    if (html !== last) rows.innerHTML = html;
    last = html;
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const ms = Number(document.body.dataset.liveMs) || 1000;
  copyButtons();
  followSession(ms);
  followList(ms);
});
