// kafkajs produce/consume/group/admin check.
// Usage: [KAFKAJS_SASL=MECHANISM:USER:PASSWORD] node kafkajs_check.js BOOTSTRAP TOPIC GROUP COUNT
// Prints one JSON line with what it saw; exits non-zero on any failure.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, topic, group, countStr] = process.argv.slice(2);
  const count = Number(countStr);
  // KAFKAJS_SASL=MECHANISM:USER:PASSWORD (plain, scram-sha-256, scram-sha-512) authenticates.
  let sasl;
  if (process.env.KAFKAJS_SASL) {
    const [mechanism, username, ...rest] = process.env.KAFKAJS_SASL.split(':');
    sasl = { mechanism: mechanism.toLowerCase(), username, password: rest.join(':') };
  }
  const kafka = new Kafka({ clientId: 'gregor-compat', brokers: bootstrap.split(','), logLevel: logLevel.ERROR, sasl });
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
  if (!created) throw new Error('createTopics returned false');

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) messages.push({ key: `k${i % 10}`, value: `v-${i}` });
  const res = await producer.send({ topic, acks: -1, messages });
  const ackedPartitions = res.filter((r) => r.errorCode === 0).length;
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  const next = new Map(); // partition -> next offset to commit
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${seen.length} of ${count} in 60 s`)), 60000);
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        seen.push(message.value.toString());
        next.set(partition, (BigInt(message.offset) + 1n).toString());
        if (seen.length === count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.commitOffsets([...next].map(([partition, offset]) => ({ topic, partition, offset })));
  await consumer.disconnect();

  const groups = await admin.listGroups();
  const listed = groups.groups.some((g) => g.groupId === group);
  const offs = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const committed = offs[0].partitions.reduce((s, p) => s + Math.max(Number(p.offset), 0), 0);
  const desc = await admin.describeGroups([group]);
  await admin.disconnect();
  const want = new Set(messages.map((m) => m.value));
  const dup = seen.length !== new Set(seen).size;
  if (seen.length !== count || dup || !seen.every((v) => want.has(v))) throw new Error(`consumed ${seen.length} records (duplicates: ${dup})`);
  console.log(JSON.stringify({ produced: count, produce_results: ackedPartitions, consumed: seen.length, committed,
    group_listed: listed, group_state: desc.groups[0].state }));
}

main().then(() => process.exit(0), (err) => { console.error(err && err.stack || String(err)); process.exit(1); });
