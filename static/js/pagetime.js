/* RLark Console: one time zone per page in the browser too.
 *
 * The server renders every time in the page's zone (the user's chosen zone or TIME_ZONE) and the header names it
 * (rlark_console/pagetime.py, templates/_topbar.html). base.html puts that zone on <html data-tz="Asia/Shanghai"
 * data-tz-abbr="CST" data-tz-offset="UTC+08:00">; scripts that format times themselves (Metrics chart axes and
 * tooltips, the Logs tab's timestamps and "updated at") use this module, never the browser's own zone.
 *
 *   RLarkTime.zone / .abbr / .offset       the page's zone, as the header shows it (now)
 *   RLarkTime.abbrAt(ms | iso)             the zone's abbreviation at that instant: EST in January, EDT in July
 *                                           for America/New_York (data-tz-abbrs: the server's names per offset;
 *                                           "UTC-04:00" for an offset it did not list)
 *   RLarkTime.format(ms | iso, opts)       "YYYY-MM-DD HH:MM:SS" in the page's zone (opts.utc: in UTC;
 *                                           opts.ms: with milliseconds; opts.date === false: time only;
 *                                           opts.offset: with " +08:00"; opts.abbr: with " CST"); offset and
 *                                           abbreviation are those of the instant, on either side of a DST change
 */
(function () {
  "use strict";
  if (window.RLarkTime) return;
  const root = document.documentElement;
  const zone = root.dataset.tz || "UTC";
  const cache = {};
  let abbrs = {};
  try { abbrs = JSON.parse(root.dataset.tzAbbrs || "{}") || {}; } catch (e) { abbrs = {}; }

  function formatter(tz) {
    if (!cache[tz]) {
      try {
        cache[tz] = new Intl.DateTimeFormat("en-CA", {
          timeZone: tz, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
          hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "longOffset",
        });
      } catch (e) {
        cache[tz] = formatter("UTC");  // an unknown zone name: UTC, which the API uses anyway
      }
    }
    return cache[tz];
  }

  function parts(ms, tz) {
    const out = {};
    for (const p of formatter(tz).formatToParts(new Date(ms))) out[p.type] = p.value;
    // "GMT+08:00" -> "+08:00"; "GMT" -> "+00:00"
    const off = (out.timeZoneName || "GMT").replace("GMT", "") || "+00:00";
    out.offset = off.length === 3 ? off + ":00" : off;
    return out;
  }

  function toMs(value) { return typeof value === "number" ? value : Date.parse(value); }

  function abbrOf(p) { return abbrs[p.offset] || "UTC" + p.offset; }

  function abbrAt(value) {
    const ms = toMs(value);
    return isFinite(ms) ? abbrOf(parts(ms, zone)) : "";
  }

  function format(value, opts) {
    opts = opts || {};
    const ms = toMs(value);
    if (!isFinite(ms)) return String(value);
    const tz = opts.utc ? "UTC" : zone;
    const p = parts(ms, tz);
    let text = p.hour + ":" + p.minute + ":" + p.second;
    if (opts.ms) text += "." + String(((ms % 1000) + 1000) % 1000).padStart(3, "0");
    if (opts.date !== false) text = p.year + "-" + p.month + "-" + p.day + " " + text;
    if (opts.utc && (opts.offset || opts.abbr)) return text + " UTC";
    if (opts.offset) text += " " + p.offset;
    if (opts.abbr) text += " " + abbrOf(p);
    return text;
  }

  window.RLarkTime = {
    zone,
    abbr: root.dataset.tzAbbr || zone,
    offset: root.dataset.tzOffset || "",
    parts: (ms) => parts(ms, zone),
    abbrAt,
    format,
  };
})();
