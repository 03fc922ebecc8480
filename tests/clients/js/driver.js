// kafkajs driver for Kafkite's client tests. JSON objects on stdout, one a line. Modules come from
// $KAFKITE_JS/node_modules (KAFKITE_JS defaults to this file's folder); see .ci/install-clients.sh.
// Errors: {"error": "<kafkajs error type or name>", "message": "..."}; broker-side admin errors exit 0,
// others exit 1 (usage: 2). Bytes are base64.
//
//   admin-create   BS TOPIC PARTITIONS RF [k=v ...]  -> {"ok":true}  ({"ok":false}: kafkajs says it already exists)
//   admin-list     BS                                -> {"topics":[sorted names]}
//   admin-describe BS TOPIC                          -> {"name","partitions":[{"partition","leader","replicas","isr"}],
//                                                        "configs":{name:value}}  (null + "configs_error" on failure)
//   admin-delete   BS TOPIC                          -> {"ok":true}
//   admin-cluster  BS                                -> {"cluster_id","controller","brokers":N,"nodes":[{"id","host","port"}]}
//   admin-groups   BS                                -> {"groups":[{"group","protocol_type"}]}
//   admin-group-offsets BS GROUP TOPIC               -> {"offsets":{"topic:partition":offset}}  (-1: none committed)
//   produce BS TOPIC COUNT [--acks all|1|0|-1] [--compression none|gzip|snappy|lz4|zstd] [--idempotent true|false]
//           [--key-prefix K] [--distinct-keys N] [--null-keys] [--headers] [--value-size N] [--partition P] [--batch N]
//        -> {"acked":N,"errors":N,"first_error":null|"...","partitions":{"<p>":[first,last,count]},"elapsed_ms":N}
//        record i: key K+(i%N) (K default "js-", N 97), value "value-<i>-"+"x"*(i%50) (or --value-size bytes),
//        headers only with --headers: h=<i>, src=js. Partitions are chosen by kafkajs' DefaultPartitioner
//        (Java-compatible murmur2) in the driver so the per-partition offset ranges are exact.
//   consume-assign BS TOPIC EXPECTED [--timeout-ms N]
//        -> {"p","o","ts","k","v","h":[[key,b64]]} a record, then {"consumed":N,"expected":N,"timed_out":bool}
//        (kafkajs has no assign(): a fresh group "kafkite-assign-<pid>-<time>" reading from the beginning)
//   consume-group BS TOPIC GROUP MAX [--timeout-ms N] [--commit] [--from-beginning true|false]
//        -> record lines, then {"consumed":N,"timed_out":bool,"assignment":[partitions],"committed":{"<p>":offset}|null}
//   list-offsets BS TOPIC                             -> {"<p>":{"earliest":N,"latest":N}}
//   offsets-for-times BS TOPIC TS                     -> {"<p>":offset}  (kafkajs gives the high watermark when none)
//   txn-produce BS TOPIC TXNS PER_PARTITION [--transactional-id ID] [--fence none|idle]
//        a transactional producer (idempotent, maxInFlightRequests 1) runs TXNS transactions; transaction t sends
//        PER_PARTITION records to every partition (key "k-<p>-<j>", value "t<t>-p<p>-<j>"), one awaited send a
//        partition, then commits (t even) or aborts (t odd): {"txn":t,"result":"commit"|"abort","partitions":
//        {"<p>":[first,last,count]}}. --fence idle: then a second producer with the same transactionalId connects
//        and begins a transaction (kafkajs sends the transactional InitProducerId at a
//        producer's first transaction(), not at connect()), then the first runs one more transaction ("fenced-p0" to partition 0, commit):
//        {"fence":"idle","error":null|"<kafkajs error type>"}, then the second commits "after-fence-p<p>" to every
//        partition: {"after_fence":"commit"}. Last line {"txns":N,"committed":N,"aborted":N,"elapsed_ms":N}.
//   txn-ctp BS INPUT OUTPUT GROUP TRANSACTIONAL_ID EXPECTED [--timeout-ms N]
//        consume-transform-produce: a read_committed group consumer of INPUT (from the beginning, eachBatch, no
//        auto commit) and a transactional producer; each batch is one transaction: its records to the same
//        partition of OUTPUT (same key, value "out:" + value), transaction.sendOffsets() of the batch's next offset
//        for GROUP, commit: {"txn":i,"records":N}. Ends after EXPECTED records: {"txns":N,"records":N,"timed_out":bool}.
// Extra client settings (TLS, SASL): $KAFKITE_JS_CONFIG, a JSON object merged into `new Kafka({...})`.
// Legacy forms kept for existing tests: `admin BS create|list|describe|delete ...`, `produce BS TOPIC COUNT CODEC`
// (headers on), `consume BS TOPIC COUNT` (timeout 60 s), `group BS TOPIC GROUP` (runs until SIGTERM:
// {"rec":[p,o]}, {"commit":n}, {"commit_failed":n,"error":type} when a commit is refused, {"error":type,...}
// when the consumer crashes, {"closed":true}).
'use strict';
const path = require('path');
const { createRequire } = require('module');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const jsDir = process.env.KAFKITE_JS || __dirname;
const req = createRequire(path.join(jsDir, 'node_modules', '.kafkite-driver.js'));
const { Kafka, CompressionTypes, CompressionCodecs, Partitioners, logLevel } = req('kafkajs');

