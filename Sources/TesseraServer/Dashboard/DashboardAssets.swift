/// The dashboard served at `/`: plain HTML, CSS and JavaScript compiled into the binary (no CDN,
/// no resource bundle to install beside it). It reads `/api/tasks` and `/api/groups`, follows
/// `/events` (server-sent events) and acts through aria2's JSON-RPC with the secret. On a fleet's
/// worker it shows which worker runs each task and the workers' health (`workers` events).
public enum DashboardAssets {
    /// `/`.
    public static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Tessera</title>
    <link rel="stylesheet" href="dashboard.css">
    <script src="dashboard.js" defer></script>
    </head>
    <body>
    <header>
      <h1>Tessera</h1>
      <p id="summary" aria-live="polite">Connecting…</p>
    </header>
    <main>
      <form id="add-form" aria-label="Add a download">
        <label for="add-input">URL, manifest or PLUGIN:KEY</label>
        <input id="add-input" name="uri" type="text" required placeholder="https://example.com/video.mpd" autocomplete="off">
        <button type="submit">Add</button>
      </form>
      <form id="secret-form" aria-label="Secret">
        <label for="secret-input">RPC secret</label>
        <input id="secret-input" type="password" autocomplete="current-password" placeholder="--rpc-secret">
        <button type="submit">Use</button>
      </form>
      <p id="message" role="status" aria-live="polite"></p>
      <table id="downloads">
        <caption>Downloads</caption>
        <thead>
          <tr><th scope="col">Title</th><th scope="col">Plugin</th><th scope="col">State</th><th scope="col">Progress</th>
          <th scope="col">Speed</th><th scope="col">ETA</th><th scope="col" class="worker">Worker</th><th scope="col">Files</th>
          <th scope="col">Actions</th></tr>
        </thead>
        <tbody id="rows"><tr><td colspan="9" class="empty">No downloads yet.</td></tr></tbody>
      </table>
      <table id="workers" class="worker">
        <caption>Workers of the fleet</caption>
        <thead>
          <tr><th scope="col">Worker</th><th scope="col">Host</th><th scope="col">PID</th><th scope="col">Last heartbeat</th>
          <th scope="col">Tasks held</th><th scope="col">Health</th></tr>
        </thead>
        <tbody id="worker-rows"></tbody>
      </table>
    </main>
    </body>
    </html>
    """#

    /// `/dashboard.css`.
    public static let css = #"""
    :root { color-scheme: light dark; --accent: #2f6fdb; --ok: #2e8b57; --bad: #c0392b; font-family: system-ui, sans-serif; }
    body { margin: 0 auto; max-width: 72rem; padding: 1rem; }
    header { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap; }
    h1 { margin: 0; font-size: 1.5rem; }
    #summary { margin: 0; opacity: .8; }
    form { display: flex; gap: .5rem; align-items: center; margin: .75rem 0; flex-wrap: wrap; }
    form label { font-weight: 600; }
    #add-input { flex: 1; min-width: 16rem; padding: .4rem; }
    button { padding: .35rem .7rem; cursor: pointer; }
    table { width: 100%; border-collapse: collapse; font-size: .9rem; }
    caption { text-align: left; font-weight: 600; padding: .5rem 0; }
    th, td { text-align: left; padding: .35rem .4rem; border-bottom: 1px solid #8884; vertical-align: top; }
    tr.group { font-weight: 600; background: #8881; }
    tr.child td:first-child { padding-left: 1.5rem; }
    progress { width: 8rem; height: .9rem; accent-color: var(--accent); }
    .state-completed, .state-complete { color: var(--ok); }
    .state-failed, .state-invalid { color: var(--bad); }
    .files { font-family: ui-monospace, monospace; font-size: .8rem; overflow-wrap: anywhere; white-space: pre-line; min-width: 12rem; }
    td:first-child { max-width: 20rem; overflow-wrap: anywhere; }
    .empty { text-align: center; opacity: .7; }
    #message:empty { display: none; }
    body:not(.fleet) .worker { display: none; }
    #workers { margin-top: 1.5rem; }
    .health-alive { color: var(--ok); }
    .health-late { color: #d68910; }
    .health-dead { color: var(--bad); }
    .health-gone { opacity: .7; }
    #message.error { color: var(--bad); }
    """#

    /// `/dashboard.js`.
    public static let javascript = #"""
    "use strict";
    const tasks = new Map();   // id -> task object (as /api/tasks and /events send them)
    const groups = new Map();  // key -> group object
    let workers = null;        // a fleet's workers (the last workers event), null on a daemon of its own
    let secret = sessionStorage.getItem("tessera-secret") || "";
    let source = null;
    let root = "";  // the download root (aria2's global dir): files are shown relative to it
    let scheduled = false;

    function bytes(n) {
      if (n === undefined || n === null) return "?";
      const units = ["B", "KiB", "MiB", "GiB", "TiB"];
      let i = 0; let v = Number(n);
      while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
      return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
    }
    function eta(s) {
      if (s === undefined || s === null) return "";
      if (s < 60) return s + " s";
      if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
      return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    }
    function say(text, isError) {
      const el = document.getElementById("message");
      el.textContent = text;
      el.className = isError ? "error" : "";
    }
    async function rpc(method, params) {
      const body = { jsonrpc: "2.0", id: Date.now(), method: method, params: secret ? ["token:" + secret, ...params] : params };
      const response = await fetch("jsonrpc", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      const answer = await response.json();
      if (answer.error) throw new Error(answer.error.message);
      return answer.result;
    }
    function authHeaders() { return secret ? { "Authorization": "Bearer " + secret } : {}; }

    function cell(row, text, className) {
      const td = document.createElement("td");
      td.textContent = text;
      if (className) td.className = className;
      row.appendChild(td);
      return td;
    }
    function progressCell(row, done, total, label) {
      const td = document.createElement("td");
      const bar = document.createElement("progress");
      bar.max = total && total > 0 ? total : 1;
      bar.value = total && total > 0 ? Math.min(done, total) : 0;
      if (!total) bar.removeAttribute("value");
      bar.setAttribute("aria-label", "Progress of " + label);
      td.appendChild(bar);
      td.appendChild(document.createTextNode(" " + bytes(done) + (total ? " / " + bytes(total) : "")));
      row.appendChild(td);
    }
    function actions(row, gid, state, label) {
      const td = document.createElement("td");
      const add = (text, method) => {
        const b = document.createElement("button");
        b.type = "button"; b.textContent = text; b.setAttribute("aria-label", text + " " + label);
        b.addEventListener("click", async () => {
          try { await rpc(method, [gid]); say(text + ": " + label); } catch (e) { say(e.message, true); }
        });
        td.appendChild(b);
      };
      if (["downloading", "recording", "resolving", "waiting", "interrupted"].some(s => state.startsWith(s))) add("Pause", "aria2.pause");
      if (state === "paused" || state === "idle") add("Resume", "aria2.unpause");
      if (["completed", "failed", "invalid"].includes(state)) add("Clear", "aria2.removeDownloadResult");
      else add("Remove", "aria2.remove");
      row.appendChild(td);
    }
    function taskRow(t, child) {
      const row = document.createElement("tr");
      row.className = child ? "child" : "task";
      row.dataset.id = t.id;
      row.dataset.state = t.state;
      cell(row, t.title);
      cell(row, t.plugin || "");
      // A live stream being recorded says so (its state is downloading, without a total).
      const shown = t.live && t.live.recording ? "recording" : t.state;
      cell(row, shown, "state-" + shown.replace(/\(.*/, ""));
      progressCell(row, t.bytesDone, t.bytesTotal, t.title);
      cell(row, t.bytesPerSecond > 0 ? bytes(t.bytesPerSecond) + "/s" : "");
      cell(row, eta(t.etaSeconds));
      cell(row, t.worker || "", "worker");
      const files = cell(row, (t.files || []).map(f => root && f.startsWith(root + "/") ? f.slice(root.length + 1) : f).join("\n"), "files");
      files.title = (t.files || []).join("\n");
      actions(row, t.gid, t.state, t.title);
      return row;
    }
    function groupRow(g) {
      const row = document.createElement("tr");
      row.className = "group";
      row.dataset.key = g.key;
      row.dataset.state = g.state;
      cell(row, g.title + " (" + g.childCount + " tasks)");
      cell(row, "group");
      cell(row, g.state, "state-" + g.state);
      progressCell(row, g.bytesDone, g.bytesTotal, g.title);
      cell(row, g.bytesPerSecond > 0 ? bytes(g.bytesPerSecond) + "/s" : "");
      cell(row, eta(g.etaSeconds));
      cell(row, "", "worker");
      cell(row, "");
      const state = g.state === "downloading" ? "downloading" : g.state === "paused" ? "paused" : g.state;
      actions(row, g.gid, state === "completed" ? "completed" : state, g.title);
      return row;
    }
    function render() {
      scheduled = false;
      const body = document.getElementById("rows");
      body.replaceChildren();
      const shown = new Set();
      for (const g of [...groups.values()].sort((a, b) => a.key.localeCompare(b.key))) {
        body.appendChild(groupRow(g));
        for (const t of tasks.values()) if (t.group === g.key) { body.appendChild(taskRow(t, true)); shown.add(t.id); }
      }
      for (const t of tasks.values()) if (!shown.has(t.id)) body.appendChild(taskRow(t, false));
      if (!body.children.length) {
        const row = document.createElement("tr");
        const td = cell(row, "No downloads yet.", "empty"); td.colSpan = 9;
        body.appendChild(row);
      }
      document.body.classList.toggle("fleet", workers !== null);
      const workerRows = document.getElementById("worker-rows");
      workerRows.replaceChildren();
      for (const w of workers || []) {
        const row = document.createElement("tr");
        cell(row, w.name);
        cell(row, w.host);
        cell(row, String(w.pid));
        cell(row, w.health === "gone" ? "" : Number(w.heartbeatSecondsAgo).toFixed(1) + " s ago");
        cell(row, w.tasks + " / " + w.maxTasks);
        cell(row, w.health, "health-" + w.health);
        workerRows.appendChild(row);
      }
      const all = [...tasks.values()];
      const done = all.filter(t => t.state === "completed").length;
      const speed = all.reduce((s, t) => s + (t.bytesPerSecond || 0), 0);
      document.getElementById("summary").textContent = all.length + " tasks, " + done + " completed, " + bytes(speed) + "/s";
    }
    function schedule() { if (!scheduled) { scheduled = true; requestAnimationFrame(render); } }

    function apply(e) {
      switch (e.type) {
        // Each object is the whole task (or group): a field it leaves out (a total, an ETA, a
        // speed no longer known) is gone, not kept from an older one.
        case "task_added": case "task_state": case "task_progress": case "task_merge": case "task":
          tasks.set(e.id, e); break;
        case "task_removed": tasks.delete(e.id); break;
        case "group": groups.set(e.key, e); break;
        case "group_removed": groups.delete(e.key); break;
        case "workers": workers = e.workers || []; break;
        case "notice": say(e.message, false); break;
      }
      schedule();
    }
    function connect() {
      if (source) source.close();
      tasks.clear(); groups.clear(); workers = null;
      const url = "events" + (secret ? "?token=" + encodeURIComponent(secret) : "");
      source = new EventSource(url);
      source.onmessage = (m) => { try { apply(JSON.parse(m.data)); } catch (e) { /* one bad line */ } };
      source.onopen = () => {
        if (document.getElementById("message").className === "error") say("");
        rpc("aria2.getGlobalOption", []).then(o => { root = o.dir || ""; schedule(); }).catch(() => {});
      };
      source.onerror = () => {
        fetch("api/tasks", { headers: authHeaders() }).then(r => {
          if (r.status === 401) { source.close(); say("Give the RPC secret to see and change the downloads.", true); }
        }).catch(() => say("The daemon does not answer; retrying…", true));
      };
      schedule();
    }

    document.addEventListener("DOMContentLoaded", () => {
      document.getElementById("secret-input").value = secret;
      document.getElementById("secret-form").addEventListener("submit", (e) => {
        e.preventDefault();
        secret = document.getElementById("secret-input").value;
        sessionStorage.setItem("tessera-secret", secret);
        connect();
      });
      document.getElementById("add-form").addEventListener("submit", async (e) => {
        e.preventDefault();
        const input = document.getElementById("add-input");
        try {
          const gid = await rpc("aria2.addUri", [[input.value.trim()]]);
          say("Added " + input.value.trim() + " (" + gid + ")");
          input.value = "";
        } catch (err) { say(err.message, true); }
      });
      connect();
    });
    """#
}
