// docket serve: keeps the page's <main> current while the ledger moves, and sends the page's one write (an answer)
// and its one server-side check (verify a receipt). No text from the ledger is ever turned into code here: the
// server escapes every value, and fresh <main>s are parsed as inert HTML.
"use strict";

(function () {
  const csrf = document.querySelector('meta[name="docket-csrf"]').content;
  const live = document.getElementById("live");
  let fetching = false;
  let again = false;
  let lastRefresh = 0;

  function shownPosition() {
    const main = document.querySelector("main");
    return main ? Number(main.dataset.position) : -1;
  }

  async function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const wait = 500 - (Date.now() - lastRefresh);  // at most two fresh pages a second, however fast events come
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      lastRefresh = Date.now();
      const url = new URL(location.href);
      url.searchParams.set("fragment", "main");
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const parsed = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = parsed.querySelector("main");
      const current = document.querySelector("main");
      if (fresh && current && Number(fresh.dataset.position) >= shownPosition()) {
        const open = [...current.querySelectorAll("pre.verified:not([hidden])")].map((el) => [el.parentElement.querySelector("button.verify")?.dataset.run, el.textContent]);
        current.replaceWith(document.adoptNode(fresh));
        for (const [run, said] of open) {
          const button = document.querySelector(`button.verify[data-run="${CSS.escape(run || "")}"]`);
          const out = button && button.parentElement.querySelector("pre.verified");
          if (out) { out.textContent = said; out.hidden = false; }
        }
      }
    } finally {
      fetching = false;
      if (again) { again = false; refresh(); }
    }
  }

  function listen() {
    const events = new EventSource("/events");
    events.addEventListener("open", () => { live.classList.add("on"); live.textContent = "live"; });
    events.addEventListener("error", () => { live.classList.remove("on"); live.textContent = "reconnecting"; });
    events.addEventListener("position", (event) => {
      if (Number(event.data) !== shownPosition()) refresh();
    });
  }

  async function post(url, body) {
    const response = await fetch(url, { method: "POST", credentials: "same-origin", body,
                                        headers: { "X-Docket-CSRF": csrf, Accept: "application/json" } });
    return response.json();
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form.answer");
    if (!form) return;
    event.preventDefault();
    const data = new FormData(form);
    if (event.submitter && event.submitter.name) data.set(event.submitter.name, event.submitter.value);
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    const said = await post(form.action, data);
    const notice = document.getElementById("notice");  // outside <main>: it outlives the refresh below
    notice.className = said.ok ? "answered" : "refused";
    notice.textContent = said.ok
      ? `recorded: ${said.answer !== null ? said.answer : said.decision} (${said.request})`
      : `refused (${said.error}): ${said.message}`;
    notice.hidden = false;
    refresh();
  });

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button.verify");
    if (!button) return;
    const out = button.parentElement.querySelector("pre.verified");
    out.hidden = false;
    out.textContent = "verifying...";
    const said = await post(`/runs/${encodeURIComponent(button.dataset.run)}/verify`, new FormData());
    out.className = said.ok ? "verified ok" : "verified failed";
    out.textContent = said.ok
      ? `ok: run ${said.run_id}, ${said.events_checked} cited events proven in the ledger tree of size ${said.tree_size}; final commit ${said.final_commit}`
      : `not verified (${said.error}): ${said.message}`;
  });

  listen();
})();
