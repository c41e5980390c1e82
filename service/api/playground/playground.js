// The screenshot-service playground. The form is built from the API's own OpenAPI schema (the options
// model: groups, descriptions, types, defaults, allowed values), so it cannot drift from the API.
// Keys are sent only to this origin's API and kept in localStorage only when "remember" is ticked.
"use strict";

const ENDPOINTS = { take: "/v1/screenshot/take", animate: "/v1/screenshot/animate" };
const STORED_KEYS = { access: "screenshot-service.access-key", signing: "screenshot-service.signing-key" };
const OPEN_GROUPS = new Set(["Source", "Response", "Viewport", "Animation"]);
const LONG_TEXT = new Set(["html", "markdown", "styles", "scripts", "vision_prompt"]);
const CREDENTIALS = new Set(["access_key", "signature"]);
const FILE_EXTENSIONS = { jpeg: "jpg", markdown: "md" };

const $ = (id) => document.getElementById(id);
let schemas = {};  // endpoint name -> the JSON schema of its options
let sdks = {};  // sdks.json: how the official SDKs name the options

// ---- SHA-256 and HMAC, in plain JavaScript: WebCrypto exists only on https and localhost pages. ----

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

function sha256(bytes) {
  const length = bytes.length;
  const padded = new Uint8Array(Math.ceil((length + 9) / 64) * 64);
  padded.set(bytes);
  padded[length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(length / 0x20000000));
  view.setUint32(padded.length - 4, (length * 8) >>> 0);
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let block = 0; block < padded.length; block += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(block + i * 4);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
      const t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    [a, b, c, d, e, f, g, hh].forEach((value, i) => { h[i] = h[i] + value; });
  }
  const out = new Uint8Array(32);
  h.forEach((value, i) => new DataView(out.buffer).setUint32(i * 4, value));
  return out;
}

