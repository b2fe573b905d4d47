// Generates differential cases for syncd's yjs-doc merger: random Yjs
// documents and edit histories, and for each (stored, incoming) pair the
// bytes the reference merger computes (a fresh Y.Doc, applyUpdate stored,
// applyUpdate incoming, encodeStateAsUpdate).
//
//   node gen.mjs <seed> <histories> <out>   one JSON line per case:
//   {"k": kind, "s": base64 | null, "i": base64, "e": base64 | null}
//   ("e": null when the reference fails).
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import { openSync, writeSync, closeSync } from 'node:fs'

const seed = Number(process.argv[2] ?? 1)
const histories = Number(process.argv[3] ?? 100)
// yjs itself logs to stdout, so cases go to a file of their own.
const out = openSync(process.argv[4] ?? '/dev/stdout', 'w')

// mulberry32: a small deterministic PRNG.
let state = seed >>> 0
const rand = () => {
  state = (state + 0x6d2b79f5) >>> 0
  let t = state
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const int = (n) => Math.floor(rand() * n)
const pick = (a) => a[int(a.length)]
const chance = (p) => rand() < p

const reference = (stored, incoming) => {
  const doc = new Y.Doc()
  try {
    if (stored !== null && stored.length > 0) Y.applyUpdate(doc, stored)
    if (incoming.length > 0) Y.applyUpdate(doc, incoming)
    return Y.encodeStateAsUpdate(doc)
  } catch {
    return null
  } finally {
    doc.destroy()
  }
}

const b64 = (u) => (u === null ? null : Buffer.from(u).toString('base64'))
let emitted = 0
const emit = (k, s, i) => {
  const e = reference(s, i)
  writeSync(out, JSON.stringify({ k, s: b64(s), i: b64(i), e: b64(e) }) + '\n')
  emitted++
  return e
}

const words = ['a', 'b', 'hello', ' ', 'xyz', '\n', 'é', '😀', 'ab😀cd', '中文', 'q']
const randText = () => {
  let s = ''
  const n = 1 + int(3)
  for (let i = 0; i < n; i++) s += pick(words)
  return s
}
const attrSets = [
  { bold: true }, { bold: null }, { italic: true }, { color: '#f00' }, { color: 'blue' },
  { link: { href: 'https://x' } }, { bold: true, italic: true }, { size: 12 }, { size: 1.5 },
]
// Values a list accepts; a map also takes bigints.
const listValues = [
  0, 1, -1, 42, 2 ** 31, 2 ** 40, -(2 ** 35), 1.5, 0.1, -0.25, 1e21, NaN, -0,
  'x', '', 'héllo', true, false, null, [undefined, 1],
  { a: 1 }, { b: [1, 2, { c: null }] }, { 2: 'two', 1: 'one', z: 0 }, [1, 'two', [3]],
  new Uint8Array([1, 2, 3]), { bytes: new Uint8Array([9]), big: 7n },
]
const primitives = () => pick(listValues)
const mapValue = () => (chance(0.1) ? pick([12345678901234567890n, -5n, undefined]) : primitives())

const newNested = () => {
  switch (int(6)) {
    case 0: { const m = new Y.Map(); m.set('k', primitives()); return m }
    case 1: { const a = new Y.Array(); a.insert(0, [primitives(), primitives()]); return a }
    case 2: { const t = new Y.Text(); t.insert(0, randText(), chance(0.5) ? pick(attrSets) : undefined); return t }
    case 3: { const e = new Y.XmlElement(pick(['p', 'h1', 'li'])); e.setAttribute('id', 'n' + int(9)); return e }
    case 4: return new Y.XmlText(randText())
    default: return new Y.Map()
  }
}

// nestedTypes lists the live shared types of a document below its roots.
const nestedTypes = (doc) => {
  const out = []
  const walk = (t, depth) => {
    if (depth > 6) return
    if (t instanceof Y.Map || t instanceof Y.XmlElement) {
      const vals = t instanceof Y.Map ? Array.from(t.values()) : []
      for (const v of vals) if (v instanceof Y.AbstractType) { out.push(v); walk(v, depth + 1) }
    }
    if (t instanceof Y.Array || t instanceof Y.XmlFragment) {
      for (const v of t.toArray()) if (v instanceof Y.AbstractType) { out.push(v); walk(v, depth + 1) }
    }
  }
  walk(doc.getMap('m'), 0)
  walk(doc.getArray('a'), 0)
  walk(doc.getXmlFragment('x'), 0)
  return out
}

const editText = (t) => {
  const len = t.length
  switch (int(6)) {
    case 0: case 1:
      t.insert(int(len + 1), randText(), chance(0.4) ? pick(attrSets) : undefined)
      break
    case 2:
      if (len > 0) { const i = int(len); t.delete(i, 1 + int(Math.min(4, len - i))) }
      break
    case 3:
      if (len > 0) { const i = int(len); t.format(i, 1 + int(Math.min(5, len - i)), pick(attrSets)) }
      break
    case 4:
      t.insertEmbed(int(len + 1), pick([{ image: 'i.png' }, { formula: 'x^2' }, 'e']), chance(0.3) ? pick(attrSets) : undefined)
      break
    default:
      if (len > 1) { const i = int(len); t.delete(i, 1) }
  }
}

const editArray = (a) => {
  const len = a.length
  if (len > 0 && chance(0.35)) {
    const i = int(len)
    a.delete(i, 1 + int(Math.min(3, len - i)))
  } else {
    const n = 1 + int(3)
    const items = []
    for (let k = 0; k < n; k++) items.push(chance(0.25) ? newNested() : primitives())
    a.insert(int(len + 1), items)
  }
}

const editMap = (m) => {
  const key = pick(['k1', 'k2', 'k3', 'title', 'nested'])
  if (chance(0.2)) m.delete(key)
  else if (chance(0.05)) m.set(key, new Y.Doc({ meta: chance(0.5) ? { n: int(5) } : undefined, autoLoad: chance(0.5) }))
  else m.set(key, chance(0.3) ? newNested() : mapValue())
}

const editXml = (x) => {
  const len = x.length
  if (len > 0 && chance(0.3)) { x.delete(int(len), 1); return }
  const el = new Y.XmlElement(pick(['p', 'h2']))
  el.insert(0, [new Y.XmlText(randText())])
  if (chance(0.2)) x.insert(int(len + 1), [new Y.XmlHook('hook')])
  else x.insert(int(len + 1), [chance(0.7) ? el : new Y.XmlText(randText())])
}

const editNested = (t) => {
  if (t instanceof Y.XmlText || t instanceof Y.Text) editText(t)
  else if (t instanceof Y.XmlElement) {
    if (chance(0.4)) t.setAttribute(pick(['id', 'class']), 'v' + int(9))
    else if (t.length > 0 && chance(0.3)) t.delete(int(t.length), 1)
    else t.insert(int(t.length + 1), [new Y.XmlText(randText())])
  } else if (t instanceof Y.Array) editArray(t)
  else if (t instanceof Y.Map) editMap(t)
}

const edit = (doc) => {
  const roll = int(10)
  const nested = nestedTypes(doc)
  if (roll < 3) editText(doc.getText('t'))
  else if (roll < 4) editArray(doc.getArray('a'))
  else if (roll < 5) editMap(doc.getMap('m'))
  else if (roll < 6) editXml(doc.getXmlFragment('x'))
  else if (nested.length > 0) editNested(pick(nested))
  else editText(doc.getText('t'))
}

const clientID = () => pick([() => 1 + int(4), () => 1 + int(1000), () => 1 + int(2 ** 32 - 2)])()

// history runs a few clients editing and syncing; it returns the update
// log (each client's transactions) and the clients.
const history = () => {
  const n = 1 + int(4)
  const docs = []
  const log = []
  const used = new Set()
  for (let i = 0; i < n; i++) {
    const d = new Y.Doc()
    let id = clientID()
    while (used.has(id)) id = clientID()
    used.add(id)
    d.clientID = id
    d.on('update', (u, origin) => { if (origin !== 'sync') log.push(u) })
    docs.push(d)
  }
  const rounds = 2 + int(25)
  for (let r = 0; r < rounds; r++) {
    const d = pick(docs)
    const ops = 1 + int(3)
    if (chance(0.5)) d.transact(() => { for (let k = 0; k < ops; k++) edit(d) })
    else for (let k = 0; k < ops; k++) edit(d)
    if (chance(0.4)) {
      const a = pick(docs)
      const b = pick(docs)
      if (a !== b) Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)), 'sync')
    }
  }
  return { docs, log }
}

