// The students' JupyterLab: once nbgrader's Assignments tab has fetched an assignment, the file
// browser shows its folder at once. nbgrader's fetch writes the folder on the server, outside
// JupyterLab's contents API, so the file browser would learn of it only at its next poll (every
// 10 s, not a setting). When the tab lists the fetched assignment (it redraws that list from the
// fetch's reply), this asks the file browser to look again.
//
// Written by hand, not built: a JupyterLab prebuilt extension is a module-federation container
// (`init` and `get` on window._JUPYTERLAB[name], what JupyterLab's loader calls), and this one needs
// no shared module (it runs a command by its name), so it needs no bundler and no npm at install.
(function () {
  "use strict";
  const plugin = {
    id: "autograd-fetched:plugin",
    description: "Refreshes the file browser when the Assignments tab has fetched an assignment.",
    autoStart: true,
    activate(app) {
      let pending = null;
      const refresh = () => {  // one refresh for the whole redraw
        clearTimeout(pending);
        pending = setTimeout(() => app.commands.execute("filebrowser:refresh").catch(() => null), 50);
      };
      const inFetchedList = node => node.nodeType === Node.ELEMENT_NODE
        && (node.id === "fetched_assignments_list" || node.closest("#fetched_assignments_list") !== null);
      new MutationObserver(records => {
        if (records.some(record => inFetchedList(record.target))) refresh();
      }).observe(document.body, {childList: true, subtree: true});
    }
  };
  const scope = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  scope["autograd-fetched"] = {
    init: () => Promise.resolve(),
    get: module => module === "./extension"
      ? Promise.resolve(() => ({__esModule: true, default: plugin}))
      : Promise.reject(new Error(`autograd-fetched has no module ${module}`))
  };
})();
