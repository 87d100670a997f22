/* RLark Console WebTerminal (terminal/templates/terminal/terminal.html).
 *
 * Protocol (upstream-rlark 9): binary frames = terminal bytes both ways; JSON text frames
 * `resize`, `file-upload` + 32 KiB binary chunks + `file-upload-end`, `file-download` ->
 * `file-download-start` / chunks / `file-download-end`, `file-transfer-done`, `error`.
 * Additions: `flow`/`ack` credit so a flood (`yes`) never outruns xterm.js (the server stops
 * reading the PTY when 1 MiB is unacknowledged), server `ping` frames (ignored), and every
 * close shows its reason. Reconnect grace: the server's first frame `session` {id, resumed, previous}
 * names the shell; after a dropped connection the page reconnects with `?resume=<id>` and gets the same
 * shell back within the server's grace period, or is told plainly that a new shell was started. Leaving
 * the page sends `bye`, which ends the shell at once.
 */
(function () {
  "use strict";
  const el = document.getElementById("terminal");
  if (!el || !el.dataset.config) return;
  const cfg = JSON.parse(el.dataset.config);
  const s = cfg.strings;
  const WINDOW = 1 << 20;
  const NAME_RE = /^[A-Za-z0-9._-]+$/;
  const statusEl = document.getElementById("term-status");
  const reconnectBtn = document.getElementById("term-reconnect");
  const uploadInput = document.getElementById("term-upload");
  const downloadBtn = document.getElementById("term-download");
  const downloadPath = document.getElementById("term-download-path");
  const containerSel = document.getElementById("term-container");
  const containerLabel = document.getElementById("term-container-label");
  let container = "main"; // the container the shell runs in
  let switching = false;

  const fmt = (t, v) => String(t).replace(/%\((\w+)\)s/g, (_, k) => (v && k in v ? v[k] : ""));
  const clean = (t) => String(t).replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "");

  const term = new Terminal({
    fontSize: 13,
    fontFamily: "Menlo, Monaco, 'Courier New', 'Noto Sans Mono CJK SC', monospace",
    theme: { background: "#1a1a2e" },
    cursorBlink: true,
    scrollback: 5000,
  });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(el);
  fit.fit();
  term.focus();
  window.rlarkTerminal = term; // for tests and debugging
  window.rlarkTerminalSocket = () => ws; // tests drop it to play a network blip

  const enc = new TextEncoder();
  let ws = null;
  let uploading = false;
  let download = null;
  let exitCode = null;
  let closing = null;
  let pendingAck = 0;
  let ackTimer = null;
  let sessionId = null;
  let retries = 0;
  let retryTimer = null;
  let dropped = false;

  function status(text, cls) {
    statusEl.textContent = text;
    statusEl.className = "term-status" + (cls ? " " + cls : "");
  }
  function sendJSON(msg) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg)); }
  function sendResize() { sendJSON({ type: "resize", rows: term.rows, cols: term.cols }); }
  function setBusy(on) {
    uploading = on;
    downloadBtn.disabled = on;
    uploadInput.disabled = on;
  }

  function connect(resume) {
    exitCode = null;
    closing = null;
    download = null;
    clearTimeout(retryTimer);
    setBusy(false);
    term.writeln(fmt(s.connecting, { worker: cfg.worker }));
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const q = new URLSearchParams();
    if (resume && sessionId) q.set("resume", sessionId);
    if (container !== "main") q.set("container", container);
    const query = q.toString() ? "?" + q.toString() : "";
    ws = new WebSocket(proto + "//" + location.host + cfg.ws + query);
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      term.writeln(s.connected);
      status(s.live, "ok");
      reconnectBtn.hidden = true;
      sendJSON({ type: "flow", window: WINDOW });
      sendResize();
    };
    ws.onmessage = (ev) => (typeof ev.data === "string" ? onText(ev.data) : onBinary(ev.data));
    ws.onclose = onClose;
  }

  function flushAck() {
    clearTimeout(ackTimer);
    ackTimer = null;
    if (pendingAck) sendJSON({ type: "ack", bytes: pendingAck });
    pendingAck = 0;
  }
  function ack(n) {
    pendingAck += n;
    if (pendingAck >= 64 * 1024) flushAck();
    else if (!ackTimer) ackTimer = setTimeout(flushAck, 40);
  }

  function onBinary(buf) {
    const n = buf.byteLength;
    if (download) {
      download.chunks.push(buf);
      download.got += n;
      ack(n);
      return;
    }
    term.write(new Uint8Array(buf), () => ack(n)); // ack once xterm has parsed it
  }

  function saveDownload() {
    const blob = new Blob(download.chunks, { type: "application/octet-stream" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = download.name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 5000);
  }

  function onText(text) {
    let msg;
    try { msg = JSON.parse(text); } catch (e) { return; }
    switch (msg.type) {
      case "file-download-start":
        download = { name: clean(msg.name), size: msg.size, chunks: [], got: 0 };
        term.writeln("\r\n" + fmt(s.downloading, { name: download.name, size: msg.size }));
        return;
      case "file-download-end":
        if (download) {
          saveDownload();
          term.writeln(fmt(s.downloaded, { name: download.name }));
          download = null;
        }
        return;
      case "file-transfer-done":
        setBusy(false);
        download = null;
        if (msg.success) { term.writeln(s.transferDone); status(s.transferDone, "ok"); }
        else {
          const t = fmt(s.transferFailed, { error: clean(msg.error || s.unknown) });
          term.writeln("\x1b[31m" + t + "\x1b[0m");
          status(t, "bad");
        }
        term.focus();
        return;
      case "error": {
        const m = /exit code (\d+)/.exec(msg.message || "");
        if (m) exitCode = Number(m[1]);
        else term.writeln("\r\n" + clean(msg.message || ""));
        return;
      }
      case "session":
        if (msg.resumed) term.writeln("\x1b[32m" + s.resumed + "\x1b[0m");
        else if (msg.previous) {
          term.writeln("\r\n\x1b[33m" + s.newShell + "\x1b[0m");
          status(s.newShell, "warn");
        }
        sessionId = msg.id || null;
        retries = 0;
        return;
      case "containers": {
        const list = msg.containers || [];
        containerLabel.hidden = list.length <= 1;
        containerSel.replaceChildren(...list.map((c) => new Option(
          c.name + (c.kind !== "main" ? " (" + (s["kind." + c.kind] || c.kind) + ")" : ""), c.name)));
        containerSel.value = msg.current || "main";
        return;
      }
      case "closing": // daphne drops close-frame reasons; the server repeats it here first
        closing = { code: msg.code, reason: String(msg.reason || "") };
        return;
      default:
        return; // ping and unknown frames are dropped, never typed into the shell
    }
  }

  function onClose(ev) {
    if (switching) { switching = false; return; } // we closed it to open the chosen container
    // A dropped connection (no closing frame from the server): reattach to the same shell a few times.
    dropped = !closing && exitCode === null && sessionId !== null;
    if (dropped && retries < 5) {
      retries += 1;
      status(s.reconnecting, "warn");
      retryTimer = setTimeout(() => connect(true), 1000 * retries);
      return;
    }
    const reason = clean(ev.reason || (closing && closing.reason) || "");
    const code = closing && (ev.code === 1005 || ev.code === 1006 || !ev.code) ? closing.code : ev.code;
    closing = null;
    const m = /exited with code (\d+)/.exec(reason);
    if (m) exitCode = Number(m[1]);
    let text;
    if (exitCode !== null) text = fmt(s.sessionEndedCode, { code: exitCode });
    else if (code === 1000) text = s.sessionEnded;
    else if (reason && code >= 4000) text = fmt(s.closed, { reason });
    else text = fmt(s.closedUnexpectedly, { code, reason: reason || "-" });
    // The exit code is printed once: the server's English reason only repeats it.
    const full = exitCode === null && reason && !text.includes(reason) ? text + " (" + reason + ")" : text;
    term.writeln("\r\n\x1b[33m" + full + "\x1b[0m");
    status(full, code === 1000 ? "warn" : "bad");
    reconnectBtn.hidden = false;
    setBusy(false);
  }

  term.onData((d) => {
    if (uploading || !ws || ws.readyState !== WebSocket.OPEN) return;
    ws.send(enc.encode(d));
  });
  term.onBinary((d) => {
    if (uploading || !ws || ws.readyState !== WebSocket.OPEN) return;
    const b = new Uint8Array(d.length);
    for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 255;
    ws.send(b);
  });
  term.onResize(() => sendResize());
  let fitPending = false;
  window.addEventListener("resize", () => {
    if (fitPending) return;
    fitPending = true;
    requestAnimationFrame(() => { fitPending = false; fit.fit(); });
  });

  uploadInput.addEventListener("change", async () => {
    const f = uploadInput.files[0];
    uploadInput.value = "";
    if (!f || !ws || ws.readyState !== WebSocket.OPEN) return;
    if (uploading) { status(s.busy, "warn"); return; }
    if (!NAME_RE.test(f.name) || f.name === "." || f.name === "..") { status(s.badName, "bad"); return; }
    if (f.size > cfg.maxBytes) { status(fmt(s.tooLarge, { mib: cfg.maxBytes / 1048576 }), "bad"); return; }
    const path = "./" + f.name;
    setBusy(true);
    term.writeln("\r\n" + fmt(s.uploading, { name: f.name, size: f.size, path }));
    sendJSON({ type: "file-upload", path, size: f.size, mode: 420 });
    const data = new Uint8Array(await f.arrayBuffer());
    for (let i = 0; i < data.length; i += cfg.chunk) ws.send(data.subarray(i, i + cfg.chunk));
    sendJSON({ type: "file-upload-end" });
  });

  function requestDownload() {
    const path = downloadPath.value.trim();
    if (!path || uploading || !ws || ws.readyState !== WebSocket.OPEN) return;
    setBusy(true);
    term.writeln("\r\n" + fmt(s.requesting, { path }));
    sendJSON({ type: "file-download", path });
  }
  downloadBtn.addEventListener("click", requestDownload);
  downloadPath.addEventListener("keydown", (e) => { if (e.key === "Enter") requestDownload(); });
  reconnectBtn.addEventListener("click", () => {
    if (dropped) connect(true); // the shell may still be waiting for us
    else { term.reset(); connect(false); }
    term.focus();
  });
  window.addEventListener("pagehide", () => sendJSON({ type: "bye" }));
  containerSel.addEventListener("change", () => {
    container = containerSel.value || "main";
    const old = ws;
    sessionId = null;
    if (old && old.readyState <= WebSocket.OPEN) {
      switching = true;
      if (old.readyState === WebSocket.OPEN) old.send(JSON.stringify({ type: "bye" })); // end that shell at once
      old.onmessage = null;
      old.onclose = null;
      old.close();
    }
    switching = false;
    term.reset();
    term.writeln(fmt(s.switching, { container }));
    connect(false);
    term.focus();
  });

  connect(false);
})();