// richHistory has several clients format and edit the same nested texts
// (an XML text in a paragraph, a text in a map) and a formatted root text
// concurrently: concurrent formatting leaves redundant format items that
// the reference cleans up when it applies remote changes.
const richHistory = () => {
  const n = 2 + int(3)
  const docs = []
  const log = []
  for (let i = 0; i < n; i++) {
    const d = new Y.Doc()
    d.clientID = 10 + i * 4 + int(4)
    d.on('update', (u, origin) => { if (origin !== 'sync') log.push(u) })
    docs.push(d)
  }
  const d0 = docs[0]
  d0.transact(() => {
    const p = new Y.XmlElement('p')
    p.insert(0, [new Y.XmlText(randText())])
    d0.getXmlFragment('x').insert(0, [p])
    const t = new Y.Text()
    t.insert(0, randText(), pick(attrSets))
    d0.getMap('m').set('txt', t)
    d0.getText('t').insert(0, randText(), pick(attrSets))
  })
  for (const d of docs.slice(1)) Y.applyUpdate(d, Y.encodeStateAsUpdate(d0), 'sync')
  const texts = (d) => {
    const out = [d.getText('t')]
    const p = d.getXmlFragment('x').get(0)
    if (p instanceof Y.XmlElement && p.get(0) instanceof Y.XmlText) out.push(p.get(0))
    const t = d.getMap('m').get('txt')
    if (t instanceof Y.Text) out.push(t)
    return out
  }
  const rounds = 4 + int(20)
  for (let r = 0; r < rounds; r++) {
    const d = pick(docs)
    const t = pick(texts(d))
    const len = t.length
    switch (int(6)) {
      case 0: t.insert(int(len + 1), randText(), pick(attrSets)); break
      case 1: case 2: if (len > 0) { const i = int(len); t.format(i, 1 + int(Math.min(6, len - i)), pick(attrSets)) } break
      case 3: if (len > 0) { const i = int(len); t.delete(i, 1 + int(Math.min(3, len - i))) } break
      case 4: t.insert(0, pick(['', 'x', '😀']) || 'y', pick(attrSets)); break
      default: t.format(0, Math.max(1, len), pick(attrSets))
    }
    if (chance(0.3)) {
      const a = pick(docs)
      const b = pick(docs)
      if (a !== b) Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)), 'sync')
    }
  }
  return { docs, log }
}