function hmacSha256Hex(key, message) {
  const encoder = new TextEncoder();
  let keyBytes = encoder.encode(key);
  if (keyBytes.length > 64) keyBytes = sha256(keyBytes);
  const inner = new Uint8Array(64), outer = new Uint8Array(64);
  for (let i = 0; i < 64; i++) {
    inner[i] = (keyBytes[i] || 0) ^ 0x36;
    outer[i] = (keyBytes[i] || 0) ^ 0x5c;
  }
  const messageBytes = encoder.encode(message);
  const innerHash = sha256(concat(inner, messageBytes));
  return Array.from(sha256(concat(outer, innerHash)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function concat(first, second) {
  const joined = new Uint8Array(first.length + second.length);
  joined.set(first);
  joined.set(second, first.length);
  return joined;
}

// ---- Signing (docs/using.md, "Signed requests"): the canonical form of DESIGN §4. ----

function rfc3986(text) {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

function canonicalQuery(pairs) {
  const sorted = pairs.filter(([name]) => name !== "signature")
    .map((pair, index) => [pair, index])
    .sort(([a, i], [b, j]) => compareBytes(a[0], b[0]) || i - j)
    .map(([pair]) => pair);
  return sorted.map(([name, value]) => `${rfc3986(name)}=${rfc3986(value)}`).join("&");
}

function compareBytes(a, b) {
  const x = new TextEncoder().encode(a), y = new TextEncoder().encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

// ---- The form, from the schema. ----

function shapeOf(prop) {
  const variants = prop.anyOf ? prop.anyOf.filter((v) => v.type !== "null") : [prop];
  const main = variants[0] || {};
  if (main.type === "array") {
    const items = main.items || {};
    return items.enum ? { kind: "choices", values: items.enum } : { kind: "lines" };
  }
  if (main.enum) return { kind: "enum", values: main.enum };
  return { kind: main.type || "string", min: main.minimum, max: main.maximum };
}

function describe(name, prop, shape) {
  const parts = [prop.description || ""];
  const type = { enum: "one of the values", choices: "any of the values", lines: "list, one per line" }[shape.kind]
    || shape.kind;
  parts.push(`Type: ${type}.`);
  if (shape.min !== undefined || shape.max !== undefined) {
    parts.push(`Range: ${shape.min ?? "…"} to ${shape.max ?? "…"}.`);
  }
  parts.push(`Default: ${defaultText(prop)}.`);
  return parts.filter(Boolean).join(" ");
}

function defaultText(prop) {
  // A default that depends on other parameters (viewport 1280x1024 unless a device says otherwise) is
  // documented as x-shown-default; the model's own default is then null.
  const value = prop.default ?? prop["x-shown-default"];
  if (value === undefined || value === null) return "not set";
  if (Array.isArray(value)) return value.length ? value.join(", ") : "none";
  return String(value);
}

function control(name, prop, shape) {
  const id = `option-${name}`;
  let element;
  if (shape.kind === "enum" || shape.kind === "boolean") {
    element = document.createElement("select");
    const values = shape.kind === "boolean" ? [true, false] : shape.values;
    element.append(new Option(`(default: ${defaultText(prop)})`, ""));
    for (const value of values) element.append(new Option(String(value), String(value)));
  } else if (shape.kind === "choices") {
    element = document.createElement("div");
    element.className = "choices";
    element.setAttribute("role", "group");
    for (const value of shape.values) {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = value;
      box.id = `${id}-${value}`;
      const label = document.createElement("label");
      label.htmlFor = box.id;
      label.textContent = value;
      element.append(box, label);
    }
  } else if (shape.kind === "lines" || LONG_TEXT.has(name)) {
    element = document.createElement("textarea");
    element.rows = shape.kind === "lines" ? 2 : 5;
  } else {
    element = document.createElement("input");
    element.type = shape.kind === "integer" || shape.kind === "number" ? "number" : "text";
    if (element.type === "number") {
      element.step = shape.kind === "integer" ? "1" : "any";
      if (shape.min !== undefined) element.min = shape.min;
      if (shape.max !== undefined) element.max = shape.max;
    }
    const shown = prop.default ?? prop["x-shown-default"];
    if (shown !== undefined && shown !== null) element.placeholder = String(shown);
  }
  element.id = id;
  element.dataset.name = name;
  element.dataset.kind = shape.kind;
  return element;
}

function buildForm(endpoint) {
  const schema = schemas[endpoint];
  const groups = new Map();
  for (const [name, prop] of Object.entries(schema.properties)) {
    if (CREDENTIALS.has(name)) continue;  // the key fields above the form
    const group = prop["x-group"] || "Other";
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group).push([name, prop]);
  }
  const container = $("options");
  container.replaceChildren();
  for (const [group, props] of groups) {
    const details = document.createElement("details");
    details.open = OPEN_GROUPS.has(group);
    const summary = document.createElement("summary");
    summary.textContent = `${group} (${props.length})`;
    details.append(summary);
    for (const [name, prop] of props) {
      const shape = shapeOf(prop);
      const field = document.createElement("div");
      field.className = "field";
      const label = document.createElement(shape.kind === "choices" ? "span" : "label");
      label.className = "name";
      label.innerHTML = "<code></code>";
      label.firstChild.textContent = name;
      const element = control(name, prop, shape);
      if (shape.kind !== "choices") label.htmlFor = element.id;
      else element.setAttribute("aria-label", name);
      const help = document.createElement("p");
      help.className = "help";
      help.id = `${element.id}-help`;
      help.textContent = describe(name, prop, shape);
      element.setAttribute("aria-describedby", help.id);
      field.append(label, element, help);
      details.append(field);
    }
    container.append(details);
  }
}

// What the person set, in form order: [name, typed value]; empty controls are left out.
function chosenOptions() {
  const chosen = [];
  for (const element of $("options").querySelectorAll("[data-name]")) {
    const { name, kind } = element.dataset;
    if (kind === "choices") {
      const values = [...element.querySelectorAll("input:checked")].map((box) => box.value);
      if (values.length) chosen.push([name, values]);
      continue;
    }
    const raw = element.value.trim();
    if (raw === "") continue;
    if (kind === "lines") chosen.push([name, raw.split("\n").map((line) => line.trim()).filter(Boolean)]);
    else if (kind === "boolean") chosen.push([name, raw === "true"]);
    else if ((kind === "integer" || kind === "number") && Number.isFinite(Number(raw))) chosen.push([name, Number(raw)]);
    else chosen.push([name, element.value]);
  }
  return chosen;
}

// One (name, text) pair per value, array elements in order: what signatures and query strings carry.
function textPairs(options) {
  const pairs = [];
  for (const [name, value] of options) {
    for (const item of Array.isArray(value) ? value : [value]) pairs.push([name, String(item)]);
  }
  return pairs;
}

// ---- Capture, curl, signed link. ----

function requestBody(options, signingKey) {
  const body = Object.fromEntries(options);
  if (signingKey) body.signature = hmacSha256Hex(signingKey, canonicalQuery(textPairs(options)));
  return body;
}

function shellQuote(text) {
  return `'${text.replace(/'/g, "'\\''")}'`;
}

function curlCommand(url, accessKey, body) {
  const format = body.format || schemas[$("endpoint").value].properties.format.default;
  const output = body.response_type === "json" ? "" : ` \\\n  -o ${shellQuote("capture." + (FILE_EXTENSIONS[format] || format))}`;
  return `curl -sS -X POST ${shellQuote(url)} \\\n  -H 'content-type: application/json' \\\n` +
    `  -H ${shellQuote("x-access-key: " + accessKey)} \\\n  -d ${shellQuote(JSON.stringify(body))}${output}`;
}

// ---- The same capture with the official SDKs (names and gaps: sdks.json). ----

const SOURCES = ["url", "html", "markdown"];

function pythonLiteral(value) {
  if (typeof value === "boolean") return value ? "True" : "False";
  if (Array.isArray(value)) return `[${value.map(pythonLiteral).join(", ")}]`;
  return typeof value === "number" ? String(value) : JSON.stringify(value);
}

function camelCase(name) {
  return name.replace(/_([a-z0-9])/g, (_, letter) => letter.toUpperCase());
}

// The builder calls for `options` in one SDK, and the parameters it has no method for.
function builderCalls(sdk, endpoint, options, method, literal) {
  const missing = new Set((sdk.missing || {})[endpoint] || []);
  const calls = [], left = [];
  for (const [name, value] of options) {
    if (SOURCES.includes(name)) continue;
    if (missing.has(name)) left.push(name);
    else calls.push(`.${sdk.methods[name] || method(name)}(${literal(value)})`);
  }
  return { calls, left };
}

function sourceOf(options) {
  return options.find(([name]) => SOURCES.includes(name)) || ["url", ""];
}

function outputName(endpoint, body) {
  const format = body.format || schemas[endpoint].properties.format.default;
  return body.response_type === "json" ? "capture.json" : "capture." + (FILE_EXTENSIONS[format] || format);
}

function pythonCode(url, accessKey, endpoint, options, body) {
  if (endpoint !== "take") return "# The Python SDK has no /animate builder; use the Node SDK or curl.";
  const [source, value] = sourceOf(options);
  const { calls, left } = builderCalls(sdks.python, endpoint, options, (name) => name, pythonLiteral);
  const lines = [`# pip install ${sdks.python.package}`, "import os", "", "import screenshotone.sdk",
    "from screenshotone import Client, TakeOptions", "",
    `screenshotone.sdk.API_BASE_URL = ${JSON.stringify(url.replace(/\/take$/, ""))}`,
    `client = Client(${JSON.stringify(accessKey)}, os.environ["SCREENSHOT_SIGNING_KEY"])`,
    `options = TakeOptions.${source}(${pythonLiteral(value)})${calls.map((call) => `\\\n    ${call}`).join("")}`];
  if (left.length) lines.push(`# Not in this SDK version (send them with curl): ${left.join(", ")}`);
  lines.push(`with open(${JSON.stringify(outputName(endpoint, body))}, "wb") as output:`,
    "    output.write(client.take(options).read())");
  return lines.join("\n");
}

function nodeCode(url, accessKey, endpoint, options, body) {
  const [source, value] = sourceOf(options);
  const { calls, left } = builderCalls(sdks.node, endpoint, options, camelCase, JSON.stringify);
  const builder = endpoint === "animate" ? "AnimateOptions" : "TakeOptions";
  const lines = [`// npm install ${sdks.node.package}; save as capture.mjs, run: node capture.mjs`,
    'import { writeFileSync } from "node:fs";', 'import screenshotone from "screenshotone-api-sdk";', "",
    `const client = new screenshotone.Client(${JSON.stringify(accessKey)}, process.env.SCREENSHOT_SIGNING_KEY,`,
    `  ${JSON.stringify(url.replace(/\/(take|animate)$/, ""))});`,
    `const options = screenshotone.${builder}.${source}(${JSON.stringify(value)})${calls.map((call) => `\n  ${call}`).join("")};`];
  if (left.length) lines.push(`// Not in this SDK version (send them with curl): ${left.join(", ")}`);
  lines.push(`const blob = await client.${endpoint}(options);`,
    `writeFileSync(${JSON.stringify(outputName(endpoint, body))}, Buffer.from(await blob.arrayBuffer()));`);
  return lines.join("\n");
}

function signedLink(url, accessKey, options, signingKey) {
  const query = canonicalQuery([["access_key", accessKey], ...textPairs(options)]);
  return `${url}?${query}&signature=${hmacSha256Hex(signingKey, query)}`;
}

function showHeaders(response) {
  const body = $("headers").tBodies[0];
  body.replaceChildren();
  for (const [name, value] of response.headers) {
    if (!name.startsWith("x-service-") && name !== "content-type" && name !== "content-length") continue;
    const row = body.insertRow();
    row.insertCell().textContent = name;
    row.insertCell().textContent = value;
  }
}

async function showResult(response, name) {
  const output = $("output");
  output.replaceChildren();
  const type = (response.headers.get("content-type") || "").split(";")[0];
  if (!response.ok) {
    const text = await response.text();
    let error;
    try { error = JSON.parse(text); } catch { error = { error_code: `HTTP ${response.status}`, error_message: text }; }
    const box = document.createElement("div");
    box.className = "error";
    box.setAttribute("role", "alert");
    const code = document.createElement("p");
    code.className = "error-code";
    code.textContent = `${response.status} ${error.error_code}`;
    const message = document.createElement("p");
    message.textContent = error.error_message || "";
    box.append(code, message);
    if (error.error_details && error.error_details.length) {
      const list = document.createElement("ul");
      for (const detail of error.error_details) {
        const item = document.createElement("li");
        item.innerHTML = "<code></code>: ";
        item.firstChild.textContent = detail.field;
        item.append(detail.message);
        list.append(item);
      }
      box.append(list);
    }
    output.append(box);
    $("status").textContent = `Refused: ${error.error_code}.`;
    $("status").dataset.state = "refused";
    return;
  }
  const seconds = response.headers.get("x-service-rendering-seconds");
  const size = response.headers.get("x-service-size-bytes");
  const reference = response.headers.get("x-service-reference");
  $("status").textContent = `${response.status} ${type}` + (seconds ? `, rendered in ${seconds} s` : "") +
    (size ? `, ${size} bytes` : "") + (reference ? `, reference ${reference}` : "") + ".";
  if (type.startsWith("image/") || type.startsWith("video/") || type === "application/pdf") {
    const url = URL.createObjectURL(await response.blob());
    let element;
    if (type.startsWith("image/")) {
      element = document.createElement("img");
      element.alt = "The captured image";
    } else if (type.startsWith("video/")) {
      element = document.createElement("video");
      element.controls = true;
      element.muted = true;
      element.loop = true;
    } else {
      element = document.createElement("iframe");
      element.title = "The captured PDF";
    }
    element.id = "capture-output";
    element.src = url;
    output.append(element);
    return;
  }
  if (!type.startsWith("text/") && type !== "application/json" && type !== "application/yaml") {
    // A file no page shows (a web archive): offered for download, named as the capture would be saved.
    const link = document.createElement("a");
    const blob = await response.blob();
    link.id = "capture-output";
    link.href = URL.createObjectURL(blob);
    link.download = name;
    link.textContent = `Download ${link.download} (${blob.size} bytes)`;
    output.append(link);
    if (type === "application/wacz") {
      const note = document.createElement("p");
      note.textContent = "A web archive: open it in ReplayWeb.page (replayweb.page), or check it with `screenshot-service verify`.";
      output.append(note);
    }
    return;
  }
  const text = await response.text();
  const pre = document.createElement("pre");
  pre.id = "capture-output";
  try { pre.textContent = type === "application/json" ? JSON.stringify(JSON.parse(text), null, 2) : text; }
  catch { pre.textContent = text; }
  output.append(pre);
}

async function capture(event) {
  event.preventDefault();
  rememberKeys();
  const accessKey = $("access-key").value.trim();
  const signingKey = $("signing-key").value.trim();
  if (!accessKey) {
    $("status").textContent = "Enter your access key first.";
    $("access-key").focus();
    return;
  }
  const url = new URL(ENDPOINTS[$("endpoint").value], location.origin).href;
  const options = chosenOptions();
  const body = requestBody(options, signingKey);
  $("curl").value = curlCommand(url, accessKey, body);
  const endpoint = $("endpoint").value;
  $("python").value = pythonCode(url, accessKey, endpoint, options, body);
  $("node").value = nodeCode(url, accessKey, endpoint, options, body);
  $("signed-link").value = signingKey ? signedLink(url, accessKey, options, signingKey) : "";
  $("status").textContent = "Capturing…";
  $("status").dataset.state = "busy";
  $("capture").disabled = true;
  try {
    const response = await fetch(url, {
      method: "POST", body: JSON.stringify(body),
      headers: { "content-type": "application/json", "x-access-key": accessKey },
    });
    showHeaders(response);
    await showResult(response, outputName(endpoint, body));
    if (response.ok) $("status").dataset.state = "done";
  } catch (error) {
    $("status").textContent = `The request failed: ${error.message}. Is the service running?`;
    $("status").dataset.state = "failed";
  } finally {
    $("capture").disabled = false;
    const shown = $("result").getBoundingClientRect();
    if (shown.top > innerHeight || shown.bottom < 0) $("result").scrollIntoView({ block: "start" });  // phones
  }
}

// ---- Keys: kept only when "remember" is ticked. ----

function rememberKeys() {
  if ($("remember").checked) {
    localStorage.setItem(STORED_KEYS.access, $("access-key").value);
    localStorage.setItem(STORED_KEYS.signing, $("signing-key").value);
  } else {
    localStorage.removeItem(STORED_KEYS.access);
    localStorage.removeItem(STORED_KEYS.signing);
  }
}

function restoreKeys() {
  const access = localStorage.getItem(STORED_KEYS.access);
  if (access === null) return;
  $("access-key").value = access;
  $("signing-key").value = localStorage.getItem(STORED_KEYS.signing) || "";
  $("remember").checked = true;
}

async function start() {
  restoreKeys();
  $("remember").addEventListener("change", rememberKeys);
  $("capture-form").addEventListener("submit", capture);
  $("endpoint").addEventListener("change", () => buildForm($("endpoint").value));
  $("reset").addEventListener("click", () => buildForm($("endpoint").value));
  try {
    const spec = await (await fetch("/openapi.json")).json();
    sdks = await (await fetch("/playground/sdks.json")).json();
    for (const [name, path] of Object.entries(ENDPOINTS)) {
      const body = spec.paths[path].post.requestBody.content["application/json"].schema;
      schemas[name] = spec.components.schemas[body.$ref.split("/").pop()];
    }
    buildForm($("endpoint").value);
    document.body.dataset.ready = "true";
  } catch (error) {
    $("options").textContent = `Could not read the API's schema (/openapi.json): ${error.message}.`;
  }
}

start();
