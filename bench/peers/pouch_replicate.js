// One-shot PouchDB replication from a CouchDB-protocol server into a local LevelDB
// database: what a PouchDB client does to clone (fresh directory) or catch up (same one).
// Usage: node pouch_replicate.js SOURCE_URL TARGET_DIR
// Prints one JSON line: {"docs_read", "docs_written", "ms", "doc_count"}.
'use strict';
const path = require('path');
const PouchDB = require(path.join(__dirname, '..', '.node', 'node_modules', 'pouchdb-node'));

async function main() {
  const [source, target] = process.argv.slice(2);
  if (!source || !target) {
    console.error('usage: node pouch_replicate.js SOURCE_URL TARGET_DIR');
    process.exit(2);
  }
  const local = new PouchDB(target);
  const start = process.hrtime.bigint();
  const result = await PouchDB.replicate(source, local, { batch_size: 500, batches_limit: 10 });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const info = await local.info();
  await local.close();
  console.log(JSON.stringify({
    docs_read: result.docs_read, docs_written: result.docs_written, ms,
    doc_count: info.doc_count, ok: result.ok,
  }));
}

main().catch((err) => {
  console.error(String(err && err.stack || err));
  process.exit(1);
});
