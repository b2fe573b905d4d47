// Writes the benchmark fixtures of domain/yjs (testdata/bench): Yjs
// documents of about 1 KB and 100 KB grown by three clients typing,
// deleting and formatting a rich text and editing a map, and for each the
// incoming updates a server typically merges into it: one keystroke and a
// pasted paragraph. (The benchmark derives the 1 MB document and the
// whole-state pushes from these.)
//
// manifest.json records the SHA-256 of the reference's merge of each pair.
//
//   node fixtures.mjs <dir>
import * as Y from 'yjs'
import { writeFileSync, mkdirSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { createHash } from 'node:crypto'

const dir = process.argv[2]
mkdirSync(dir, { recursive: true })
let state = 7
const rand = () => {
  state = (state + 0x6d2b79f5) >>> 0
  let t = state
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const int = (n) => Math.floor(rand() * n)
const words = 'the quick brown fox jumps over a lazy dog while seven merry sailors sing of distant harbours'.split(' ')

const grow = (target) => {
  const docs = [1, 2, 3].map((id) => { const d = new Y.Doc(); d.clientID = 1000 + id; return d })
  const sync = () => {
    for (const a of docs) for (const b of docs) if (a !== b) Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)))
  }
  let round = 0
  while (Y.encodeStateAsUpdate(docs[0]).length < target) {
    const d = docs[int(3)]
    const t = d.getText('body')
    // Type a few words at a cursor, one keystroke per transaction.
    let pos = int(t.length + 1)
    const n = 1 + int(4)
    for (let k = 0; k < n; k++) {
      for (const ch of words[int(words.length)] + ' ') t.insert(pos++, ch)
    }
    if (t.length > 20 && rand() < 0.3) t.delete(int(t.length - 10), 1 + int(8))
    if (t.length > 20 && rand() < 0.2) t.format(int(t.length - 10), 1 + int(8), { bold: rand() < 0.7 ? true : null })
    if (rand() < 0.1) d.getMap('meta').set('title', 'draft ' + round)
    if (++round % 5 === 0) sync()
  }
  sync()
  return docs
}

const write = (name, bytes) => {
  writeFileSync(`${dir}/${name}.bin.gz`, gzipSync(bytes, { level: 9 }))
  process.stderr.write(`${name}: ${bytes.length} bytes\n`)
}

const manifest = {}
const reference = (stored, incoming) => {
  const d = new Y.Doc()
  Y.applyUpdate(d, stored)
  Y.applyUpdate(d, incoming)
  return createHash('sha256').update(Y.encodeStateAsUpdate(d)).digest('hex')
}

for (const [name, target] of [['1k', 1 << 10], ['100k', 100 << 10]]) {
  const docs = grow(target)
  const stored = Y.encodeStateAsUpdate(docs[0])
  const incoming = {}
  const c = docs[1]
  c.on('update', (u) => { incoming.keystroke = u })
  const t = c.getText('body')
  t.insert(int(t.length), 'x')
  const p = docs[2]
  p.on('update', (u) => { incoming.paste = u })
  const para = []
  for (let k = 0; k < 150; k++) para.push(words[int(words.length)])
  p.getText('body').insert(int(p.getText('body').length), para.join(' ') + '\n')
  write(`${name}-stored`, stored)
  for (const [k, u] of Object.entries(incoming)) {
    write(`${name}-${k}`, u)
    manifest[`${name}-${k}`] = reference(stored, u)
  }
}
writeFileSync(`${dir}/manifest.json`, JSON.stringify(manifest, null, 1) + '\n')
