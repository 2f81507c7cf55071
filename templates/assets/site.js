/* The catalog's one small script: copy buttons, index filters kept in the URL, and the recipe
   command builder (a lookup into commands composed in Python; it never composes). Every page
   reads fully without it. */
(function () {
  "use strict";

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
  var list = document.querySelector("[data-family-list]");
  var form = document.querySelector("[data-filters]");
  if (list && form) {
    var cards = Array.prototype.slice.call(list.children);
    var selects = Array.prototype.slice.call(form.querySelectorAll("select"));
    var counter = document.querySelector("[data-count]");
    var empty = document.querySelector("[data-empty]");
    var sorters = {
      speed: function (a, b) { return speed(b) - speed(a) || byName(a, b); },
      name: byName,
      newest: function (a, b) { return (b.dataset.newest || "").localeCompare(a.dataset.newest || "") || byName(a, b); }
    };
    function speed(card) { var v = parseFloat(card.dataset.speed); return isNaN(v) ? -1 : v; }
    function byName(a, b) { return (a.dataset.name || "").localeCompare(b.dataset.name || ""); }
    function readParams() {
      var raw = window.location.hash.replace(/^#/, "") || window.location.search.replace(/^\?/, "");
      return new URLSearchParams(raw);
    }
    function apply(params) {
      selects.forEach(function (select) {
        var wanted = params.get(select.name) || "";
        var known = Array.prototype.some.call(select.options, function (o) { return o.value === wanted; });
        select.value = known ? wanted : select.options[0].value;
      });
      var shown = 0;
      cards.forEach(function (card) {
        var visible = selects.every(function (select) {
          if (select.name === "sort" || !select.value) { return true; }
          return (card.dataset[select.name] || "").split(" ").indexOf(select.value) !== -1;
        });
        card.hidden = !visible;
        if (visible) { shown += 1; }
      });
      var sort = sorters[form.elements.sort.value] || sorters.speed;
      cards.slice().sort(sort).forEach(function (card) { list.appendChild(card); });
      if (counter) { counter.textContent = shown + " of " + cards.length + " families"; }
      if (empty) { empty.hidden = shown !== 0; }
    }
    function currentParams() {
      var params = new URLSearchParams();
      selects.forEach(function (select) {
        if (select.value && !(select.name === "sort" && select.value === "speed")) { params.set(select.name, select.value); }
      });
      return params;
    }
    form.addEventListener("change", function () {
      var params = currentParams();
      var hash = params.toString();
      try {
        window.history.replaceState(null, "", window.location.pathname + (hash ? "#" + hash : ""));
      } catch (e) {
        window.location.hash = hash;
      }
      apply(params);
    });
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    window.addEventListener("hashchange", function () { apply(readParams()); });
    apply(readParams());
  }

  /* ---- recipe: command builder ---- */
  var builder = document.querySelector("[data-builder]");
  var blob = document.getElementById("recipe-commands");
  if (builder && blob) {
    var data = JSON.parse(blob.textContent);
    var shell = document.querySelector("#builder-shell code");
    var docker = document.querySelector("#builder-docker code");
    var dockerBlock = builder.querySelector("[data-docker-block]");
    var note = builder.querySelector("[data-builder-note]");
    var update = function () {
      var variant = builder.querySelector("input[name=variant]:checked");
      var hardware = builder.querySelector("select[name=hardware]");
      var on = {};
      Array.prototype.forEach.call(builder.querySelectorAll("input[name=feature]"), function (box) { on[box.value] = box.checked; });
      var bits = data.features.map(function (name) { return on[name] ? "1" : "0"; }).join("");
      var entry = data.commands[(variant ? variant.value : "") + "|" + hardware.value + "|" + bits];
      note.hidden = Boolean(entry);
      if (!entry) {
        note.textContent = "This feature combination is not precomputed for this recipe; turn one toggle at a time from the defaults.";
        return;
      }
      // a command is the indices of its shared pieces (builder/views/recipe.py)
      var join = function (ids, separator) { return ids.map(function (i) { return data.pieces[i]; }).join(separator); };
      shell.textContent = join(entry[0], "\n");
      dockerBlock.hidden = !entry[1];
      docker.textContent = entry[1] ? join(entry[1], " ") : "";
    };
    builder.addEventListener("change", update);
    update();
  }
})();
