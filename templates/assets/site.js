/* The catalog's one small script: copy buttons, index filters kept in the URL, the search over
   every family (Pagefind's own interface, fetched when the box is first used), and the recipe
   command builder (a lookup into commands composed in Python, the chosen speculative depth put
   into its one slot; it never composes). Every page
   reads fully without it. */
(function () {
  "use strict";

  /* ---- glossary terms: the page writes a definition at a term's first use; every later use gets it ---- */
  var definitions = {};
  Array.prototype.forEach.call(document.querySelectorAll("abbr.term[title]"), function (abbr) {
    definitions[abbr.textContent] = definitions[abbr.textContent] || abbr.title;
  });
  Array.prototype.forEach.call(document.querySelectorAll("abbr.term:not([title])"), function (abbr) {
    if (definitions[abbr.textContent]) { abbr.title = definitions[abbr.textContent]; }
  });

  /* ---- copy buttons ---- */
  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(function () { return true; },
        function () { return fallbackCopy(text); });
    }
    return Promise.resolve(fallbackCopy(text));
  }
  /* Controls that only work with a script are hidden in the HTML and shown here, so a page read
     without JavaScript shows none that would do nothing. */
  Array.prototype.forEach.call(
    document.querySelectorAll("button.copy, [data-filter-controls], [data-builder-controls]"),
    function (control) { control.hidden = false; });
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy") : null;
    if (!button) { return; }
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) { return; }
    var label = button.textContent;
    copyText(target.textContent).then(function (ok) {
      button.textContent = ok ? "Copied" : "Select and copy";
      button.classList.toggle("copied", ok);
      window.setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 1500);
    });
  });

  /* ---- index: filters and sorting, state in the URL hash ---- */
  /* Real families and synthetic ones are two lists: each filtered alike, each sorted in itself, so a
     demo is never ranked with real models. A page that holds only some of the families (data-paged: a
     catalog of more than a page) filters in place only within the listing it belongs to: a choice of
     card or quantization goes to that filter's own pages, which list every family it matches (the
     narrowest chosen, by data-families); the pager keeps the choice, and the count says when it is
     this page's alone. */
  var lists = Array.prototype.slice.call(document.querySelectorAll("[data-family-list]"));
  var form = document.querySelector("[data-filters]");
  if (lists.length && form) {
    var cards = lists.reduce(function (all, list) { return all.concat(Array.prototype.slice.call(list.children)); }, []);
    var selects = Array.prototype.slice.call(form.querySelectorAll("select"));
    var counter = document.querySelector("[data-count]");
    var listed = counter ? counter.textContent : "";  /* the listing's own count, as the page was made */
    var paged = form.hasAttribute("data-paged");
    var answers = Array.prototype.slice.call(document.querySelectorAll("[data-answer-hw]"));
    var answersSection = document.querySelector("#answers");
    var empty = document.querySelector("[data-empty]");
    var sorters = {
      speed: function (a, b) { return speed(b) - speed(a) || byName(a, b); },
      name: byName,
      newest: function (a, b) { return (b.dataset.newest || "").localeCompare(a.dataset.newest || "") || byName(a, b); }
    };
    function speed(card) {
      var v = parseFloat(card.dataset.matchSpeed !== undefined ? card.dataset.matchSpeed : card.dataset.speed);
      return isNaN(v) ? -1 : v;
    }
    /* Filters on results (card, quantization, method) pick, per family, the best matching result
       (precomputed in Python for every combination) or say that none matches. */
    var resultFilters = (form.dataset.resultFilters || "").split(" ");
    var pickSeparator = form.dataset.pickSeparator || "|";
    var anyResult = resultFilters.map(function () { return ""; }).join(pickSeparator);
    function pickKey() {
      return resultFilters.map(function (name) { return form.elements[name] ? form.elements[name].value : ""; }).join(pickSeparator);
    }
    function chosenWords() {
      return resultFilters.filter(function (name) { return form.elements[name] && form.elements[name].value; })
        .map(function (name) { var s = form.elements[name]; return s.options[s.selectedIndex].text; }).join(" + ");
    }
    function showPick(card, key) {
      var picks = {};
      try { picks = JSON.parse(card.dataset.picks || "{}"); } catch (e) { picks = {}; }
      var which = key === anyResult ? "default" : (Object.prototype.hasOwnProperty.call(picks, key) ? String(picks[key]) : "none");
      var shown = null;
      Array.prototype.forEach.call(card.querySelectorAll("[data-pick]"), function (el) {
        el.hidden = el.getAttribute("data-pick") !== which;
        if (!el.hidden) { shown = el; }
      });
      if (which === "none") {
        var detail = card.querySelector("[data-none-detail]");
        if (detail) { detail.textContent = chosenWords(); }
        card.dataset.matchSpeed = "-1";
      } else if (which === "default") {
        delete card.dataset.matchSpeed;
      } else {
        card.dataset.matchSpeed = shown ? shown.getAttribute("data-speed") : "-1";
      }
      card.classList.toggle("no-match", which === "none");
      return which !== "none";
    }
    function byName(a, b) { return (a.dataset.name || "").localeCompare(b.dataset.name || ""); }
    function readParams() {
      var raw = window.location.hash.replace(/^#/, "") || window.location.search.replace(/^\?/, "");
      return new URLSearchParams(raw);
    }
    /* A pre-rendered filter page (filter/<name>/<value>/) has its choice selected in the markup:
       with nothing in the URL, that choice stands. */
    function preset(select) {
      var chosen = Array.prototype.filter.call(select.options, function (o) { return o.defaultSelected; });
      return chosen.length ? chosen[0].value : "";
    }
    function apply(params) {
      selects.forEach(function (select) {
        var wanted = params.has(select.name) ? params.get(select.name) : preset(select);
        var known = Array.prototype.some.call(select.options, function (o) { return o.value === wanted; });
        select.value = known ? wanted : select.options[0].value;
      });
      var shown = 0;
      var matching = 0;
      var key = pickKey();
      cards.forEach(function (card) {
        var visible = selects.every(function (select) {
          if (select.name === "sort" || !select.value) { return true; }
          return (card.dataset[select.name] || "").split(" ").indexOf(select.value) !== -1;
        });
        card.hidden = !visible;
        var matched = showPick(card, key);
        if (visible) { shown += 1; if (matched) { matching += 1; } }
      });
      var sort = sorters[form.elements.sort.value] || sorters.speed;
      lists.forEach(function (list) {
        Array.prototype.slice.call(list.children).sort(sort).forEach(function (card) { list.appendChild(card); });
      });
      /* a card's answer is its fastest result whatever the quantization or method: with either chosen it
         would answer another question, so it goes (builder/views/index.py `_filtered` says the same) */
      var narrower = ["quant", "spec"].some(function (name) { return form.elements[name] && form.elements[name].value; });
      answers.forEach(function (answer) {
        var hw = form.elements.hw ? form.elements.hw.value : "";
        answer.hidden = narrower || (Boolean(hw) && answer.getAttribute("data-answer-hw") !== hw);
      });
      if (answersSection) { answersSection.hidden = answers.every(function (answer) { return answer.hidden; }); }
      /* as the page was made: its own filter, fastest first (another order sorts this page's families only) */
      var asMade = selects.every(function (select) {
        return select.value === (select.name === "sort" ? select.options[0].value : preset(select));
      });
      if (counter && paged && asMade) {
        counter.textContent = listed;
      } else if (counter) {
        /* a paged catalog's page holds some families: which ones, said */
        var pageWords = form.getAttribute("data-page-words");
        var these = !paged ? "" : pageWords ? " on this page (" + pageWords + ")" : " matching " + form.getAttribute("data-listing-words");
        counter.textContent = shown + " of " + (paged ? "the " : "") + cards.length + " families" + these +
          (key === "||" ? "" : " · " + matching + " with a matching result");
      }
      if (empty) { empty.hidden = shown !== 0; }
    }
    function currentParams() {
      var params = new URLSearchParams();
      selects.forEach(function (select) {
        if (select.value && !(select.name === "sort" && select.value === "speed")) { params.set(select.name, select.value); }
      });
      return params;
    }
    /* The listing that holds every family a choice can match: the chosen card's or quantization's
       listing that has the fewest, else the index's. */
    function narrowest() {
      var found = { key: "", name: "", href: form.getAttribute("action"), families: Infinity };
      selects.forEach(function (select) {
        var option = select.options[select.selectedIndex];
        if (!select.value || !option || !option.hasAttribute("data-href")) { return; }
        var families = parseInt(option.getAttribute("data-families"), 10);
        if (families < found.families) {
          found = { key: select.name + "=" + select.value, name: select.name, href: option.getAttribute("data-href"), families: families };
        }
      });
      return found;
    }
    /* Where the current choice is shown whole: `href` null for this page (on a paged catalog, the
       narrowest listing; else, from a pre-rendered filter page, the index), and the rest of the
       choice, for the hash. */
    function destination() {
      var params = currentParams();
      var href = form.getAttribute("data-home");
      if (paged) {
        var listing = narrowest();
        params.delete(listing.name);
        href = listing.key === form.getAttribute("data-listing") ? null : listing.href;
      }
      return { href: href, hash: params.toString() };
    }
    form.addEventListener("change", function () {
      var there = destination();
      if (there.href) {
        window.location.href = there.href + (there.hash ? "#" + there.hash : "");
        return;
      }
      try {
        window.history.replaceState(null, "", window.location.pathname + (there.hash ? "#" + there.hash : ""));
      } catch (e) {
        window.location.hash = there.hash;
      }
      apply(new URLSearchParams(there.hash));
    });
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    Array.prototype.forEach.call(document.querySelectorAll("nav.pager a"), function (link) {
      link.addEventListener("click", function () {  /* the next page of the listing, with the same choice */
        link.href = link.getAttribute("href").split("#")[0] + window.location.hash;
      });
    });
    /* a link to a choice this page would show only in part goes where it is shown whole */
    function follow() {
      apply(readParams());
      var there = paged ? destination() : { href: null };
      if (there.href) { window.location.replace(there.href + (there.hash ? "#" + there.hash : "")); }
    }
    window.addEventListener("hashchange", follow);
    follow();
  }

  /* ---- recipe: command builder, its state in the URL hash ---- */
  var builder = document.querySelector("[data-builder]");
  var blob = document.getElementById("recipe-commands");
  if (builder && blob) {
    var data = JSON.parse(blob.textContent);
    var shell = document.querySelector("#builder-shell code");
    var docker = document.querySelector("#builder-docker code");
    var dockerBlock = builder.querySelector("[data-docker-block]");
    var note = builder.querySelector("[data-builder-note]");
    var link = builder.querySelector("[data-builder-link]");
    var hardwareSelect = builder.querySelector("select[name=hardware]");
    var tpSelect = builder.querySelector("select[name=tp]");
    var depthSelect = builder.querySelector("select[name=depth]");
    var boxes = Array.prototype.slice.call(builder.querySelectorAll("input[name=feature]"));
    /* A command is the indices of its shared pieces, its lines (builder/views/recipe.py); a command
       with a speculative depth holds data.depth_slot where the chosen num_speculative_tokens goes
       (Python composed it; this only joins the lines and fills the slot). */
    var text = function (ids, depth) {
      var joined = ids.map(function (i) { return data.pieces[i]; }).join("\n");
      return depth === null ? joined : joined.split(data.depth_slot).join(depth);
    };
    var known = function (select, value) {
      return select && Array.prototype.some.call(select.options, function (o) { return o.value === value; });
    };
    var state = function () {
      var variant = builder.querySelector("input[name=variant]:checked");
      var params = new URLSearchParams();
      params.set("variant", variant ? variant.value : "");
      params.set("hw", hardwareSelect.value);
      params.set("features", boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; }).join(","));
      if (tpSelect) { params.set("tp", tpSelect.value); }
      if (depthSelect) { params.set("depth", depthSelect.value); }
      return params;
    };
    var restore = function () {
      var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
      if (!params.has("variant")) { return; }
      Array.prototype.forEach.call(builder.querySelectorAll("input[name=variant]"), function (r) { r.checked = r.value === params.get("variant"); });
      if (known(hardwareSelect, params.get("hw"))) { hardwareSelect.value = params.get("hw"); }
      var on = (params.get("features") || "").split(",");
      boxes.forEach(function (b) { b.checked = on.indexOf(b.value) !== -1; });
      if (known(tpSelect, params.get("tp"))) { tpSelect.value = params.get("tp"); }
      if (known(depthSelect, params.get("depth"))) { depthSelect.value = params.get("depth"); }
    };
    var update = function (remember) {
      var params = state();
      var on = {};
      boxes.forEach(function (box) { on[box.value] = box.checked; });
      var bits = data.features.map(function (name) { return on[name] ? "1" : "0"; }).join("");
      var entry = data.commands[params.get("variant") + "|" + params.get("hw") + "|" + bits + "|" + (params.get("tp") || "1")];
      if (depthSelect) { depthSelect.disabled = !(entry && entry[2]); }
      if (remember) {
        try { window.history.replaceState(null, "", window.location.pathname + window.location.search + "#" + params.toString()); }
        catch (e) { window.location.hash = params.toString(); }
      }
      if (link) { link.href = "#" + params.toString(); }
      note.hidden = Boolean(entry);
      if (!entry) {
        note.textContent = "This feature combination is not precomputed for this recipe; turn one toggle at a time from the defaults.";
        return;
      }
      var depth = depthSelect ? depthSelect.value : "";
      shell.textContent = text(entry[0], entry[2] ? depth : null);
      dockerBlock.hidden = !entry[1];
      docker.textContent = entry[1] ? text(entry[1], entry[2] ? depth : null) : "";
    };
    builder.addEventListener("change", function () { update(true); });
    window.addEventListener("hashchange", function () { restore(); update(false); });
    restore();
    update(false);
  }

  /* ---- the search over every family: Pagefind's interface, fetched when the box is first used;
     it reads its index with fetch(), which a page opened from disk may not do, so it is shown only
     where the site is served ---- */
  var search = document.querySelector("[data-search]");
  if (search && location.protocol !== "file:") {
    var bundle = search.getAttribute("data-bundle");
    var input = search.querySelector("[data-search-input]");
    var results = search.querySelector("[data-search-results]");
    var loading = null;
    var open = function () {
      if (loading) { return loading; }
      loading = new Promise(function (resolve, reject) {
        var styles = document.createElement("link");
        styles.rel = "stylesheet";
        styles.href = bundle + "pagefind-ui.css";
        document.head.appendChild(styles);
        var script = document.createElement("script");
        script.src = bundle + "pagefind-ui.js";
        script.onload = function () {
          /* global PagefindUI */
          /* results link from the site's root as this page's address has it: under any prefix */
          var root = new URL(search.getAttribute("data-base") || ".", location.href).pathname;
          resolve(new PagefindUI({ element: results, bundlePath: new URL(bundle, location.href).pathname, baseUrl: root,
                                   showSubResults: false, showImages: false, autofocus: true }));
        };
        script.onerror = function () { loading = null; reject(new Error("could not load " + script.src)); };
        document.head.appendChild(script);
      });
      return loading;
    };
    input.addEventListener("focus", function () {
      open().then(function (ui) {
        input.hidden = true;
        search.querySelector("label").hidden = true;
        if (input.value) { ui.triggerSearch(input.value); }
      }, function () { input.disabled = true; });
    });
    search.hidden = false;
  }

  /* ---- recipe: energy cost per million tokens from a price the reader enters (never sent) ---- */
  var cost = document.querySelector("[data-energy-cost]");
  var price = cost && cost.querySelector("[data-price]");
  if (price) {
    var outputs = cost.querySelectorAll("[data-cost]");
    var showCost = function () {
      var perKwh = parseFloat(price.value);
      Array.prototype.forEach.call(outputs, function (out) {
        if (!(perKwh >= 0)) { out.textContent = "enter a price"; return; }
        /* J/token x 1e6 tokens / 3.6e6 J per kWh x price */
        var dollars = parseFloat(out.getAttribute("data-j")) * perKwh / 3.6;
        out.textContent = "$" + (dollars >= 1 ? dollars.toFixed(2) : dollars.toPrecision(3));
      });
    };
    price.addEventListener("input", showCost);
    showCost();
  }
})();