const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP };
try { CompressionCodecs[CompressionTypes.Snappy] = req('kafkajs-snappy'); codecs.snappy = CompressionTypes.Snappy; } catch (e) { /* optional */ }
try { const LZ4 = req('kafkajs-lz4'); CompressionCodecs[CompressionTypes.LZ4] = new LZ4().codec; codecs.lz4 = CompressionTypes.LZ4; } catch (e) { /* optional */ }
try {
  const zstd = req('@mongodb-js/zstd');
  CompressionCodecs[CompressionTypes.ZSTD] = () => ({
    compress: async (encoder) => zstd.compress(encoder.buffer, 3),
    decompress: async (buffer) => zstd.decompress(buffer),
  });
  codecs.zstd = CompressionTypes.ZSTD;
} catch (e) { /* optional */ }

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
// process.exit() drops stdout still queued for a pipe: exit once everything written so far is flushed
const exit = (code) => { process.exitCode = code; process.stdout.write('', () => process.exit(code)); };
const errType = (e) => (e && (e.type || (e.errors && e.errors[0] && (e.errors[0].type || e.errors[0].name)) || e.name)) || String(e);
const errOut = (e) => out({ error: errType(e), message: e && e.message });

class Usage extends Error { constructor(m) { super(m); this.name = 'Usage'; } }

function parseArgs(argv) {
  const pos = [];
  const opt = {};
  const bool = new Set(['--headers', '--no-headers', '--commit', '--null-keys']);
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i];
    if (s.startsWith('--') && s.length > 2) {
      const eq = s.indexOf('=');
      if (eq > 0) opt[s.slice(0, eq)] = s.slice(eq + 1);
      else if (bool.has(s)) opt[s] = 'true';
      else if (i + 1 < argv.length) opt[s] = argv[++i];
      else throw new Usage(`missing value for ${s}`);
    } else pos.push(s);
  }
  return { pos, opt, flag: (k) => opt[k] === 'true', need: (i) => { if (i >= pos.length) throw new Usage(`missing argument ${i + 1}`); return pos[i]; } };
}

function client(bs) {
  // $KAFKITE_JS_CONFIG: JSON merged into the Kafka config (e.g. {"ssl": {"ca": [pem]}, "sasl": {...}})
  const extra = process.env.KAFKITE_JS_CONFIG ? JSON.parse(process.env.KAFKITE_JS_CONFIG) : {};
  return new Kafka({ clientId: 'kafkite-kafkajs', brokers: bs.split(','), logLevel: logLevel.NOTHING,
    connectionTimeout: 5000, requestTimeout: 30000, retry: { retries: 10, initialRetryTime: 100 }, ...extra });
}

const b64 = (b) => (b == null ? null : Buffer.from(b).toString('base64'));
function recordOut(partition, m) {
  const h = [];
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const x of Array.isArray(v) ? v : [v]) h.push([k, b64(x)]);
  }
  out({ p: partition, o: +m.offset, ts: +m.timestamp, k: b64(m.key), v: b64(m.value), h });
}

