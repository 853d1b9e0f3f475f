// The students' JupyterLab: nbgrader's Assignments tab names each assignment by its folder
// (a02_broadcasting) and the course by its id (autograd-course), words the course never taught.
// This names them as the course page does: each assignment by its notebook's first heading
// ("a02 · Tensors and broadcasting-aware gradients"), the course by its name; the tab's own
// handling (fetch, submit, the notebooks' links) keeps the names it holds, only the text shown
// changes. The titles come from the course page's titles.json (the same listing it shows); where
// it is missing (a Jupyter without the course page), the tab stays as nbgrader draws it.
//
// Written by hand, not built, as autograd-fetched is (its header says why that is enough).
(function () {
  "use strict";
  const TAB = "#assignments";  // nbgrader's Assignments tab
  function baseUrl() {
    const data = document.getElementById("jupyter-config-data");
    const base = data ? (JSON.parse(data.textContent).baseUrl || "/") : "/";
    return base.endsWith("/") ? base : base + "/";
  }
  const plugin = {
    id: "autograd-titles:plugin",
    description: "Names assignments by their titles in nbgrader's Assignments tab.",
    autoStart: true,
    activate() {
      let names = null;    // {course_id, course, titles} from the course page
      let asked = -1e9;    // when they were last asked for (ms)
      const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;  // an assignment's name, as nbgrader's Tab shows it
      const ask = () => {  // at most every 30 s: titles change only when the instructor releases
        if (Date.now() - asked < 30000) return;
        asked = Date.now();
        // with the _xsrf cookie as a header, as JupyterLab's own requests: on a hub, a request
        // that is not a page's navigation is refused its log-in cookie without it
        const xsrf = (document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/) || [])[1];
        fetch(baseUrl() + "course/titles.json",
              {credentials: "same-origin", headers: xsrf ? {"X-XSRFToken": decodeURIComponent(xsrf)} : {}})
          .then(reply => reply.ok ? reply.json() : Promise.reject(reply.status))
          .then(found => { names = found; look(); })
          .catch(() => null);  // no course page here: the tab stays as nbgrader draws it
      };
      const rename = tab => {
        for (const item of tab.querySelectorAll(".item_name > a, .item_name > span")) {
          const shown = item.textContent.trim();
          // own keys only: a row reading "constructor" must not pick up Object's
          const title = names && Object.hasOwn(names.titles, shown) ? names.titles[shown] : null;
          if (title) {
            item.textContent = title;  // a title is never a name: the renaming ends here
          } else if (NAME.test(shown) && shown.includes("_")) {
            ask();  // released since the titles were asked for
          }
        }
        if (!names) return;
        const said = "Your assignments in " + names.course + ":";
        const info = tab.querySelector("#assignments_list_info");
        if (info && info.textContent !== said) info.textContent = said;
        for (const course of tab.querySelectorAll(".item_course, #course_list_default, .dropdown-menu a")) {
          if (course.textContent.trim() === names.course_id) course.textContent = names.course;
        }
      };
      const look = () => {
        const tab = document.querySelector(TAB);
        if (!tab) return;
        if (names === null) ask();
        rename(tab);
      };
      let pending = null;
      new MutationObserver(() => {  // one look for the whole redraw
        clearTimeout(pending);
        pending = setTimeout(look, 20);
      }).observe(document.body, {childList: true, subtree: true, characterData: true});
    }
  };
  const scope = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  scope["autograd-titles"] = {
    init: () => Promise.resolve(),
    get: module => module === "./extension"
      ? Promise.resolve(() => ({__esModule: true, default: plugin}))
      : Promise.reject(new Error(`autograd-titles has no module ${module}`))
  };
})();
