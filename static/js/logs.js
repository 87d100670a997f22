/* RLark Console: the Logs tab (terminal/templates/terminal/logs_panel.html).
 *
 * One websocket per panel (ws/terminal/jobs/<job>/logs/). The server sends the last 1000 lines
 * per Pod, then (Live on) only the lines after each Pod's cursor every 5 s. The page keeps the
 * cursors and sends them back when it reconnects, so lines are neither repeated nor skipped.
 * Only the visible rows are in the DOM (fixed row height, virtual scrolling), so 100k lines stay
 * responsive. Server HTML (`h`) is already escaped + ANSI spans; plain lines use textContent.
 */
(function () {
  "use strict";
  if (window.RLarkLogs) { window.RLarkLogs.initAll(); return; }

  const ROW = 18;            // px, must match .log-view .ll height
  const OVERSCAN = 30;
  const MAX_LINES = 200000;
  const PAUSE_SVG = '<svg viewBox="0 0 10 10" width="10" height="10"><rect x="1.5" y="1" width="2.5" height="8"/><rect x="6" y="1" width="2.5" height="8"/></svg>';
  const PLAY_SVG = '<svg viewBox="0 0 10 10" width="10" height="10"><path d="M2.5 1 9 5 2.5 9z"/></svg>';
  const ENDED_STATES = ["Succeeded", "Failed", "Stopped", "Completed"];  // a Worker whose run is over
  const ENDED_SVG = '<svg viewBox="0 0 10 10" width="10" height="10"><rect x="2" y="2" width="6" height="6"/></svg>';  // memory cap of the page; the full log is always downloadable

  function fmt(s, vars) {
    return String(s).replace(/%\((\w+)\)s/g, (_, k) => (vars && k in vars ? vars[k] : ""));
  }
  // A runtime timestamp (RFC 3339) in the page's zone (the one the header names, not the
  // browser's) with its offset, or in UTC (static/js/pagetime.js)
  function stamp(ts, zone) {
    return window.RLarkTime.format(ts, { utc: zone === "utc", ms: true, offset: true });
  }
  function csvField(v) { return '"' + String(v == null ? "" : v).replace(/"/g, '""') + '"'; }

  class LogsPanel {
    constructor(root) {
      this.root = root;
      this.cfg = JSON.parse(root.dataset.config);
      this.s = this.cfg.strings;
      this.el = {};
      root.querySelectorAll("[data-el]").forEach((n) => { this.el[n.dataset.el] = n; });
      this.lines = [];        // {pod, role, n, t, h, ts, sep}
      this.visible = [];      // indices into lines matching the filter
      this.held = [];         // lines received while the view is frozen
      this.pods = {};         // pod -> {id, next, cursor, state, message}
      this.targets = [];
      this.live = true;       // the tab streams when it opens
      this.ended = false;     // the job is over and no Worker can write more (the server says so)
      this.follow = true;     // auto-scroll; off while the user has scrolled up
      this.frozen = false;
      this.filter = "";
      this.retry = 0;
      this.closedFinal = false;
      this.throttled = false;
      this.lastTick = "";
      this.bind();
      this.setLive(true, true);
      this.connect();
    }

    bind() {
      const e = this.el;
      e.role.addEventListener("change", () => { this.fillPods(); this.resubscribe(); });
      e.pod.addEventListener("change", () => { this.fillContainers(); this.resubscribe(); });
      e.container.addEventListener("change", () => this.resubscribe());
      e.previous.addEventListener("change", () => this.resubscribe());
      e.live.addEventListener("click", () => this.setLive(!this.live));
      e.pause.addEventListener("click", () => this.setFrozen(!this.frozen));
      let t = null;
      e.filter.addEventListener("input", () => {
        clearTimeout(t);
        t = setTimeout(() => { this.filter = e.filter.value; this.refilter(); }, 120);
      });
      e.timestamps.addEventListener("change", () => { e.tz.disabled = !e.timestamps.checked; this.render(true); });
      e.tz.addEventListener("change", () => this.render(true));
      e.export.addEventListener("click", () => this.exportView());
      e.view.addEventListener("scroll", () => this.onScroll(), { passive: true });
      e.latest.addEventListener("click", () => this.jumpToLatest());
      e.older.addEventListener("click", () => this.loadOlder());
      window.addEventListener("resize", () => this.render(true));
    }

    // --- selection -------------------------------------------------------------------------
    selectedPods() {
      const role = this.el.role.value, pod = this.el.pod.value;
      if (pod) return [pod];
      return this.targets.filter((t) => !role || t.role === role).map((t) => t.pod);
    }
    roleOf(pod) { const t = this.targets.find((x) => x.pod === pod); return t ? t.role : ""; }
    merged() { return !this.el.pod.value; }

    fillPods() {
      const sel = this.el.pod, cur = sel.value, role = this.el.role.value;
      const opts = [new Option(this.s.allWorkers, "")];
      for (const t of this.targets) {
        if (role && t.role !== role) continue;
        let label = t.pod + (t.restarts ? " · " + fmt(this.s.restarts, { n: t.restarts }) : "");
        // the Worker's state in the Workers tab's word (已完成 / Completed for a finished one); "gone" only for a
        // Pod that vanished while its job still runs
        const state = t.shownPhase || t.phase;
        if (!t.exists && !ENDED_STATES.includes(state)) label += " · " + this.s.gone;
        else if (state && state !== "Running") label += " · " + ((this.s.states || {})[state] || state);
        opts.push(new Option(label, t.pod));
      }
      sel.replaceChildren(...opts);
      sel.value = opts.some((o) => o.value === cur) ? cur : "";
      const t = this.targets.find((x) => x.pod === sel.value);
      this.el.previous.disabled = !(t && t.hasPrevious);
      if (this.el.previous.disabled) this.el.previous.checked = false;
      this.updateDownload();
    }

    // The containers of the selected Worker (main, sidecars, init, ephemeral) when it has more than main
    fillContainers() {
      const sel = this.el.container, cur = sel.value || "main";
      const t = this.targets.find((x) => x.pod === this.el.pod.value);
      const list = (t && t.containers) || [];
      sel.parentElement.hidden = list.length <= 1;
      const opts = list.map((c) => new Option(c.name + (c.kind !== "main" ? " (" + (this.s["kind." + c.kind] || c.kind) + ")" : ""), c.name));
      sel.replaceChildren(...(opts.length ? opts : [new Option("main", "main")]));
      sel.value = list.some((c) => c.name === cur) ? cur : "main";
    }

    updateDownload() {
      const a = this.el.download, pod = this.el.pod.value;
      if (!pod) {
        a.setAttribute("aria-disabled", "true"); a.href = "#"; a.title = this.s.pickWorker; return;
      }
      const q = new URLSearchParams({ pod });
      if (this.el.previous.checked) q.set("previous", "1");
      if (this.el.container.value && this.el.container.value !== "main") q.set("container", this.el.container.value);
      a.href = this.cfg.download + "?" + q.toString();
      a.removeAttribute("aria-disabled"); a.title = "";
    }

    // --- websocket -------------------------------------------------------------------------
    connect() {
      const proto = location.protocol === "https:" ? "wss:" : "ws:";
      const ws = new WebSocket(proto + "//" + location.host + this.cfg.ws);
      this.ws = ws;
      this.status(this.s.connecting);
      this.needSubscribe = true;
      ws.onopen = () => { this.retry = 0; };
      ws.onmessage = (ev) => { try { this.onMessage(JSON.parse(ev.data)); } catch (err) { console.error(err); } };
      ws.onclose = (ev) => this.onClose(ev);
    }

    onClose(ev) {
      if (this.ws && this.ws.readyState !== WebSocket.CLOSED) return;
      const closing = this.closing || {};
      this.closing = null;
      const reason = ev.reason || closing.reason || "";
      const code = closing.code || ev.code;
      if (code === 4401 || code === 4403 || code === 4404) {
        this.closedFinal = true;
        this.status(fmt(this.s.closed, { reason }), "bad");
        this.setLive(false, true);
        return;
      }
      if (!this.root.isConnected) return;
      this.status(this.s.reconnecting + (reason ? " (" + reason + ")" : ""), "warn");
      this.retry = Math.min(this.retry + 1, 6);
      setTimeout(() => this.connect(), 500 * this.retry);
    }

    send(msg) { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg)); }

    subscribe() {
      const pods = this.selectedPods();
      const cursors = {};
      for (const p of pods) if (this.pods[p] && this.pods[p].cursor) cursors[p] = this.pods[p].cursor;
      const container = pods.length === 1 ? this.el.container.value || "main" : "main";
      this.send({ type: "subscribe", pods, previous: this.el.previous.checked, live: this.live, cursors, container });
    }

    resubscribe() {
      const t = this.targets.find((x) => x.pod === this.el.pod.value);
      this.el.previous.disabled = !(t && t.hasPrevious);
      if (this.el.previous.disabled) this.el.previous.checked = false;
      this.updateDownload();
      this.lines = []; this.visible = []; this.held = []; this.pods = {}; this.olderPending = false;
      this.el.view.scrollTop = 0;
      this.follow = true;
      this.render(true);
      this.subscribe();
    }

    setLive(on, quiet) {
      this.live = on;
      this.drawLive();
      if (!quiet) this.send({ type: "live", on });
    }

    // The toggle says what the stream does: Streaming (click pauses), Paused (click resumes), or, once the job has
    // ended and every Worker is gone or finished, Stream ended (the server keeps watching, so a new run streams
    // again; while it watches there is nothing to pause).
    drawLive() {
      const b = this.el.live, on = this.live, ended = this.ended;
      b.setAttribute("aria-pressed", on && !ended ? "true" : "false");
      b.dataset.ended = ended ? "true" : "false";
      b.disabled = ended && on;
      b.title = ended ? this.s.endedTitle : on ? this.s.pauseLive : this.s.resumeLive;
      const icon = document.createElement("span");
      icon.className = "live-icon"; icon.setAttribute("aria-hidden", "true");
      icon.dataset.icon = ended ? "ended" : on ? "pause" : "play"; // the action a click takes
      icon.innerHTML = ended ? ENDED_SVG : on ? PAUSE_SVG : PLAY_SVG; // constant markup, no user data
      const label = document.createElement("span");
      label.dataset.testid = "logs-live-label";
      label.textContent = ended ? this.s.ended : on ? this.s.streaming : this.s.paused;
      b.replaceChildren(icon, label);
    }

    // --- auto-scroll: scrolling up pauses it, "jump to latest" resumes it ----------------------
    onScroll() {
      const bottom = this.atBottom();
      if (bottom !== this.follow) { this.follow = bottom; this.updateLatest(); }
      this.render(false);
    }

    jumpToLatest() {
      this.follow = true;
      this.render(true, true);
      this.updateLatest();
    }

    updateLatest() {
      this.el.latest.hidden = this.follow || !this.visible.length;
    }

    setFrozen(on) {
      this.frozen = on;
      this.el.pause.setAttribute("aria-pressed", on ? "true" : "false");
      if (!on && this.held.length) { const h = this.held; this.held = []; this.append(h); }
      this.updateStatus();
    }

    onMessage(msg) {
      if (msg.type === "targets") {
        this.gotTargets = true;
        this.warnings = msg.warnings || [];
        if (!!msg.ended !== this.ended) { this.ended = !!msg.ended; this.drawLive(); }
        const key = JSON.stringify(msg.targets || []);
        if (key !== this.targetsKey) {
          const before = this.selectedPods().join(",");
          this.targetsKey = key; this.targets = msg.targets || []; this.fillPods(); this.fillContainers();
          // a Worker appeared or went away in the merged view: follow it (cursors keep the others resuming)
          if (!this.needSubscribe && this.selectedPods().join(",") !== before) this.subscribe();
        }
        if (this.needSubscribe) { this.needSubscribe = false; this.subscribe(); }
      } else if (msg.type === "lines") {
        this.onLines(msg);
      } else if (msg.type === "state") {
        if (!this.selectedPods().includes(msg.pod)) return;
        const st = this.pods[msg.pod] || (this.pods[msg.pod] = {});
        st.state = msg.state; st.message = msg.message;
        this.render(true);
      } else if (msg.type === "older") {
        this.onOlder(msg);
      } else if (msg.type === "closing") {
        this.closing = msg; // daphne drops close-frame reasons; the server repeats them here
      } else if (msg.type === "tick") {
        this.lastTick = msg.at;
        this.updateStatus();
      }
    }

    onLines(msg) {
      if (!this.selectedPods().includes(msg.pod)) return; // in flight from before the selection changed
      const st = this.pods[msg.pod] || (this.pods[msg.pod] = {});
      const role = this.roleOf(msg.pod);
      const add = [];
      st.state = null;
      if (msg.reset) {
        if (st.id && st.id !== msg.id) {
          const n = (this.targets.find((x) => x.pod === msg.pod) || {}).restarts || 0;
          add.push({ pod: msg.pod, role, n: -1, t: "── " + fmt(this.s.restarted, { n }) + " ──", sep: true });
        } else if (st.id && msg.rotated) { // never glue the new file to the old one
          add.push({ pod: msg.pod, role, n: -1, t: "── " + this.s.rotated + " ──", sep: true, rot: true });
        }
        st.id = msg.id; st.next = msg.first; st.first = msg.first;
      }
      if (msg.id !== st.id) return; // a frame of an instance we already left
      for (const l of msg.lines) {
        if (l.n < st.next) continue; // never show a line twice
        l.pod = msg.pod; l.role = role;
        add.push(l);
        st.next = l.n + 1;
      }
      st.cursor = msg.cursor;
      this.throttled = !!msg.more;
      if (!add.length) { this.render(true); return; }
      if (this.frozen) { this.held.push(...add); this.updateStatus(); return; }
      this.append(add);
    }

    // --- load older: the page holds the tail; earlier lines come on request --------------------
    olderPod() {
      const pods = this.selectedPods();
      if (pods.length !== 1) return null;
      const st = this.pods[pods[0]];
      return st && st.id && st.first > 0 && this.lines.length < MAX_LINES ? pods[0] : null;
    }

    updateOlder() {
      const pod = this.olderPod(), b = this.el.older;
      b.hidden = !pod || this.olderPending;
      if (pod) b.textContent = fmt(this.s.loadOlder, { n: this.pods[pod].first });
    }

    loadOlder() {
      const pod = this.olderPod();
      if (!pod) return;
      this.olderPending = true; this.updateOlder();
      this.send({ type: "older", pod, before: this.pods[pod].first });
    }

    onOlder(msg) {
      this.olderPending = false;
      const st = this.pods[msg.pod];
      if (!st || msg.id !== st.id || msg.first >= st.first) { this.updateOlder(); return; }
      const role = this.roleOf(msg.pod);
      const add = msg.lines.filter((l) => l.n < st.first);
      for (const l of add) { l.pod = msg.pod; l.role = role; }
      st.first = msg.first;
      const shown = [];
      add.forEach((l, i) => { if (this.matches(l)) shown.push(i); });
      this.lines = add.concat(this.lines);
      this.visible = shown.concat(this.visible.map((i) => i + add.length));
      this.el.spacer.style.height = this.visible.length * ROW + "px"; // grow first, or scrollTop is clamped
      this.el.view.scrollTop += shown.length * ROW; // the line the user was reading stays in place
      this.render(true);
    }

    // --- view ------------------------------------------------------------------------------
    matches(l) { return !this.filter || l.t.toLowerCase().includes(this.filter.toLowerCase()); }

    append(add) {
      const atBottom = this.follow;
      const base = this.lines.length;
      for (let i = 0; i < add.length; i++) {
        this.lines.push(add[i]);
        if (this.matches(add[i])) this.visible.push(base + i);
      }
      if (this.lines.length > MAX_LINES) {
        const drop = this.lines.length - MAX_LINES;
        this.lines.splice(0, drop);
        this.visible = this.visible.filter((i) => i >= drop).map((i) => i - drop);
      }
      this.render(true, atBottom);
    }

    refilter() {
      const v = [];
      for (let i = 0; i < this.lines.length; i++) if (this.matches(this.lines[i])) v.push(i);
      this.visible = v;
      this.render(true, true);
    }

    atBottom() {
      const v = this.el.view;
      return v.scrollHeight - v.scrollTop - v.clientHeight < ROW * 2;
    }

    render(force, stick) {
      const e = this.el, view = e.view;
      const total = this.visible.length;
      e.spacer.style.height = total * ROW + "px";
      if (stick) view.scrollTop = view.scrollHeight;
      const start = Math.max(0, Math.floor(view.scrollTop / ROW) - OVERSCAN);
      const end = Math.min(total, Math.ceil((view.scrollTop + view.clientHeight) / ROW) + OVERSCAN);
      if (!force && start === this._start && end === this._end) return;
      this._start = start; this._end = end;
      const showTs = e.timestamps.checked ? e.tz.value : "", prefix = this.merged();
      const frag = document.createDocumentFragment();
      for (let k = start; k < end; k++) frag.appendChild(this.row(this.lines[this.visible[k]], showTs, prefix));
      e.window.style.top = start * ROW + "px";
      e.window.replaceChildren(frag);
      this.updateEmpty();
      this.updateLatest();
      this.updateOlder();
      this.updateStatus();
    }

    row(l, showTs, prefix) {
      const div = document.createElement("div");
      div.className = "ll";
      if (prefix && !l.sep) {
        const w = document.createElement("span"); w.className = "lw"; w.textContent = "[" + l.pod + "] "; div.appendChild(w);
      }
      if (showTs && l.ts) {
        const t = document.createElement("span"); t.className = "lts"; t.textContent = stamp(l.ts, showTs) + " "; div.appendChild(t);
      }
      const body = document.createElement("span");
      if (l.sep) body.className = "lsep";
      if (l.rot) body.dataset.testid = "logs-rotated";
      if (l.h && !this.filter) body.innerHTML = l.h; // server-escaped; only ANSI spans
      else this.highlight(body, l.t);
      div.appendChild(body);
      return div;
    }

    highlight(node, text) {
      if (!this.filter) { node.textContent = text; return; }
      const low = text.toLowerCase(), f = this.filter.toLowerCase();
      let i = 0, j;
      while ((j = low.indexOf(f, i)) >= 0) {
        if (j > i) node.appendChild(document.createTextNode(text.slice(i, j)));
        const m = document.createElement("mark"); m.textContent = text.slice(j, j + f.length); node.appendChild(m);
        i = j + f.length;
      }
      if (i < text.length) node.appendChild(document.createTextNode(text.slice(i)));
    }

    updateEmpty() {
      const e = this.el.empty;
      if (this.visible.length) { e.hidden = true; return; }
      e.hidden = false;
      if (this.lines.length && this.filter) { e.textContent = this.s.noMatch; return; }
      const msgs = [];
      for (const p of this.selectedPods()) {
        const st = this.pods[p];
        if (st && st.state) msgs.push(fmt(this.s["state." + st.state] || st.message, { pod: p, msg: st.message }));
      }
      if (msgs.length) e.textContent = msgs.join("\n");
      else e.textContent = this.gotTargets && (this.lastTick || !this.selectedPods().length) ? this.s.noLogs : this.s.connecting;
    }

    status(text, cls) {
      const span = document.createElement("span");
      span.textContent = text; if (cls) span.className = cls;
      this.el.status.replaceChildren(span);
      this.statusSticky = !!cls;
    }

    updateStatus() {
      const parts = [];
      parts.push([fmt(this.s.lines, { n: this.lines.length }), ""]);
      if (this.lastTick) parts.push([fmt(this.s.updated, { t: window.RLarkTime.format(this.lastTick, { date: false, abbr: true }) }), ""]);
      if (this.frozen) parts.push([fmt(this.s.heldLines, { n: this.held.length }), "warn"]);
      else if (!this.follow && this.visible.length) parts.push([this.s.scrollPaused, "warn"]);
      if (this.throttled) parts.push([this.s.throttled, "warn"]);
      for (const w of this.warnings || []) parts.push([w, "bad"]);
      this.el.matches.textContent = this.filter ? fmt(this.s.matches, { n: this.visible.length }) : "";
      if (this.statusSticky && this.closedFinal) return;
      if (this.statusSticky && this.ws && this.ws.readyState !== WebSocket.OPEN) return;
      this.statusSticky = false;
      this.el.status.replaceChildren(...parts.map(([t, c]) => {
        const s = document.createElement("span"); s.textContent = t; if (c) s.className = c; return s;
      }));
    }

    exportView() {
      // upstream-rlark 8.4: CSV `worker,role,message`, every field quoted, current filter applied.
      const rows = ["worker,role,message"];
      for (const i of this.visible) { const l = this.lines[i]; if (!l.sep) rows.push([l.pod, l.role, l.t].map(csvField).join(",")); }
      const blob = new Blob([rows.join("\n") + "\n"], { type: "text/csv;charset=utf-8" });
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = this.cfg.job + "-logs.csv";
      document.body.appendChild(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
    }
  }

  window.RLarkLogs = {
    LogsPanel,
    initAll() {
      document.querySelectorAll(".logs-panel[data-config]").forEach((root) => {
        if (!root._rlarkLogs) root._rlarkLogs = new LogsPanel(root);
      });
    },
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => window.RLarkLogs.initAll());
  else window.RLarkLogs.initAll();
  document.addEventListener("htmx:load", () => window.RLarkLogs.initAll());
})();
