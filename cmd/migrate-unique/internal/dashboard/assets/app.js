// The groups page refreshes its table from /api/groups every few seconds,
// without reloading, and not while the operator types in the filter.
// Every value is set as text (textContent), never as HTML.
"use strict";
(function () {
  var table = document.getElementById("groups");
  var state = document.getElementById("refresh-state");
  if (!table || !state) return;
  var every = parseInt(state.getAttribute("data-refresh-ms"), 10) || 5000;
  var filter = document.getElementById("filter");
  var lastKey = 0;
  filter.addEventListener("input", function () { lastKey = Date.now(); });
  filter.addEventListener("keydown", function () { lastKey = Date.now(); });
  function typing() {
    var a = document.activeElement;
    return (a && filter.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT")) || Date.now() - lastKey < 2000;
  }
  var columns = ["limit", "source", "queued", "running", "active", "held", "expired", "over", "rescheduled", "pressure"];
  function text(v) { return v === null || v === undefined ? "?" : String(v); }
  function cells(r) {
    var source = r.limit_source + (r.reason ? ": " + r.reason : "");
    return [r.limit, source, text(r.queued), text(r.running), text(r.active), text(r.slots_held),
      text(r.slots_expired), text(r.slots_over_limit), text(r.rescheduled), r.pressure];
  }
  function row(r) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-group", r.group);
    var td = document.createElement("td");
    td.className = "group";
    var a = document.createElement("a");
    if (r.url.indexOf("/group?") === 0) a.setAttribute("href", r.url);
    a.textContent = r.group;
    td.appendChild(a);
    tr.appendChild(td);
    var values = cells(r);
    for (var i = 0; i < columns.length; i++) {
      td = document.createElement("td");
      td.className = columns[i];
      td.textContent = values[i];
      tr.appendChild(td);
    }
    return tr;
  }
  function setText(id, v) { var e = document.getElementById(id); if (e) e.textContent = v; }
  var errBox = document.getElementById("refresh-error");
  function refresh() {
    if (typing()) {
      state.textContent = "auto-refresh paused while you type";
      return;
    }
    fetch("/api/groups" + window.location.search, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (resp) {
        return resp.json().then(function (body) { return { ok: resp.ok, status: resp.status, body: body }; });
      })
      .then(function (res) {
        if (!res.ok) throw new Error(res.body && res.body.error ? res.body.error : "HTTP " + res.status);
        var v = res.body;
        var tbody = document.createElement("tbody");
        for (var i = 0; i < v.rows.length; i++) tbody.appendChild(row(v.rows[i]));
        table.replaceChild(tbody, table.tBodies[0]);
        setText("total", v.total);
        setText("page", v.page);
        setText("pages", v.pages);
        var note = document.getElementById("queue-note");
        if (note) {
          note.hidden = !v.queue_note;
          note.textContent = "QUEUED and RUNNING are not counted: " + v.queue_note;
        }
        errBox.hidden = true;
        state.textContent = "read " + v.at.replace(/\.\d+Z$/, "Z");
        state.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function (e) {
        errBox.hidden = false;
        errBox.textContent = "refresh failed: " + e.message;
      });
  }
  window.setInterval(refresh, every);
})();
