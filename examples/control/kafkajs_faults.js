// Kafkite's control plane from Node (kafkajs + fetch): a produce error injected three times (kafkajs retries and
// delivers; the request log shows the three failed Produce requests and the one served), then the partition's
// leader moved under the running producer (its next send gets NOT_LEADER_OR_FOLLOWER from the old leader, kafkajs
// refreshes its metadata and delivers to the new one), and a consumer reads every record once.
//
//   kafkite serve --in-memory --brokers 3 --port 0 --control-port 0   # prints bootstrap=... control=http://...
//   BOOTSTRAP=127.0.0.1:P1,... CONTROL_URL=http://127.0.0.1:C node examples/control/kafkajs_faults.js
//
// kafkajs comes from $KAFKITE_JS/node_modules when set (the test tools), else the usual module path.
// Prints "OK" and exits 0 when every check holds; else the failed assertion and exit 1.
'use strict';
const assert = require('assert');
const path = require('path');
const { createRequire } = require('module');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const load = process.env.KAFKITE_JS ? createRequire(path.join(process.env.KAFKITE_JS, 'node_modules', '.x.js')) : require;
const { Kafka, logLevel } = load('kafkajs');

const BOOTSTRAP = process.env.BOOTSTRAP;
const CONTROL_URL = process.env.CONTROL_URL;
const TOPIC = process.env.TOPIC || `control-js-${process.pid}`;

// one control request: the JSON answer, or an Error with the control plane's message
async function control(method, route, body) {
  const resp = await fetch(CONTROL_URL + route, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await resp.json();
  if (!resp.ok) throw new Error(`${method} ${route}: ${resp.status} ${json.error}`);
  return json;
}

const partition = async () => (await control('GET', `/v1/partitions?topic=${TOPIC}`)).partitions[0];
const requests = async (api) => (await control('GET', `/v1/requests?api=${api}`)).requests
  .filter((r) => r.client_id === 'js-example');

async function until(what, check) {
  const deadline = Date.now() + 30000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main() {
  const kafka = new Kafka({ clientId: 'js-example', brokers: BOOTSTRAP.split(','), logLevel: logLevel.NOTHING,
                            retry: { initialRetryTime: 50, retries: 8 } });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 1, replicationFactor: 3 }], waitForLeaders: true });
  await admin.disconnect();
  await until('a full ISR', async () => (await partition()).isr.length === 3);
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic: TOPIC, acks: -1, messages: [{ value: 'first' }] });

  // 1. NOT_LEADER_OR_FOLLOWER three times: kafkajs retries, the fourth Produce is served
  await control('DELETE', '/v1/requests');
  await control('POST', '/v1/errors', { api: 'Produce', error: 'NOT_LEADER_OR_FOLLOWER', count: 3 });
  await producer.send({ topic: TOPIC, acks: -1, messages: [{ value: 'second' }] });
  const errors = (await requests('Produce')).map((r) => r.error);
  assert.deepStrictEqual(errors, ['NOT_LEADER_OR_FOLLOWER', 'NOT_LEADER_OR_FOLLOWER', 'NOT_LEADER_OR_FOLLOWER', null]);
  assert.ok((await requests('Metadata')).length >= 1, 'kafkajs refreshed its metadata');
  console.log('produce error: kafkajs delivered after 3 x NOT_LEADER_OR_FOLLOWER');

  // 2. the leader moved under the running producer
  const before = await partition();
  const moved = before.isr.find((b) => b !== before.leader);
  const after = (await control('POST', '/v1/leaders', { topic: TOPIC, partition: 0, broker: moved })).partitions[0];
  assert.strictEqual(after.leader, moved);
  assert.ok(after.leader_epoch > before.leader_epoch, 'a new leader epoch');
  await control('DELETE', '/v1/requests');
  await producer.send({ topic: TOPIC, acks: -1, messages: [{ value: 'third' }] });
  const produces = (await requests('Produce')).map((r) => r.broker);
  // the first to the old leader (its broker answers NOT_LEADER_OR_FOLLOWER), the retry to the new one
  assert.deepStrictEqual(produces, [before.leader, moved], `Produce requests went to ${produces}`);
  await producer.disconnect();
  console.log(`leader move: broker ${before.leader} -> ${moved}, kafkajs's Produce requests went to ${produces}`);

  const consumer = kafka.consumer({ groupId: `${TOPIC}-g` });
  await consumer.connect();
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
  const got = [];
  await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()); } });
  await until('3 records read', async () => got.length >= 3);
  await consumer.disconnect();
  assert.deepStrictEqual(got, ['first', 'second', 'third']);
  console.log('OK');
}

main().then(() => process.exit(0), (err) => { console.error(err.stack || String(err)); process.exit(1); });
