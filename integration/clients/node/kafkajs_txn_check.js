// kafkajs transactions check: consume-transform-produce with the input
// offsets sent to the transaction, then an aborted transaction, then one
// more committed one, read back by readUncommitted:false and
// readUncommitted:true consumers.
// Usage: node kafkajs_txn_check.js BOOTSTRAP TOPIC GROUP COUNT
// The input topic is TOPIC-in (1 partition), the output TOPIC-out (3
// partitions), the transactional id TOPIC-txn. Prints one JSON line with
// what it saw (integration/scenarios_txn.go checks it); exits non-zero when
// a client call fails.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const PARTITIONS = 3;

async function main() {
  const [bootstrap, topic, group, countStr] = process.argv.slice(2);
  const count = Number(countStr);
  const extra = Math.floor(count / 2);
  const inTopic = `${topic}-in`, outTopic = `${topic}-out`, txnId = `${topic}-txn`;
  const kafka = new Kafka({ clientId: 'gregor-compat-txn', brokers: bootstrap.split(','), logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ waitForLeaders: true, topics: [
    { topic: inTopic, numPartitions: 1, replicationFactor: 1 },
    { topic: outTopic, numPartitions: PARTITIONS, replicationFactor: 1 }] });
  if (!created) throw new Error('createTopics returned false');

  const plain = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await plain.connect();
  const inputs = [];
  for (let i = 0; i < count; i++) inputs.push({ value: `in-${i}`, partition: 0 });
  await plain.send({ topic: inTopic, acks: -1, messages: inputs });
  await plain.disconnect();

  // The group consumer of the consume-transform-produce loop: it stays a
  // member while the transactions run, and never commits by itself.
  const source = kafka.consumer({ groupId: group, readUncommitted: false });
  await source.connect();
  await source.subscribe({ topic: inTopic, fromBeginning: true });
  const read = [];
  let next = 0;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the group consumer read ${read.length} of ${count} input records in 60 s`)), 60000);
    source.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        read.push(message.value.toString());
        next = Number(BigInt(message.offset) + 1n);
        if (read.length === count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await source.pause([{ topic: inTopic }]);

  const producer = kafka.producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const acked = { copy: 0, aborted: 0, commit2: 0 };
  const send = async (txn, values) => {
    const res = await txn.send({ topic: outTopic, acks: -1,
      messages: values.map((value, i) => ({ value, partition: i % PARTITIONS })) });
    if (res.every((r) => r.errorCode === 0)) acked[values[0].split('-')[0]] += values.length;
  };
  const offsets = (offset) => ({ consumerGroupId: group,
    topics: [{ topic: inTopic, partitions: [{ partition: 0, offset: String(offset) }] }] });

  // 1: the copy, with the consumer's next offset, committed.
  let txn = await producer.transaction();
  await send(txn, read.map((v) => `copy-${v}`));
  await txn.sendOffsets(offsets(next));
  await txn.commit();

  // 2: aborted after its records are in the log (send waits for the acks),
  // with an offset that must not reach the group.
  txn = await producer.transaction();
  await send(txn, Array.from({ length: extra }, (_, i) => `aborted-${i}`));
  await txn.sendOffsets(offsets(1));
  await txn.abort();

  // 3: committed behind the aborted records in every partition.
  txn = await producer.transaction();
  await send(txn, Array.from({ length: extra }, (_, i) => `commit2-${i}`));
  await txn.commit();
  await producer.disconnect();
  await source.disconnect();

  const offs = await admin.fetchOffsets({ groupId: group, topics: [inTopic] });
  const groupOffset = Number(offs[0].partitions.find((p) => p.partition === 0).offset);
  await admin.disconnect();

  const readCommitted = await readAll(kafka, outTopic, `${group}-rc`, false, count + extra);
  const readUncommitted = await readAll(kafka, outTopic, `${group}-ru`, true, count + 2 * extra);
  console.log(JSON.stringify({ client: 'kafkajs', input: read.length, acked, group_offset: groupOffset,
    read_committed: readCommitted, read_uncommitted: readUncommitted }));
}

// readAll reads the topic from the start in a fresh group until want values
// arrived (or 60 s passed), then one more second for anything beyond them.
async function readAll(kafka, topic, groupId, readUncommitted, want) {
  const c = kafka.consumer({ groupId, readUncommitted });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 60000);
    c.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString());
        if (seen.length === want) { clearTimeout(timer); setTimeout(resolve, 1000); }
      },
    }).catch(reject);
  });
  await c.disconnect();
  return seen;
}

main().then(() => process.exit(0), (err) => { console.error(err && err.stack || String(err)); process.exit(1); });
