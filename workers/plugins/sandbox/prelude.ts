// What runs inside each plugin's QuickJS engine before the plugin's own code: the plugin's globals
// (console, fetch, RetryError), `meta`, `require` for the few modules a plugin may import, and the
// batch runner the host calls once per batch (docs/plugins.md, "How a batch crosses").
//
// Events are lazy: a plugin gets a Proxy per event; a top-level field or a property is fetched
// from the host the first time any event of the batch reads it, for every event of the batch at
// once (one crossing per field and batch, parsed with one JSON.parse), and what the plugin writes
// is recorded as a patch. So a plugin pays for what it reads and writes, not for the event's size.
// A record per event that did not come back unchanged is appended to the batch's result string,
// length-prefixed (never escaped), which the host decodes (results.ts).
//
// The host gives `globalThis.__spateHost` (removed here):
//   column(batch, key) → "<mask>\n<JSON array>"  key: "t<field>" top level, "p<name>" property,
//                         "k" the top-level keys of each event (mask: "" = all present, else
//                         one "1"/"0" per event); "s": each event whole as the plugin sees it,
//                         one JSON text a line (read-only methods)
//   properties(batch, index) → JSON of one event's properties (a plugin that enumerates them)
//   log(level, message)
//   call(op, argsJson) → Promise of a JSON text (fetch, storage, cache)
// Kept as a plain string (no template literals inside) so it ships in the build as is.
export const PRELUDE = String.raw`
(function () {
  'use strict';
  var HOST = globalThis.__spateHost;
  delete globalThis.__spateHost;
  var hasOwn = Object.prototype.hasOwnProperty;
  // An event's state lives on its Proxy's target under these keys (the traps never show them):
  // index, written, deleted, objects read, properties Proxy and its target, replaced properties,
  // full properties, and X: set once anything may have changed (the fast path of unchanged events).
  var I = 'i', W = 'w', D = 'd', O = 'o', P = 'p', PT = 'q', R = 'r', F = 'f', X = 'x';

  // --- batches in flight (several at once: a plugin awaiting fetch in one lets others run) ------
  var batches = new Map();
  var current = -1;

  function fetchColumn(b, cache, kind, name) {
    if (b.gone) return cache[name] = ownColumn(b, kind, name);
    var text = HOST.column(b.id, kind + name);
    var nl = text.indexOf('\n');
    return cache[name] = { mask: nl === 0 ? null : text.slice(0, nl), values: JSON.parse(text.slice(nl + 1)) };
  }
  function keysColumn(b) { return b.keys || (b.keys = fetchColumn(b, {}, 'k', '')); }
  function topColumn(b, name) { return b.tops[name] || fetchColumn(b, b.tops, 't', name); }
  function propertyColumn(b, name) { return b.props[name] || fetchColumn(b, b.props, 'p', name); }
  function present(c, i) { return c.mask === null || c.mask.charCodeAt(i) === 49; }
  function isObject(v) { return v !== null && typeof v === 'object'; }

  // --- read-only methods (onEvent, composeWebhook) ---------------------------------------------------
  // Their events also carry their JSON text (column "s", one line each; the engine splits it, ~0.4
  // µs an event): JSON.stringify of an event the plugin has not changed is that text, not a trap
  // per key and value (a QuickJS parse and stringify cost ~30 µs an event), and an array of such
  // events is their texts joined. An event kept past its call (a buffer across batches) reads its
  // fields from its own text once the host has let its batch go.
  // processEvent's events have no text: kept past their call, what they had not read is gone
  // with the host's batch, and reading it says so (a plugin keeps a copy instead).
  var TARGET = Symbol('target');
  var READ_TOO_LATE = 'an event given to processEvent can be read only until the call returns: keep a copy (JSON.parse(JSON.stringify(event)))';
  function plainOf(t) {
    if (t.s === undefined) throw new TypeError(READ_TOO_LATE);
    return t.j || (t.j = JSON.parse(t.s));
  }
  function ownColumn(b, kind, name) {
    if (b.texts === undefined) throw new TypeError(READ_TOO_LATE);
    var parsed = b.parsed || (b.parsed = b.texts.map(function (text) { return JSON.parse(text); }));
    var mask = '', all = true, values = new Array(parsed.length);
    for (var i = 0; i < parsed.length; i++) {
      var e = parsed[i], v;
      if (kind === 'k') v = Object.keys(e);
      else { var from = kind === 't' ? e : e.properties; v = isObject(from) && hasOwn.call(from, name) ? from[name] : undefined; }
      values[i] = v;
      if (v === undefined) all = false;
      mask += v === undefined ? '0' : '1';
    }
    return { mask: all ? null : mask, values: values };
  }
  // The text of an event a read-only method has not changed (nothing written, no object read).
  function unchangedText(v) {
    if (!isObject(v)) return undefined;
    var t = v[TARGET];
    return t !== undefined && t.s !== undefined && t[X] === undefined ? t.s : undefined;
  }
  var nativeStringify = JSON.stringify;
  JSON.stringify = function stringify(value, replacer, space) {
    if ((replacer === undefined || replacer === null) && space === undefined) {
      var text = unchangedText(value);
      if (text !== undefined) return text;
      if (Array.isArray(value) && value.length > 0) {
        var texts = new Array(value.length);
        for (var i = 0; i < value.length; i++) if ((texts[i] = unchangedText(value[i])) === undefined) break;
        if (i === value.length) return '[' + texts.join(',') + ']';
      }
    }
    return nativeStringify(value, replacer, space);
  };

  // --- properties of one event -------------------------------------------------------------------
  function full(t) {
    var f = t[F];
    // A copy that keeps every key a key: Object.assign would make a "__proto__" key the prototype.
    if (f === undefined) f = t[F] = t.b.gone ? ownCopy(plainOf(t.e).properties) : JSON.parse(HOST.properties(t.b.id, t[I]));
    return f;
  }
  function ownCopy(o) { return isObject(o) ? Object.fromEntries(Object.entries(o)) : {}; }
  function readProperty(t, k) {
    var w = t[W];
    if (w !== undefined && hasOwn.call(w, k)) return w[k];
    var d = t[D];
    if (d !== undefined && d.has(k)) return undefined;
    var v;
    if (t[F] !== undefined) v = hasOwn.call(t[F], k) ? t[F][k] : undefined;
    else {
      var c = propertyColumn(t.b, k);
      v = present(c, t[I]) ? c.values[t[I]] : undefined;
    }
    // An object read may be changed in place: it is sent back as written.
    if (isObject(v)) markObject(t, k);
    return v;
  }
  function hasProperty(t, k) {
    var w = t[W];
    if (w !== undefined && hasOwn.call(w, k)) return true;
    var d = t[D];
    if (d !== undefined && d.has(k)) return false;
    if (t[F] !== undefined) return hasOwn.call(t[F], k);
    return present(propertyColumn(t.b, k), t[I]);
  }
  function markObject(t, k) {
    (t[O] || (t[O] = new Set())).add(k);
    t[X] = 1;
    if (t.e !== undefined) t.e[X] = 1;
  }
  function writeProperty(t, k, v) {
    (t[W] || (t[W] = {}))[k] = v;
    if (t[D] !== undefined) t[D].delete(k);
    t[X] = 1;
    t.e[X] = 1;
    return true;
  }
  var PROPERTIES = {
    get: function (t, k) { return typeof k === 'string' ? readProperty(t, k) : undefined; },
    set: function (t, k, v) { return typeof k === 'string' ? writeProperty(t, k, v) : false; },
    has: function (t, k) { return typeof k === 'string' && hasProperty(t, k); },
    deleteProperty: function (t, k) {
      if (typeof k !== 'string') return true;
      if (t[W] !== undefined) delete t[W][k];
      (t[D] || (t[D] = new Set())).add(k);
      t[X] = 1;
      t.e[X] = 1;
      return true;
    },
    ownKeys: function (t) {
      var keys = Object.keys(full(t));
      var w = t[W], d = t[D];
      if (w !== undefined) for (var k in w) if (keys.indexOf(k) === -1) keys.push(k);
      if (d !== undefined) keys = keys.filter(function (k) { return !d.has(k); });
      return keys;
    },
    getOwnPropertyDescriptor: function (t, k) {
      if (typeof k !== 'string' || !hasProperty(t, k)) return undefined;
      return { value: readProperty(t, k), writable: true, enumerable: true, configurable: true };
    },
    defineProperty: function (t, k, desc) { return typeof k === 'string' && 'value' in desc ? writeProperty(t, k, desc.value) : false; },
    getPrototypeOf: function () { return Object.prototype; },
    setPrototypeOf: function () { return false; },
    preventExtensions: function () { return false; },
  };

  // --- one event ---------------------------------------------------------------------------------
  function readTop(t, k) {
    var w = t[W];
    if (w !== undefined && hasOwn.call(w, k)) return w[k];
    var d = t[D];
    if (d !== undefined && d.has(k)) return undefined;
    if (k === 'properties') {
      if (t[R] !== undefined) return t[R];
      var p = t[P];
      if (p === undefined) {
        // A Proxy does not give its target back: kept beside it for the patch. e: the event's.
        var pt = t[PT] = { i: t[I], e: t, b: t.b };
        p = t[P] = new Proxy(pt, PROPERTIES);
      }
      return p;
    }
    var c = topColumn(t.b, k);
    var v = present(c, t[I]) ? c.values[t[I]] : undefined;
    if (isObject(v)) markObject(t, k);
    return v;
  }
  function hasTop(t, k) {
    var w = t[W];
    if (w !== undefined && hasOwn.call(w, k)) return true;
    var d = t[D];
    if (d !== undefined && d.has(k)) return false;
    if (k === 'properties') return true;
    return present(topColumn(t.b, k), t[I]);
  }
  function writeTop(t, k, v) {
    t[X] = 1;
    if (k === 'properties') {
      t[R] = v;
      return true;
    }
    (t[W] || (t[W] = {}))[k] = v;
    if (t[D] !== undefined) t[D].delete(k);
    return true;
  }
  var EVENT = {
    get: function (t, k) {
      if (typeof k !== 'string') return k === TARGET ? t : undefined;
      // Inside an object JSON.stringify is given: the event, parsed from its text.
      if (k === 'toJSON' && t.s !== undefined && t[X] === undefined) return function () { return plainOf(t); };
      return readTop(t, k);
    },
    set: function (t, k, v) { return typeof k === 'string' ? writeTop(t, k, v) : false; },
    has: function (t, k) { return typeof k === 'string' && hasTop(t, k); },
    deleteProperty: function (t, k) {
      if (typeof k !== 'string') return true;
      t[X] = 1;
      if (k === 'properties') { t[R] = {}; return true; }
      if (t[W] !== undefined) delete t[W][k];
      (t[D] || (t[D] = new Set())).add(k);
      return true;
    },
    ownKeys: function (t) {
      var c = keysColumn(t.b);
      var keys = c.values[t[I]].slice();
      var w = t[W], d = t[D];
      if (w !== undefined) for (var k in w) if (keys.indexOf(k) === -1) keys.push(k);
      if (d !== undefined) keys = keys.filter(function (k) { return !d.has(k); });
      return keys;
    },
    getOwnPropertyDescriptor: function (t, k) {
      if (typeof k !== 'string' || !hasTop(t, k)) return undefined;
      return { value: readTop(t, k), writable: true, enumerable: true, configurable: true };
    },
    defineProperty: function (t, k, desc) { return typeof k === 'string' && 'value' in desc ? writeTop(t, k, desc.value) : false; },
    getPrototypeOf: function () { return Object.prototype; },
    setPrototypeOf: function () { return false; },
    preventExtensions: function () { return false; },
  };

  // --- results, length-prefixed (results.ts) ---------------------------------------------------
  // Lengths count UTF-16 units; a lone surrogate leaves the engine as three characters (U+FFFD),
  // which would shift every record after it: such a string goes as the replacement character.
  var isWellFormed = String.prototype.isWellFormed, toWellFormed = String.prototype.toWellFormed;
  function str(s) {
    if (!isWellFormed.call(s)) s = toWellFormed.call(s);
    return s.length + ':' + s;
  }
  function json(v) {
    var text = JSON.stringify(v);
    if (text === undefined) throw new TypeError('cannot be sent as JSON');
    return text;
  }
  function value(v) {
    if (typeof v === 'string') return 's' + str(v);
    if (typeof v === 'number') return isFinite(v) ? 'n' + str(String(v)) : 'z';
    if (typeof v === 'boolean') return v ? 'b1' : 'b0';
    if (v === null) return 'z';
    if (v === undefined) return 'u';
    return 'j' + str(json(v));
  }
  // A value whose body is a string (a webhook: often an event's JSON) sends the body as it is,
  // beside the JSON of the rest, rather than escaped inside it (a third of composeWebhook's cost);
  // a body that is the event's own text, unchanged, is not sent at all: the host has it ("V").
  // Most webhooks are { url, body } to one URL: the JSON of { url } is made once per URL.
  var lastUrl, lastUrlJson;
  function restJson(r) {
    var onlyUrl = typeof r.url === 'string' && hasOwn.call(r, 'url');
    for (var k in r) if (k !== 'body' && k !== 'url' && hasOwn.call(r, k)) { onlyUrl = false; break; }
    if (onlyUrl) {
      if (r.url !== lastUrl) { lastUrlJson = str(json({ url: r.url })); lastUrl = r.url; }
      return lastUrlJson;
    }
    var rest = {};
    for (var k2 in r) if (k2 !== 'body' && hasOwn.call(r, k2)) rest[k2] = r[k2];
    return str(json(rest));
  }
  function valueRecord(r, t) {
    if (isObject(r) && !Array.isArray(r) && typeof r.body === 'string' && Object.getPrototypeOf(r) === Object.prototype) {
      if (t.s !== undefined && t[X] === undefined && r.body === t.s) return 'V' + restJson(r);
      return 'W' + restJson(r) + str(r.body);
    }
    return 'R' + str(json(r));
  }
  function patchOf(t, tag) {
    var ops = '';
    var w = t[W], d = t[D], o = t[O];
    if (w !== undefined) for (var k in w) ops += tag + str(k) + value(w[k]);
    if (o !== undefined) o.forEach(function (k) { if (w === undefined || !hasOwn.call(w, k)) { if (d === undefined || !d.has(k)) ops += tag + str(k) + value(tag === 'P' ? readProperty(t, k) : readTop(t, k)); } });
    if (d !== undefined) d.forEach(function (k) { ops += (tag === 'P' ? 'D' : 'X') + str(k); });
    return ops;
  }
  function settle(i, t, proxy, r, mode) {
    var out;
    if (mode === 'void') return;
    if (mode === 'value') {
      out = r === null || r === undefined ? 'N' : valueRecord(r, t);
    } else if (r === proxy) {
      if (t[X] === undefined) return;
      out = patchOf(t, 'T');
      if (t[R] !== undefined) out += 'A' + str(json(t[R]));
      else if (t[PT] !== undefined) out += patchOf(t[PT], 'P');
      if (out === '') return;
    } else if (r === null || r === undefined) {
      out = 'N';
    } else if (typeof r !== 'object') {
      out = 'E' + str('TypeError') + str(mode === 'event' ? 'processEvent returned ' + typeof r + ', not an event or null' : 'returned ' + typeof r);
    } else {
      out = 'R' + str(json(r));
    }
    t.b.out.push('@' + i + ';' + out);
  }
  function failure(i, e, b) {
    var name = e !== null && typeof e === 'object' && typeof e.name === 'string' ? e.name : 'Error';
    var message = e !== null && typeof e === 'object' && 'message' in e ? String(e.message) : String(e);
    b.out.push('@' + i + ';E' + str(name) + str(message));
  }

  // --- the batch runner the host calls ---------------------------------------------------------------
  var methods = {};
  var meta = null;
  function run(method, mode, id, n, start) {
    var fn = methods[method];
    var b = batches.get(id);
    if (b === undefined) {
      batches.set(id, b = { id: id, tops: Object.create(null), props: Object.create(null), keys: undefined, out: [], pending: new Set() });
      if (mode !== 'event') b.texts = HOST.column(id, 's').split('\n');
    }
    var texts = b.texts;
    var transform = mode === 'event';
    for (var i = start; i < n; i++) {
      current = i;
      var t = { i: i, b: b };
      if (texts !== undefined) t.s = texts[i];
      var proxy = new Proxy(t, EVENT);
      var r;
      try {
        r = fn(proxy, meta);
      } catch (e) {
        failure(i, e, b);
        continue;
      }
      // The event given back untouched (most transformations, most events): no record.
      if (transform && r === proxy && t[X] === undefined) continue;
      if (r !== proxy && r !== null && typeof r === 'object' && typeof r.then === 'function') {
        b.pending.add(i);
        (function (i, t, proxy) {
          r.then(function (v) { if (!t.b.pending.delete(i)) return; try { settle(i, t, proxy, v, mode); } catch (e) { failure(i, e, t.b); } },
                 function (e) { if (t.b.pending.delete(i)) failure(i, e, t.b); });
        })(i, t, proxy);
        continue;
      }
      try { settle(i, t, proxy, r, mode); } catch (e) { failure(i, e, b); }
    }
    current = -1;
    return b.pending.size;
  }
  // Events whose promise has not settled, comma-separated.
  function pending(id) {
    var b = batches.get(id);
    return b === undefined ? '' : Array.from(b.pending).join(',');
  }
  function collect(id) {
    var b = batches.get(id);
    if (b === undefined) return '';
    batches.delete(id);
    // Its events, kept by the plugin, now read from their own texts.
    b.gone = true;
    // A promise that settles later (after a timeout) finds nothing pending and records nothing.
    b.pending.clear();
    return b.out.join('');
  }
  function progress() { return current; }
  // Other calls (setupPlugin, teardownPlugin, runEvery*, jobs): meta as the last argument, the
  // result as JSON (the host awaits it).
  function call(method, argsJson) {
    var args = JSON.parse(argsJson);
    args.push(meta);
    return Promise.resolve(methods[method].apply(undefined, args)).then(function (r) {
      return r === undefined ? 'null' : json(r);
    });
  }

  // --- what the plugin sees --------------------------------------------------------------------------
  function format(args) {
    var parts = [];
    for (var i = 0; i < args.length; i++) {
      var a = args[i];
      if (typeof a === 'string') parts.push(a);
      else if (a instanceof Error) parts.push(a.name + ': ' + a.message);
      else { try { parts.push(JSON.stringify(a) === undefined ? String(a) : JSON.stringify(a)); } catch (e) { parts.push(String(a)); } }
    }
    return parts.join(' ');
  }
  function logger(level) { return function () { HOST.log(level, format(arguments)); }; }
  var console = { log: logger('LOG'), info: logger('INFO'), warn: logger('WARN'), error: logger('ERROR'), debug: logger('DEBUG') };

  function hostCall(op, args) { return HOST.call(op, JSON.stringify(args)).then(function (text) { return JSON.parse(text); }); }

  class RetryError extends Error {
    constructor(message) { super(message); this.name = 'RetryError'; }
  }
  function Headers(entries) { this.entries = entries; }
  Headers.prototype.get = function (name) {
    var n = String(name).toLowerCase();
    for (var i = 0; i < this.entries.length; i++) if (this.entries[i][0] === n) return this.entries[i][1];
    return null;
  };
  Headers.prototype.has = function (name) { return this.get(name) !== null; };
  function fetch(url, init) {
    init = init || {};
    var headers = init.headers || {};
    if (typeof headers.entries === 'object' && Array.isArray(headers.entries)) headers = Object.fromEntries(headers.entries);
    var body = init.body === undefined || init.body === null ? null : String(init.body);
    return hostCall('fetch', { url: String(url), method: init.method || 'GET', headers: headers, body: body }).then(function (r) {
      return {
        status: r.status, statusText: r.statusText, ok: r.status >= 200 && r.status < 300, url: r.url,
        headers: new Headers(r.headers),
        text: function () { return Promise.resolve(r.body); },
        json: function () { return Promise.resolve().then(function () { return JSON.parse(r.body); }); },
      };
    });
  }
  var storage = {
    get: function (key, defaultValue) { return hostCall('storage.get', [String(key)]).then(function (v) { return v === null ? (defaultValue === undefined ? null : defaultValue) : v.value; }); },
    set: function (key, v) { return v === undefined ? hostCall('storage.del', [String(key)]).then(function () {}) : hostCall('storage.set', [String(key), { value: v }]).then(function () {}); },
    del: function (key) { return hostCall('storage.del', [String(key)]).then(function () {}); },
  };
  var cache = {
    get: function (key, defaultValue) { return hostCall('cache.get', [String(key)]).then(function (v) { return v === null ? (defaultValue === undefined ? null : defaultValue) : v.value; }); },
    set: function (key, v, ttlSeconds) { return hostCall('cache.set', [String(key), { value: v }, ttlSeconds === undefined ? null : Number(ttlSeconds)]).then(function () {}); },
    incr: function (key, by) { return hostCall('cache.incr', [String(key), by === undefined ? 1 : Number(by)]); },
    expire: function (key, ttlSeconds) { return hostCall('cache.expire', [String(key), Number(ttlSeconds)]); },
  };
  var unavailable = function (what) { return function () { throw new Error(what + ' is not available in Spate'); }; };
  var MODULES = {
    'node-fetch': fetch,
    'cross-fetch': fetch,
    '@posthog/plugin-scaffold': { RetryError: RetryError },
  };
  function require(name) {
    if (hasOwn.call(MODULES, name)) return MODULES[name];
    throw new Error("import '" + name + "' is not available in Spate");
  }
  Object.defineProperties(globalThis, {
    console: { value: console, writable: true, configurable: true },
    fetch: { value: fetch, writable: true, configurable: true },
    RetryError: { value: RetryError, writable: true, configurable: true },
  });

  // --- loading the plugin --------------------------------------------------------------------------
  var METHODS = ['setupPlugin', 'teardownPlugin', 'processEvent', 'onEvent', 'composeWebhook', 'runEveryMinute', 'runEveryHour', 'runEveryDay', 'getSettings'];
  function load(factory, configJson) {
    var module = { exports: {} };
    factory(module.exports, module, require);
    var exported = module.exports;
    var found = [];
    var sources = [exported, exported && isObject(exported.default) ? exported.default : null];
    for (var m = 0; m < METHODS.length; m++) {
      for (var s = 0; s < sources.length; s++) {
        if (sources[s] && typeof sources[s][METHODS[m]] === 'function') { methods[METHODS[m]] = sources[s][METHODS[m]]; found.push(METHODS[m]); break; }
      }
    }
    var jobs = {};
    var jobSource = exported && isObject(exported.jobs) ? exported.jobs : null;
    if (jobSource) for (var name in jobSource) if (typeof jobSource[name] === 'function') { methods['job:' + name] = jobSource[name]; found.push('job:' + name); }
    meta = {
      config: JSON.parse(configJson),
      global: {},
      attachments: {},
      storage: storage,
      cache: cache,
      jobs: jobs,
      utils: {},
      geoip: { locate: unavailable('meta.geoip') },
      fetch: fetch,
    };
    return found.join(',');
  }

  return { run: run, collect: collect, pending: pending, progress: progress, call: call, load: load };
})()
`;
