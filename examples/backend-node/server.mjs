#!/usr/bin/env node
// A team's backend for syncd's callouts (docs/callout.md, contract
// version 1), with nothing but Node's standard library. syncd, started
// with --callout-url pointing here, asks it who each request is, what the
// user may see, and whether a write is allowed; rules.mjs answers.
//
//   node server.mjs --listen 127.0.0.1:8790 --key-file callout.key
//
// Every callout must carry a valid signature made with a key of the key
// file (the same file syncd gets as --callout-key-file); SIGHUP reads the
// file again, for a key rotation.
//
// --test-endpoints adds two unsigned routes for the repository's test
// (test/backendnode), never for a deployment: GET /test/reactions lists
// the reaction deliveries received, POST /test/notifier/fail-next?n=N
// makes the next N notifications fail (a simulated outage).

import { createServer } from "node:http";
import { parseArgs } from "node:util";
import * as rules from "./rules.mjs";
import { readKeyFile, verify } from "./signature.mjs";

// CONTRACT_VERSION is the version of docs/callout.md this backend speaks.
const CONTRACT_VERSION = "1";

// MAX_BODY_BYTES bounds a callout body; syncd's are far smaller.
const MAX_BODY_BYTES = 1 << 20;

// IDEMPOTENCY_HEADER carries a reaction's idempotency key,
// percent-encoded (docs/callout.md, reactions).
const IDEMPOTENCY_HEADER = "syncd-idempotency-key";

const { values: opts } = parseArgs({
  options: {
    listen: { type: "string", default: "127.0.0.1:8790" },
    "key-file": { type: "string" },
    "test-endpoints": { type: "boolean", default: false },
  },
});
if (!opts["key-file"]) {
  console.error("--key-file is required: the keys syncd signs its callouts with (its --callout-key-file)");
  process.exit(2);
}
const keyFile = opts["key-file"];
let keys = readKeyFile(keyFile);
process.on("SIGHUP", () => {
  try {
    keys = readKeyFile(keyFile);
    console.log(`reloaded ${keys.length} key(s) from ${keyFile}`);
  } catch (err) {
    console.error(`kept the old keys: ${err.message}`);
  }
});

// route maps a callout path to its handler: (parsed body, request) →
// { status, body }, or null for an unknown path.
function route(path) {
  switch (path) {
    case "/authenticate":
      return rules.authenticate;
    case "/resolve-scopes":
      return rules.resolveScopes;
    case "/validate":
      return rules.validate;
  }
  const [, kind, escaped, rest] = path.split("/");
  const name = decode(escaped);
  if (rest !== undefined || !name) return null;
  if (kind === "commands" && Object.hasOwn(rules.commands, name)) {
    return (body) => rules.commands[name](body);
  }
  if (kind === "reactions" && Object.hasOwn(rules.reactions, name)) {
    return (body, req) => rules.reactions[name](body, idempotencyKey(req));
  }
  return null;
}

function idempotencyKey(req) {
  return decode(req.headers[IDEMPOTENCY_HEADER]);
}

// decode undoes percent-encoding; undefined for a malformed escape.
function decode(s) {
  try {
    return s === undefined ? undefined : decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

// testRoute answers the --test-endpoints routes; false for another path.
function testRoute(req, res, url) {
  if (req.method === "GET" && url.pathname === "/test/reactions") {
    send(res, 200, rules.deliveryLog());
    return true;
  }
  if (req.method === "POST" && url.pathname === "/test/notifier/fail-next") {
    rules.failNextNotifications(Number(url.searchParams.get("n") ?? 1));
    send(res, 204);
    return true;
  }
  return false;
}

// A refused callout (bad signature, wrong version, unparsable body) is
// answered 400: to syncd every status but the contract's is an outage,
// so a misconfigured key fails closed and retryable instead of telling
// clients their credentials are wrong (which a 401 to authenticate would).
function send(res, status, body) {
  if (body === undefined) {
    res.writeHead(status, { "Content-Length": 0 });
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function refuse(req, res, status, why) {
  console.error(`refused ${req.method} ${req.url} (request ${req.headers["syncd-request-id"] ?? "-"}): ${why}`);
  send(res, status, { error: why });
}

async function readBody(req) {
  const chunks = [];
  let n = 0;
  for await (const chunk of req) {
    n += chunk.length;
    if (n > MAX_BODY_BYTES) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function handle(req, res) {
  const url = new URL(req.url, "http://backend");
  const path = url.pathname;
  if (opts["test-endpoints"] && testRoute(req, res, url)) return;
  if (req.method !== "POST") return refuse(req, res, 405, "callouts are POSTs");
  const handler = route(path);
  if (!handler) return refuse(req, res, 404, `no callout at ${path}`);
  const raw = await readBody(req);
  if (raw === null) return refuse(req, res, 413, "body too large");
  // The signature first: nothing unverified is parsed.
  const bad = verify(req.headers["syncd-signature"], raw, keys);
  if (bad) return refuse(req, res, 400, bad);
  if (req.headers["syncd-callout-version"] !== CONTRACT_VERSION) {
    return refuse(req, res, 400, `contract version ${req.headers["syncd-callout-version"]}, want ${CONTRACT_VERSION}`);
  }
  let body;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch {
    return refuse(req, res, 400, "body is not JSON");
  }
  const answer = handler(body, req);
  send(res, answer.status, answer.body);
}

const server = createServer((req, res) => {
  handle(req, res).catch((err) => {
    // A 500 is an outage to syncd: nothing is granted, nothing applied.
    console.error(`callout ${req.url} failed: ${err.stack ?? err}`);
    if (!res.headersSent) send(res, 500, { error: "internal" });
    else res.destroy();
  });
});

// syncd closes its idle connections after 4 s; keeping them longer here
// means the backend never closes one as a callout is being sent on it,
// which syncd would count as an outage.
server.keepAliveTimeout = 120_000;
server.headersTimeout = 125_000;

const sep = opts.listen.lastIndexOf(":");
const host = opts.listen.slice(0, sep).replace(/^\[(.*)\]$/, "$1");
const port = Number(opts.listen.slice(sep + 1));
server.listen(port, host, () => {
  const a = server.address();
  const shown = a.family === "IPv6" ? `[${a.address}]` : a.address;
  console.log(`backend listening on http://${shown}:${a.port} (contract version ${CONTRACT_VERSION}, ${keys.length} key(s))`);
});
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections(); // syncd keeps its connections open
  });
}
