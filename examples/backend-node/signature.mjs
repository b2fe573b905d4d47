// Checking that a callout comes from syncd (docs/callout.md, "Signing").
//
// syncd signs every callout with each key of its --callout-key-file:
//
//   Syncd-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<t>.<body>")>[,v1=…]
//
// The backend holds the same file. It checks the raw body before parsing
// it: the timestamp close to its own clock (so an old request cannot be
// replayed), and one v1 entry made by one of its keys.

import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";

// MAX_SKEW_SECONDS is how far the timestamp may be from this clock.
export const MAX_SKEW_SECONDS = 300;

// MIN_KEY_BYTES is the shortest key syncd accepts.
const MIN_KEY_BYTES = 32;

// MAX_SIGNATURES bounds the entries read from one header.
const MAX_SIGNATURES = 16;

// readKeyFile reads a key file the way syncd does: one key per line (the
// line's bytes, a trailing CR dropped), blank lines and "#" comments
// skipped, at least 32 bytes each.
export function readKeyFile(path) {
  const keys = [];
  for (let line of readFileSync(path, "utf8").split("\n")) {
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line === "" || line.startsWith("#")) continue;
    const key = Buffer.from(line, "utf8");
    if (key.length < MIN_KEY_BYTES) {
      throw new Error(`${path}: key ${keys.length + 1} has ${key.length} bytes, want at least ${MIN_KEY_BYTES}`);
    }
    keys.push(key);
  }
  if (keys.length === 0) throw new Error(`${path}: no key`);
  return keys;
}

// verify returns null when header signs rawBody (a Buffer) under one of
// keys at a time within MAX_SKEW_SECONDS of nowSec, else the reason it
// does not.
export function verify(header, rawBody, keys, nowSec = Date.now() / 1000) {
  let t;
  const sigs = [];
  for (const part of (header ?? "").split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) return "malformed signature header";
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (k === "t") {
      if (t !== undefined) return "malformed signature header";
      t = v;
    } else if (k === "v1") {
      if (!/^[0-9a-f]{64}$/i.test(v) || sigs.length === MAX_SIGNATURES) return "malformed signature header";
      sigs.push(Buffer.from(v, "hex"));
    }
    // Entries of other schemes are skipped: a later scheme may ride beside v1.
  }
  if (t === undefined || !/^[0-9]+$/.test(t) || sigs.length === 0) return "malformed signature header";
  if (Math.abs(nowSec - Number(t)) > MAX_SKEW_SECONDS) return "signature timestamp too far from this clock";
  for (const key of keys) {
    const want = createHmac("sha256", key).update(`${t}.`).update(rawBody).digest();
    if (sigs.some((s) => timingSafeEqual(s, want))) return null;
  }
  return "no signature matches a key";
}