// ---- admin ---------------------------------------------------------------------------------------
async function admin(kafka, sub, a) {
  const adm = kafka.admin();
  await adm.connect();
  try {
    try {
      if (sub === 'create') {
        const topic = a.need(0);
        const configEntries = a.pos.slice(3).map((kv) => { const i = kv.indexOf('='); return { name: kv.slice(0, i), value: kv.slice(i + 1) }; });
        const ok = await adm.createTopics({ topics: [{ topic, numPartitions: +a.need(1), replicationFactor: +a.need(2), configEntries }], waitForLeaders: true });
        out({ ok });
      } else if (sub === 'list') {
        out({ topics: (await adm.listTopics()).sort() });
      } else if (sub === 'describe') {
        const topic = a.need(0);
        const md = await adm.fetchTopicMetadata({ topics: [topic] });
        const t = md.topics[0];
        const res = { name: t.name,
          partitions: t.partitions.map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr }))
            .sort((x, y) => x.partition - y.partition),
          configs: null };
        try {
          const cfg = await adm.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false });
          res.configs = {};
          for (const e of cfg.resources[0].configEntries) res.configs[e.configName] = e.configValue;
        } catch (e) { res.configs_error = `${errType(e)}: ${e.message}`; }
        out(res);
      } else if (sub === 'delete') {
        await adm.deleteTopics({ topics: [a.need(0)] });
        out({ ok: true });
      } else if (sub === 'cluster') {
        const c = await adm.describeCluster();
        out({ cluster_id: c.clusterId, controller: c.controller, brokers: c.brokers.length,
          nodes: c.brokers.map((b) => ({ id: b.nodeId, host: b.host, port: b.port })) });
      } else if (sub === 'groups') {
        const g = await adm.listGroups();
        out({ groups: g.groups.map((x) => ({ group: x.groupId, protocol_type: x.protocolType })).sort((x, y) => (x.group < y.group ? -1 : 1)) });
      } else if (sub === 'group-offsets') {
        const res = await adm.fetchOffsets({ groupId: a.need(0), topics: [a.need(1)] });
        const offsets = {};
        for (const t of res) for (const p of t.partitions.sort((x, y) => x.partition - y.partition)) offsets[`${t.topic}:${p.partition}`] = +p.offset;
        out({ offsets });
      } else throw new Usage(`unknown admin command ${sub}`);
    } catch (e) {
      if (e instanceof Usage) throw e;
      errOut(e);
    }
  } finally { await adm.disconnect(); }
}

