// The course page's few scripts (it works without them): times in the reader's own time zone, and,
// while a submission waits for its feedback, the page's submissions refreshed every 10 s, the news
// said in the status region (a screen reader hears it; the focus stays where it is).
"use strict";
(() => {
  const local = root => {
    const format = new Intl.DateTimeFormat(undefined, {dateStyle: "full", timeStyle: "long"});
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    for (const t of root.querySelectorAll("time[datetime]")) {
      const d = new Date(t.dateTime);
      if (!isNaN(d)) { t.textContent = format.format(d); t.title = `${zone} time`; }
    }
    for (const note of root.querySelectorAll(".with-script")) note.hidden = false;  // true only with this script
  };
  local(document);
  const waiting = () => document.querySelectorAll(".submissions[data-waiting]");
  let rounds = 0;
  const refresh = async () => {
    if (!waiting().length || ++rounds > 180) return;  // at most 30 minutes
    try {
      // the _xsrf cookie as a header, as JupyterLab's own requests: on a hub, a request that is not
      // a page's navigation is refused its log-in cookie without it (and answered the log-in page)
      const xsrf = (document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/) || [])[1];
      const reply = await fetch(window.location.pathname, {
        credentials: "same-origin", cache: "no-store", redirect: "error",
        headers: xsrf ? {"X-XSRFToken": decodeURIComponent(xsrf)} : {}});
      if (reply.ok) {
        const fresh = new DOMParser().parseFromString(await reply.text(), "text/html");
        for (const old of waiting()) {
          const now = fresh.getElementById(old.id);
          if (!now || now.innerHTML === old.innerHTML) continue;
          local(now);
          old.replaceWith(now);
          const ready = now.querySelector(".feedback-link");
          const title = now.closest("section").querySelector("h2").textContent;
          if (ready) document.getElementById("updates").textContent = `${title}: ${ready.textContent} is ready.`;
        }
      }
    } catch (error) { /* offline a moment: the next round tries again */ }
    setTimeout(refresh, 10000);
  };
  setTimeout(refresh, 10000);
})();