// shuffleNear moves some updates later and duplicates a few, as an
// unreliable transport would deliver them.
const shuffleNear = (log) => {
  const out = log.slice()
  for (let i = 0; i < out.length; i++) {
    if (chance(0.2)) {
      const j = Math.min(out.length - 1, i + 1 + int(3))
      ;[out[i], out[j]] = [out[j], out[i]]
    }
  }
  for (let i = 0; i < out.length; i++) if (chance(0.1)) out.splice(i + 1, 0, out[i])
  return out
}

// Hand-written updates with content current clients no longer write
// (JSON), raw GC and Skip structs, subdocuments, odd JSON text, and delete
// ranges ahead of the state.
const writeIDLE = (e, client, clock) => { encoding.writeVarUint(e, client); encoding.writeVarUint(e, clock) }
const crafted = () => {
  const client = 500 + int(50)
  const e = encoding.createEncoder()
  const kind = int(5)
  encoding.writeVarUint(e, 1) // one client
  if (kind === 0) {
    // JSON content in a root array, with odd JSON texts.
    encoding.writeVarUint(e, 2)
    encoding.writeVarUint(e, client)
    encoding.writeVarUint(e, 0)
    encoding.writeUint8(e, 2) // JSON, parent by key
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, 'j')
    const vals = pick([['1', 'undefined', '{"b": 1, "a" : [1.0, 2e3]}'], ['"\\ud800x"', '{"__proto__": {"x": 1}, "1": 2}'], ['-0', '1e400', ' true ']])
    encoding.writeVarUint(e, vals.length)
    for (const v of vals) encoding.writeVarString(e, v)
    encoding.writeUint8(e, 2 | 0x80) // JSON after the first
    writeIDLE(e, client, vals.length - 1)
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, '[{"z":1,"a":2}]')
  } else if (kind === 1) {
    // A GC run, a Skip, and a string placed after the gap.
    encoding.writeVarUint(e, 3)
    encoding.writeVarUint(e, client)
    encoding.writeVarUint(e, 0)
    encoding.writeUint8(e, 0)
    encoding.writeVarUint(e, 2 + int(3))
    encoding.writeUint8(e, 10)
    encoding.writeVarUint(e, 1 + int(3))
    encoding.writeUint8(e, 4)
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, 't')
    encoding.writeVarString(e, randText())
  } else if (kind === 2) {
    // Embeds and formats with odd JSON in a root text.
    encoding.writeVarUint(e, 3)
    encoding.writeVarUint(e, client)
    encoding.writeVarUint(e, 0)
    encoding.writeUint8(e, 6)
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, 't')
    encoding.writeVarString(e, 'bold')
    encoding.writeVarString(e, pick(['true', '{"__proto__":1,"v":"\\udc00"}', 'null', ' 1.50 ']))
    encoding.writeUint8(e, 5 | 0x80)
    writeIDLE(e, client, 0)
    encoding.writeVarString(e, pick(['{"image":"x"}', '"\\ud83d\\ude00"', '[1,2]']))
    encoding.writeUint8(e, 6 | 0x80)
    writeIDLE(e, client, 1)
    encoding.writeVarString(e, 'bold')
    encoding.writeVarString(e, 'null')
  } else if (kind === 3) {
    // A subdocument with options and a map entry beside it.
    encoding.writeVarUint(e, 2)
    encoding.writeVarUint(e, client)
    encoding.writeVarUint(e, 0)
    encoding.writeUint8(e, 9 | 0x20)
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, 'm')
    encoding.writeVarString(e, 'sub')
    encoding.writeVarString(e, 'guid-' + int(3))
    encoding.writeAny(e, pick([{}, { gc: 0, autoLoad: 'yes', meta: { a: [1] } }, { meta: null, shouldLoad: true }, 5, 'str']))
    encoding.writeUint8(e, 8 | 0x20)
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, 'm')
    encoding.writeVarString(e, 'k1')
    encoding.writeVarUint(e, 2)
    encoding.writeAny(e, pick([2 ** 40, 1.5, -0, { x: new Uint8Array([1]) }]))
    encoding.writeAny(e, 'v')
  } else {
    // A deleted-content item and delete ranges beyond the state.
    encoding.writeVarUint(e, 2)
    encoding.writeVarUint(e, client)
    encoding.writeVarUint(e, 0)
    encoding.writeUint8(e, 4)
    encoding.writeVarUint(e, 1)
    encoding.writeVarString(e, 'a')
    encoding.writeVarString(e, 'abc')
    encoding.writeUint8(e, 1 | 0x80)
    writeIDLE(e, client, 2)
    encoding.writeVarUint(e, 2)
    encoding.writeVarUint(e, 1)
    encoding.writeVarUint(e, client)
    encoding.writeVarUint(e, 2)
    encoding.writeVarUint(e, 1)
    encoding.writeVarUint(e, 1)
    encoding.writeVarUint(e, 4 + int(3))
    encoding.writeVarUint(e, 2)
    return encoding.toUint8Array(e)
  }
  encoding.writeVarUint(e, 0) // no deletes
  return encoding.toUint8Array(e)
}

