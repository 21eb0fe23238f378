/* Live pages (the dashboard's own, no dependencies): every 1.5 s this page fetches itself again
   and replaces each element marked data-live (by id) whose content changed. It pauses while a
   form is being filled — a field has focus, a field was typed into, a row is selected — and
   while the tab is hidden, so nothing a person is writing or choosing is ever replaced. */
(function () {
  "use strict";
  var PERIOD = 1500;
  var dirty = false;
  var busy = false;

  function regions(doc) {
    return Array.prototype.slice.call(doc.querySelectorAll("[data-live][id]"));
  }

  function filling() {
    var a = document.activeElement;
    if (a && a.closest && a.closest("form") && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(a.tagName)) {
      return true;
    }
    if (dirty) return true;
    return document.querySelector("form input[type=checkbox]:checked") !== null;
  }

  function say(key) {
    var status = document.getElementById("live-status");
    if (!status) return;
    var text = status.getAttribute("data-text-" + key);
    if (text && status.textContent !== text) status.textContent = text;
    status.setAttribute("data-state", key);
  }

  function swap(fresh) {
    var doc = new DOMParser().parseFromString(fresh, "text/html");
    regions(document).forEach(function (old) {
      var next = doc.getElementById(old.id);
      if (!next || next.innerHTML === old.innerHTML) return;
      var open = [];
      old.querySelectorAll("details").forEach(function (d, i) { if (d.open) open.push(i); });
      old.innerHTML = next.innerHTML;
      var details = old.querySelectorAll("details");
      open.forEach(function (i) { if (details[i]) details[i].open = true; });
    });
  }

  function tick() {
    if (busy || document.hidden || regions(document).length === 0) return;
    if (filling()) { say("paused"); return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Jobtrail-Live": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text !== null && !filling()) { swap(text); say("live"); }
      })
      .catch(function () { say("offline"); })
      .then(function () { busy = false; });
  }

  document.addEventListener("input", function (e) {
    var t = e.target;
    if (t && t.type !== "checkbox" && t.closest && t.closest("form")) dirty = true;
  });
  document.addEventListener("submit", function () { dirty = false; });
  document.addEventListener("reset", function () { dirty = false; });
  window.setInterval(tick, PERIOD);
})();