// ---- produce -------------------------------------------------------------------------------------
async function produce(kafka, a) {
  const topic = a.need(0);
  const n = +a.need(1);
  const acksOpt = a.opt['--acks'] || 'all';
  const acks = acksOpt === 'all' ? -1 : +acksOpt;
  const compression = a.opt['--compression'] || 'none';
  if (!(compression in codecs)) throw new Usage(`compression ${compression} not available in this kafkajs install`);
  const idempotent = (a.opt['--idempotent'] || (acks === -1 ? 'true' : 'false')) === 'true';
  const keyPrefix = a.opt['--key-prefix'] !== undefined ? a.opt['--key-prefix'] : 'js-';
  const distinct = +(a.opt['--distinct-keys'] || 97);
  const valueSize = a.opt['--value-size'] !== undefined ? +a.opt['--value-size'] : -1;
  const headers = a.flag('--headers') && !a.flag('--no-headers');
  const batch = +(a.opt['--batch'] || 500);
  const fixedPartition = a.opt['--partition'] !== undefined ? +a.opt['--partition'] : null;

  let partitionMetadata = null;
  if (fixedPartition === null) {
    const adm = kafka.admin();
    await adm.connect();
    try {
      const deadline = Date.now() + 30000;
      for (;;) {
        try {
          partitionMetadata = (await adm.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions;
          if (partitionMetadata.length) break;
        } catch (e) { if (Date.now() > deadline) throw e; }
        if (Date.now() > deadline) throw new Error(`no partitions for ${topic}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally { await adm.disconnect(); }
  }
  const partitioner = Partitioners.DefaultPartitioner();

  const p = kafka.producer({ idempotent, maxInFlightRequests: idempotent ? 1 : 5, allowAutoTopicCreation: true });
  await p.connect();
  const ranges = {};
  let acked = 0;
  let errors = 0;
  let firstError = null;
  const t0 = Date.now();
  for (let start = 0; start < n; start += batch) {
    const messages = [];
    const perPartition = {};
    for (let i = start; i < Math.min(n, start + batch); i++) {
      const m = { key: a.flag('--null-keys') ? null : `${keyPrefix}${i % distinct}` };
      if (valueSize >= 0) {
        const v = Buffer.alloc(valueSize, 'x');
        Buffer.from(`value-${i}-`).copy(v, 0, 0, Math.min(valueSize, `value-${i}-`.length));
        m.value = v;
      } else m.value = `value-${i}-` + 'x'.repeat(i % 50);
      if (headers) m.headers = { h: String(i), src: 'js' };
      m.partition = fixedPartition !== null ? fixedPartition : partitioner({ topic, partitionMetadata, message: m });
      perPartition[m.partition] = (perPartition[m.partition] || 0) + 1;
      messages.push(m);
    }
    try {
      const res = await p.send({ topic, acks, compression: codecs[compression], messages });
      for (const r of res) {
        const cnt = perPartition[r.partition] || 0;
        acked += cnt;
        const base = r.baseOffset === undefined ? -1 : +r.baseOffset;
        const rg = ranges[r.partition] || (ranges[r.partition] = [Number.MAX_SAFE_INTEGER, -1, 0]);
        if (base >= 0) { rg[0] = Math.min(rg[0], base); rg[1] = Math.max(rg[1], base + cnt - 1); }
        rg[2] += cnt;
      }
      if (acks === 0) acked = Math.min(n, start + messages.length);
    } catch (e) {
      errors += messages.length;
      if (firstError === null) firstError = `${errType(e)}: ${e.message}`;
    }
  }
  await p.disconnect();
  const partitions = {};
  for (const k of Object.keys(ranges).sort((x, y) => x - y)) partitions[k] = ranges[k][1] < 0 ? [-1, -1, ranges[k][2]] : ranges[k];
  out({ acked, errors, first_error: firstError, partitions, elapsed_ms: Date.now() - t0 });
}

// ---- consume -------------------------------------------------------------------------------------
// Runs a group consumer until `want` records were reported or the deadline; returns what it saw.
async function consumeWith(kafka, { topic, groupId, want, timeoutMs, fromBeginning, commit }) {
  const c = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500, rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200, allowAutoTopicCreation: false });
  let assignment = [];
  c.on(c.events.GROUP_JOIN, (e) => { assignment = (e.payload.memberAssignment[topic] || []).slice().sort((x, y) => x - y); });
  await c.connect();
  await c.subscribe({ topics: [topic], fromBeginning });
  let got = 0;
  const next = {};  // partition -> offset after the last reported record
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const timer = setTimeout(() => done(true), timeoutMs);
  await c.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning }) => {
    for (const m of batch.messages) {
      if (got >= want || !isRunning()) break;
      recordOut(batch.partition, m);
      got++;
      next[batch.partition] = +m.offset + 1;
      resolveOffset(m.offset);
    }
    if (got >= want) { clearTimeout(timer); done(false); }
    await heartbeat();
  } });
  if (want <= 0) { clearTimeout(timer); done(false); }
  const timedOut = await finished;
  let committed = null;
  if (commit) {
    const offs = Object.keys(next).map((p) => ({ topic, partition: +p, offset: String(next[p]) }));
    if (offs.length) await c.commitOffsets(offs);
  }
  await c.disconnect();
  if (commit) {
    const adm = kafka.admin();
    await adm.connect();
    try {
      committed = {};
      const res = await adm.fetchOffsets({ groupId, topics: [topic] });
      for (const p of res[0].partitions.sort((x, y) => x.partition - y.partition)) {
        if (assignment.includes(p.partition) || next[p.partition] !== undefined) committed[p.partition] = +p.offset;
      }
    } finally { await adm.disconnect(); }
  }
  return { got, timedOut, assignment, committed };
}

async function consumeAssign(kafka, a) {
  const topic = a.need(0);
  const want = +a.need(1);
  const r = await consumeWith(kafka, { topic, groupId: `kafkite-assign-${process.pid}-${Date.now()}`, want,
    timeoutMs: +(a.opt['--timeout-ms'] || 30000), fromBeginning: true, commit: false });
  out({ consumed: r.got, expected: want, timed_out: r.timedOut });
}

async function consumeGroup(kafka, a) {
  const topic = a.need(0);
  const groupId = a.need(1);
  const want = +a.need(2);
  const r = await consumeWith(kafka, { topic, groupId, want, timeoutMs: +(a.opt['--timeout-ms'] || 30000),
    fromBeginning: (a.opt['--from-beginning'] || 'true') === 'true', commit: a.flag('--commit') });
  out({ consumed: r.got, timed_out: r.timedOut, assignment: r.assignment, committed: r.committed });
}

// legacy long-running group member for tests/clients/group_scenario.py: stops on SIGTERM
async function group(kafka, a) {
  const [topic, groupId] = [a.need(0), a.need(1)];
  const c = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 300 });
  await c.connect();
  await c.subscribe({ topics: [topic], fromBeginning: true });
  let n = 0;
  let stopping = false;
  process.on('SIGTERM', async () => {
    if (stopping) return;
    stopping = true;
    await c.disconnect();
    out({ closed: true });
    exit(0);
  });
  // a crash of the consumer (kafkajs restarts it on retriable ones) is reported: the scenario allows none
  c.on(c.events.CRASH, (e) => out({ error: errType(e.payload.error), message: e.payload.error && e.payload.error.message,
    restart: e.payload.restart }));
  await c.run({ autoCommit: false, eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
    for (const m of batch.messages) { out({ rec: [batch.partition, +m.offset] }); n++; resolveOffset(m.offset); }
    try {
      await c.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: String(+batch.lastOffset() + 1) }]);
    } catch (e) {
      // refused (e.g. REBALANCE_IN_PROGRESS): these records may be processed again by the next owner;
      // rethrown so kafkajs handles it as it would (rejoin on a rebalance error)
      out({ commit_failed: n, error: errType(e) });
      throw e;
    }
    out({ commit: n });
    await heartbeat();
  } });
}

async function listOffsets(kafka, a) {
  const adm = kafka.admin();
  await adm.connect();
  try {
    const res = await adm.fetchTopicOffsets(a.need(0));
    const o = {};
    for (const p of res.sort((x, y) => x.partition - y.partition)) o[p.partition] = { earliest: +p.low, latest: +p.high };
    out(o);
  } finally { await adm.disconnect(); }
}

async function offsetsForTimes(kafka, a) {
  const adm = kafka.admin();
  await adm.connect();
  try {
    const res = await adm.fetchTopicOffsetsByTimestamp(a.need(0), +a.need(1));
    const o = {};
    for (const p of res.sort((x, y) => x.partition - y.partition)) o[p.partition] = +p.offset;
    out(o);
  } finally { await adm.disconnect(); }
}

// ---- transactions --------------------------------------------------------------------------------
async function partitionCount(kafka, topic) {
  const adm = kafka.admin();
  await adm.connect();
  try {
    const deadline = Date.now() + 30000;
    for (;;) {
      try {
        const ps = (await adm.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions;
        if (ps.length) return ps.length;
      } catch (e) { if (Date.now() > deadline) throw e; }
      if (Date.now() > deadline) throw new Error(`no partitions for ${topic}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally { await adm.disconnect(); }
}

const txnProducer = (kafka, transactionalId) => kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1,
  allowAutoTopicCreation: false });

async function txnProduce(kafka, a) {
  const topic = a.need(0);
  const txns = +a.need(1);
  const per = +a.need(2);
  const tid = a.opt['--transactional-id'] || 'kafkite-js-txn';
  const fence = a.opt['--fence'] || 'none';
  if (!['none', 'idle'].includes(fence)) throw new Usage('--fence none|idle');
  const nparts = await partitionCount(kafka, topic);
  const t0 = Date.now();
  const p = txnProducer(kafka, tid);
  await p.connect();
  let committed = 0;
  let aborted = 0;
  try {
    for (let t = 0; t < txns; t++) {
      const abort = t % 2 === 1;
      const txn = await p.transaction();
      const ranges = {};
      for (let part = 0; part < nparts; part++) {
        const messages = [];
        for (let j = 0; j < per; j++) messages.push({ partition: part, key: `k-${part}-${j}`, value: `t${t}-p${part}-${j}` });
        const res = await txn.send({ topic, acks: -1, messages });
        for (const r of res) {
          const base = +r.baseOffset;
          ranges[r.partition] = [base, base + per - 1, per];
        }
      }
      if (abort) { await txn.abort(); aborted++; } else { await txn.commit(); committed++; }
      out({ txn: t, result: abort ? 'abort' : 'commit', partitions: ranges });
    }
    if (fence === 'idle') {
      const second = txnProducer(kafka, tid);
      await second.connect();
      const txn2 = await second.transaction();  // the transactional InitProducerId: fences the first producer
      let error = null;
      try {
        const txn = await p.transaction();
        try {
          await txn.send({ topic, acks: -1, messages: [{ partition: 0, key: 'fenced', value: 'fenced-p0' }] });
          await txn.commit();
        } catch (e) {
          error = errType(e);
          try { await txn.abort(); } catch (e2) { /* fenced: nothing to abort */ }
        }
      } catch (e) { if (error === null) error = errType(e); }
      out({ fence, error });
      const messages = [];
      for (let part = 0; part < nparts; part++) messages.push({ partition: part, key: 'after', value: `after-fence-p${part}` });
      await txn2.send({ topic, acks: -1, messages });
      await txn2.commit();
      await second.disconnect();
      out({ after_fence: 'commit' });
    }
  } finally { await p.disconnect(); }
  out({ txns, committed, aborted, elapsed_ms: Date.now() - t0 });
}

async function txnCtp(kafka, a) {
  const [input, output, groupId, tid] = [a.need(0), a.need(1), a.need(2), a.need(3)];
  const expected = +a.need(4);
  const timeoutMs = +(a.opt['--timeout-ms'] || 60000);
  const p = txnProducer(kafka, tid);
  await p.connect();
  const c = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500, rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200, readUncommitted: false, allowAutoTopicCreation: false });
  await c.connect();
  await c.subscribe({ topics: [input], fromBeginning: true });
  let records = 0;
  let txns = 0;
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const timer = setTimeout(() => done(true), timeoutMs);
  let failure = null;
  await c.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning }) => {
    if (!batch.messages.length || !isRunning()) return;
    const txn = await p.transaction();
    try {
      await txn.send({ topic: output, acks: -1, messages: batch.messages.map((m) => ({ partition: batch.partition, key: m.key,
        value: Buffer.concat([Buffer.from('out:'), m.value || Buffer.alloc(0)]) })) });
      const next = String(+batch.messages[batch.messages.length - 1].offset + 1);
      await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }] });
      await txn.commit();
    } catch (e) {
      failure = e;
      try { await txn.abort(); } catch (e2) { /* already failed */ }
      clearTimeout(timer);
      done(false);
      return;
    }
    for (const m of batch.messages) resolveOffset(m.offset);
    records += batch.messages.length;
    out({ txn: txns++, records: batch.messages.length });
    await heartbeat();
    if (records >= expected) { clearTimeout(timer); done(false); }
  } });
  const timedOut = await finished;
  await c.disconnect();
  await p.disconnect();
  if (failure) throw failure;
  out({ txns, records, timed_out: timedOut });
}

