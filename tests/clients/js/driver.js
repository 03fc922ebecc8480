// kafkajs driver for Kafkite's client matrix. JSON lines on stdout.
//   node driver.js admin BS create TOPIC PARTS RF | list | describe TOPIC | delete TOPIC
//   node driver.js produce BS TOPIC COUNT COMPRESSION(none|gzip)
//   node driver.js consume BS TOPIC COUNT
//   node driver.js group BS TOPIC GROUP
const path = require('path');
const { Kafka, CompressionTypes, logLevel } = require(path.join(process.env.KAFKITE_JS || __dirname, 'node_modules', 'kafkajs'));

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [cmd, bs, ...args] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'kafkite-kafkajs', brokers: bs.split(','), logLevel: logLevel.NOTHING,
  retry: { retries: 10, initialRetryTime: 100 } });

async function admin() {
  const a = kafka.admin();
  await a.connect();
  try {
    const [sub, topic] = args;
    if (sub === 'create') {
      try {
        const ok = await a.createTopics({ topics: [{ topic, numPartitions: +args[2], replicationFactor: +args[3] }], waitForLeaders: true });
        out({ ok });
      } catch (e) { out({ error: e.type || e.name, message: e.message }); }
    } else if (sub === 'list') {
      out({ topics: (await a.listTopics()).sort() });
    } else if (sub === 'describe') {
      const md = await a.fetchTopicMetadata({ topics: [topic] });
      const cfg = await a.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false });
      const configs = {};
      for (const e of cfg.resources[0].configEntries) configs[e.configName] = e.configValue;
      out({ name: md.topics[0].name, partitions: md.topics[0].partitions.map((p) => ({ partition: p.partitionId, leader: p.leader })), configs });
    } else if (sub === 'delete') {
      try { await a.deleteTopics({ topics: [topic] }); out({ ok: true }); } catch (e) { out({ error: e.type || e.name, message: e.message }); }
    }
  } finally { await a.disconnect(); }
}

async function produce() {
  const [topic, count, compression] = args;
  const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  const n = +count;
  const codec = compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
  let acked = 0;
  for (let start = 0; start < n; start += 500) {
    const messages = [];
    for (let i = start; i < Math.min(n, start + 500); i++) {
      messages.push({ key: `js-${i % 97}`, value: `value-${i}-` + 'x'.repeat(i % 50), headers: { h: String(i), src: 'js' } });
    }
    const res = await p.send({ topic, acks: -1, compression: codec, messages });
    acked += messages.length;
  }
  await p.disconnect();
  out({ acked });
}

async function consume() {
  const [topic, count] = args;
  const n = +count;
  const c = kafka.consumer({ groupId: `kafkite-assign-${process.pid}-${Date.now()}` });
  await c.connect();
  await c.subscribe({ topics: [topic], fromBeginning: true });
  let got = 0;
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 60000);
    c.run({ eachMessage: async ({ partition, message }) => {
      const headers = Object.entries(message.headers || {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]);
      out({ p: partition, o: +message.offset, ts: +message.timestamp, k: message.key ? message.key.toString('base64') : null,
            v: message.value ? message.value.toString('base64') : null, h: headers });
      if (++got >= n) { clearTimeout(timer); resolve(); }
    } });
  });
  await c.disconnect();
}

async function group() {
  const [topic, groupId] = args;
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
    process.exit(0);
  });
  await c.run({ autoCommit: false, eachBatch: async ({ batch, resolveOffset, heartbeat, commitOffsetsIfNecessary }) => {
    for (const m of batch.messages) { out({ rec: [batch.partition, +m.offset] }); n++; resolveOffset(m.offset); }
    await c.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: String(+batch.lastOffset() + 1) }]);
    out({ commit: n });
    await heartbeat();
  } });
}

({ admin, produce, consume, group })[cmd]().catch((e) => { out({ error: e.name, message: e.message }); process.exit(1); });
