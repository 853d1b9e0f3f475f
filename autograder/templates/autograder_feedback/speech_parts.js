// A feedback page that travels alone (released through nbgrader's exchange, which hands a student
// the page and nothing beside it) carries MathJax's accessibility parts inside it, inert until
// asked for: each part is a <script type="text/plain" data-mathjax-part="a11y/sre"> and each speech
// rule map a <script type="application/json" data-mathjax-locale="en">. MathJax's loader and the
// speech rule engine ask for them by name when a reader turns speech on in MathJax's menu; these
// hooks answer from the page instead of the network (which the page may not reach: it is
// viewed offline, or sandboxed with nothing to load). Parts stay inert until then so that a page
// read without speech costs what it did before.
(function (config) {
    config.loader = config.loader || {};
    config.loader.require = function (url) {
        var name = (String(url).match(/(a11y\/[\w-]+|input\/mml)\.js$/) || [])[1];
        var part = name && document.querySelector('script[data-mathjax-part="' + name + '"]');
        if (!part) {
            return Promise.reject(new Error("this page does not carry " + url));
        }
        // Later, as a script from the network would arrive: run at once, a part would land in
        // the middle of the menu's start-up and MathJax would typeset the page twice over.
        return new Promise(function (resolve) {
            setTimeout(function () {
                var script = document.createElement("script");
                script.textContent = part.textContent;
                document.head.appendChild(script);  // an inline script runs as it is inserted
                ran(name);
                resolve();
            }, 0);
        });
    };
    // The speech rule engine takes its features from the global SREfeature at every set-up; MathJax's
    // a11y/sre part, as it runs, points SREfeature.custom (how a locale's maps are fetched) at the
    // network, so the page's own loader takes that place right after the part has run.
    function speechRules(locale) {
        var map = document.querySelector('script[data-mathjax-locale="' + locale + '"]');
        return map ? Promise.resolve(map.textContent)
                   : Promise.reject(new Error("this page has no speech rules for " + locale));
    }
    function ran(name) {
        if (name === "a11y/sre") {
            window.SREfeature.custom = speechRules;
        }
    }
})(window.MathJax);