const mutate = (u) => {
  const b = Uint8Array.from(u)
  if (b.length === 0) return b
  switch (int(3)) {
    case 0: return b.subarray(0, int(b.length))
    case 1: b[int(b.length)] ^= 1 << int(8); return b
    default: b[int(b.length)] = int(256); return b
  }
}

for (let h = 0; h < histories; h++) {
  const { docs, log } = h % 3 === 2 ? richHistory() : history()
  // A server's chain of merges over an unreliable delivery of the log.
  let stored = chance(0.2) ? null : (chance(0.5) ? new Uint8Array(0) : null)
  for (const u of shuffleNear(log)) {
    const out = emit('chain', stored, u)
    if (out !== null) stored = out
  }
  // Clients pushing their whole state, as the column helpers do.
  for (const d of docs) {
    const out = emit('state', stored, Y.encodeStateAsUpdate(d))
    if (out !== null) stored = out
  }
  // Random pairs: a merged subset against one update.
  for (let k = 0; k < 3 && log.length > 0; k++) {
    const subset = log.filter(() => chance(0.5))
    const s = subset.length > 0 ? Y.mergeUpdates(subset) : null
    emit('pair', s, pick(log))
  }
  if (chance(0.3)) emit('crafted', stored, crafted())
  if (chance(0.3)) emit('crafted-first', null, crafted())
  if (chance(0.15)) emit('empty', stored, new Uint8Array(0))
  if (chance(0.25) && log.length > 0) emit('mutated', stored, mutate(pick(log)))
  for (const d of docs) d.destroy()
}
closeSync(out)
process.stderr.write(`emitted ${emitted} cases\n`)