async function main() {
  let [cmd, bs, ...rest] = process.argv.slice(2);
  if (!cmd || !bs) throw new Usage('usage: node driver.js COMMAND BOOTSTRAP ... (see the head of driver.js)');
  if (cmd === 'admin') { cmd = `admin-${rest[0]}`; rest = rest.slice(1); }
  const a = parseArgs(rest);
  const kafka = client(bs);
  if (cmd.startsWith('admin-')) return admin(kafka, cmd.slice(6), a);
  switch (cmd) {
    case 'produce':
      if (a.pos.length >= 3) {  // legacy: produce BS TOPIC COUNT CODEC
        if (a.opt['--compression'] === undefined) a.opt['--compression'] = a.pos[2];
        if (a.opt['--headers'] === undefined) a.opt['--headers'] = 'true';
      }
      return produce(kafka, a);
    case 'consume': if (a.opt['--timeout-ms'] === undefined) a.opt['--timeout-ms'] = '60000'; return consumeAssign(kafka, a);
    case 'consume-assign': return consumeAssign(kafka, a);
    case 'consume-group': return consumeGroup(kafka, a);
    case 'group': return group(kafka, a);
    case 'list-offsets': return listOffsets(kafka, a);
    case 'offsets-for-times': return offsetsForTimes(kafka, a);
    case 'txn-produce': return txnProduce(kafka, a);
    case 'txn-ctp': return txnCtp(kafka, a);
    default: throw new Usage(`unknown command ${cmd}`);
  }
}

for (const ev of ['unhandledRejection', 'uncaughtException']) {
  process.on(ev, (e) => { out({ error: errType(e), message: `${ev}: ${e && e.message}`, stack: e && e.stack }); exit(1); });
}

main().then(() => { if (process.argv[2] !== 'group') exit(0); })
  .catch((e) => { errOut(e); exit(e instanceof Usage ? 2 : 1); });
