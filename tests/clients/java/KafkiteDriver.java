// A small CLI over the Java kafka-clients (3.9.1, and 4.3.0) for Kafkite's client tests. Single file, no
// dependencies beyond kafka-clients (+ slf4j-api, lz4-java, snappy-java, zstd-jni on the class path).
// Compiled by .ci/install-clients.sh into $KAFKITE_TOOLS/java/classes (3.9.1) and java4/classes (4.3.0).
//
// Every command prints JSON objects, one a line, on stdout. Errors are {"error": "<Java exception
// simple class name>", "message": "..."}: broker-side errors of admin commands exit 0, anything else
// exits 1 (usage: exit 2). Bytes are base64 (standard alphabet, padded).
//
//   version                                            -> {"version":"<kafka-clients' version>"}
//   admin-create   BS TOPIC PARTITIONS RF [k=v ...]    -> {"ok":true,"topic_id":"<Uuid.toString>"}
//   admin-list     BS [--internal]                     -> {"topics":[sorted names]}
//   admin-describe BS TOPIC                            -> {"name","topic_id","internal","partitions":[{"partition",
//                       "leader","replicas":[ids],"isr":[ids]}],"configs":{name:{"value","source"}}}
//                       (configs is null plus "configs_error" when DescribeConfigs fails)
//   admin-delete   BS TOPIC                            -> {"ok":true}
//   admin-cluster  BS                                  -> {"cluster_id","controller","brokers":N,"nodes":[{"id","host","port","rack"}]}
//   admin-alter-configs BS TOPIC k=v ... [k= (deletes)] -> {"ok":true}        (incrementalAlterConfigs)
//   admin-create-partitions BS TOPIC TOTAL             -> {"ok":true}
//   admin-groups   BS                                  -> {"groups":[{"group","state","simple"}]}
//   admin-describe-group BS GROUP                      -> {"group","state","protocol","assignor","coordinator","members":[...]}
//   admin-group-offsets  BS GROUP                      -> {"offsets":{"topic:partition":offset}}
//   admin-delete-group   BS GROUP                      -> {"ok":true}
//   produce BS TOPIC COUNT [--acks all|1|0|-1] [--compression none|gzip|snappy|lz4|zstd] [--idempotent true|false]
//           [--key-prefix K] [--distinct-keys N] [--null-keys] [--headers] [--value-size N] [--partition P]
//           [--timestamp-base MS [--timestamp-step MS]] [--linger-ms N] [--batch-size N] [--pause-ms-per-1000 N]
//           [--transactional-id ID [--abort]] [--prop k=v ...]
//        -> {"acked":N,"errors":N,"first_error":null|"...","partitions":{"<p>":[first,last,count]},"elapsed_ms":N}
//        record i: key = K + (i % N) (K default "java-", N default 97), value = "value-<i>-" + "x"*(i%50)
//        (or --value-size bytes), headers only with --headers: h=<i>, src=java
//   produce-log BS TOPIC COUNT [--rate N] [--delivery-timeout-ms N] [--request-timeout-ms N] [--max-block-ms N]
//           [--partition P] [--linger-ms N] [--prop k=v ...]
//        an idempotent acks=all producer (retries Integer.MAX, delivery.timeout.ms default 120000,
//        request.timeout.ms default 10000, max.block.ms default 60000, linger.ms default 5) sending record i
//        (0..COUNT-1) as key "k-<i % 16>", value "v-<i>" (UTF-8), at most N records/s with --rate (else as
//        fast as it goes). One line a record once its outcome is known, in callback order:
//        {"ack":true,"p":P,"o":OFFSET,"v":"v-<i>"} or {"ack":false,"v":"v-<i>","error":"<Class>: message"};
//        then {"sent":N,"acked":N,"failed":N,"first_error":null|"...","elapsed_ms":N}.
//        A record send() refuses at once (e.g. no metadata within max.block.ms) is an ack:false line too.
//   consume-assign BS TOPIC EXPECTED [--timeout-ms N] [--isolation read_committed|read_uncommitted]
//           [--partition P] [--prop k=v ...]
//        -> one line a record {"p","o","ts","tt","k","v","h":[[key,b64]]}, then
//           {"consumed":N,"expected":N,"timed_out":bool}
//   consume-group BS TOPIC GROUP MAX [--timeout-ms N] [--commit] [--strategy range|roundrobin|sticky|cooperative-sticky]
//           [--protocol classic|consumer] [--auto-offset-reset earliest|latest|none] [--isolation ...] [--prop k=v ...]
//        -> record lines as above, then {"consumed":N,"timed_out":bool,"assignment":[partitions],
//           "committed":{"<p>":offset}|null}   (committed = what the broker returns for the group after --commit)
//   offsets-for-times BS TOPIC TS                      -> {"<p>":[offset,timestamp]|null}
//   list-offsets BS TOPIC                              -> {"<p>":{"earliest":N,"latest":N}}
//   txn-produce BS TOPIC TXNS PER_PARTITION [--transactional-id ID] [--fence none|idle|mid] [--prop k=v ...]
//        a transactional producer (acks=all, idempotent, String serdes) runs TXNS transactions; transaction t sends
//        PER_PARTITION records to every partition of TOPIC (key "k-<p>-<j>", value "t<t>-p<p>-<j>"), flushes and
//        waits for every ack, then commits (t even) or aborts (t odd): a line a transaction
//        {"txn":t,"result":"commit"|"abort","partitions":{"<p>":[first,last,count]}}.
//        --fence idle: after the last one a second producer with the same transactional.id calls initTransactions,
//        then the first begins a transaction, sends "fenced-p0" to partition 0 and commits;
//        --fence mid: the first begins a transaction, sends "fenced-p<p>" to every partition and flushes, then the
//        second producer calls initTransactions (which aborts that open transaction) and the first commits.
//        Either way: {"fence":MODE,"send_error":null|"<Class>","commit_error":null|"<Class>","init_ms":N}, then the second
//        producer commits one transaction of "after-fence-p<p>" to every partition: {"after_fence":"commit"}.
//        Last line {"txns":N,"committed":N,"aborted":N,"elapsed_ms":N}.
//   txn-ctp BS INPUT OUTPUT GROUP TRANSACTIONAL_ID [--max-per-txn N] [--crash-after-txns T] [--group-instance-id ID]
//           [--timeout-ms N] [--prop k=v ...]
//        consume-transform-produce: a read_committed group consumer of INPUT (subscribe, max.poll.records N, default
//        50) and a transactional producer; every non-empty poll is one transaction that sends each record to the
//        same partition of OUTPUT (same key, value "out:" + value), then sendOffsetsToTransaction(offsets,
//        consumer.groupMetadata()) and commits: {"txn":i,"records":N}. Ends once the consumer owns every partition
//        of INPUT and its position is at the end of each: {"txns":N,"records":N,"generation":G,"elapsed_ms":N}.
//        --crash-after-txns T: transaction T (0-based) is sent, its offsets added and flushed, then
//        {"crashing":true,"txn":T,"records":N}, then it waits to be killed (the test sends SIGKILL: no
//        commit, no leaving the group, no shutdown hook); were it not killed within 60 s it halts (exit 3).
//   consume-all BS TOPIC [--isolation read_committed|read_uncommitted] [--timeout-ms N] [--prop k=v ...]
//        assign every partition, read from the beginning until the position of each reaches its log end offset
//        (read_uncommitted end offsets, taken at the start): record lines as consume-assign, then
//        {"consumed":N,"timed_out":bool,"log_end":{"<p>":N},"positions":{"<p>":N},"end_offsets":{"<p>":N}}
//        (end_offsets: endOffsets() at the end under the consumer's isolation, i.e. the last stable offset for
//        read_committed).
//
// Legacy forms kept for existing tests: `admin BS create|list|describe|delete|cluster ...`,
// `produce BS TOPIC COUNT CODEC IDEMPOTENT [PAUSE_MS_PER_1000]` (acks=all, headers on),
// `consume BS TOPIC COUNT` (= consume-assign, timeout 60 s),
// `group BS TOPIC GROUP [STRATEGY]` (runs until SIGTERM: {"rec":[p,o]}, {"commit":n}, {"commit_failed":n,"error":"..."}
// when a commit is refused in a rebalance, {"closed":true}).
//   group ... [--protocol classic|consumer] [--remote-assignor uniform|range] [--control]
//        --protocol consumer: group.protocol=consumer (KIP-848; the broker assigns, group.remote.assignor from
//        --remote-assignor if given; no session/heartbeat/strategy settings, the broker's own apply).
//        --control: several members in this one JVM (a thread and a KafkaConsumer each), driven by stdin lines
//        "add NAME [INSTANCE_ID]" (a member joins, static with an instance id) and "close NAME" (it leaves:
//        close()); EOF closes every member and exits. Every line then carries "m":NAME, plus
//        {"m","assigned":[partitions]} whenever a member's assignment changes (checked at every poll).
//        With the consumer protocol a ConsumerRebalanceListener commits what was reported of a revoked partition
//        and seeks an assigned one to its committed offset ({"seek_failed":"..."} if that fails): see groupMember.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.*;

public class KafkiteDriver {
    // ---- JSON out ---------------------------------------------------------------------------------
    static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
    static String b64(byte[] v) { return v == null ? "null" : q(Base64.getEncoder().encodeToString(v)); }
    static synchronized void out(String json) { System.out.println(json); System.out.flush(); }
    static Throwable cause(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof KafkaException && e.getClass() == KafkaException.class)
                && e.getCause() != null) e = e.getCause();
        return e;
    }
    static String err(Throwable e) {
        Throwable c = cause(e);
        return "{\"error\":" + q(c.getClass().getSimpleName()) + ",\"message\":" + q(c.getMessage()) + "}";
    }
    static String ids(Collection<Node> nodes) {
        StringBuilder b = new StringBuilder("[");
        for (Node n : nodes) b.append(b.length() > 1 ? "," : "").append(n.id());
        return b.append("]").toString();
    }
    static String strList(Collection<String> xs) {
        StringBuilder b = new StringBuilder("[");
        for (String x : xs) b.append(b.length() > 1 ? "," : "").append(q(x));
        return b.append("]").toString();
    }

    // ---- arguments --------------------------------------------------------------------------------
    static final Set<String> BOOL_FLAGS = Set.of("--headers", "--no-headers", "--commit", "--null-keys", "--abort", "--internal", "--control");

    static class Args {
        final List<String> pos = new ArrayList<>();
        final Map<String, String> opt = new HashMap<>();
        final Map<String, String> props = new LinkedHashMap<>();
        Args(String[] a, int from) {
            for (int i = from; i < a.length; i++) {
                String s = a[i];
                if (s.startsWith("--") && s.length() > 2) {
                    String k = s, v;
                    int eq = s.indexOf('=');
                    if (eq > 0) { k = s.substring(0, eq); v = s.substring(eq + 1); }
                    else if (BOOL_FLAGS.contains(s)) v = "true";
                    else if (i + 1 < a.length) v = a[++i];
                    else throw new IllegalArgumentException("missing value for " + s);
                    if (k.equals("--prop")) { String[] kv = v.split("=", 2); props.put(kv[0], kv.length > 1 ? kv[1] : ""); }
                    else opt.put(k, v);
                } else pos.add(s);
            }
        }
        String pos(int i) {
            if (i >= pos.size()) throw new IllegalArgumentException("missing argument " + (i + 1));
            return pos.get(i);
        }
        String get(String k, String d) { return opt.getOrDefault(k, d); }
        int getInt(String k, int d) { return opt.containsKey(k) ? Integer.parseInt(opt.get(k)) : d; }
        long getLong(String k, long d) { return opt.containsKey(k) ? Long.parseLong(opt.get(k)) : d; }
        boolean flag(String k) { return Boolean.parseBoolean(opt.getOrDefault(k, "false")); }
    }

    static Properties base(String bs, Args a) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("client.id", "kafkite-java-driver");
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        if (a != null) p.putAll(a.props);
        return p;
    }

    public static void main(String[] argv) {
        if (argv.length == 1 && argv[0].equals("version")) {
            out("{\"version\":\"" + org.apache.kafka.common.utils.AppInfoParser.getVersion() + "\"}");
            return;
        }
        runCommand("KafkiteDriver", argv, KafkiteDriver::command);
    }

    interface Command { void run(String cmd, String bs, String[] argv) throws Exception; }

    // a driver's main: usage, then the command, its error line and exit status (2: usage, 1: failed)
    static void runCommand(String driver, String[] argv, Command command) {
        if (argv.length < 2) {
            System.err.println("usage: " + driver + " COMMAND BOOTSTRAP ... (see the head of " + driver + ".java)");
            System.exit(2);
        }
        int code = 0;
        try {
            command.run(argv[0], argv[1], argv);
        } catch (IllegalArgumentException e) {
            out(err(e));
            code = 2;
        } catch (Throwable e) {
            out(err(e));
            code = 1;
        }
        System.exit(code);
    }

    static void command(String cmd, String bs, String[] argv) throws Exception {
        if (cmd.equals("admin")) {  // legacy: admin BS SUB ...
            if (argv.length < 3) throw new IllegalArgumentException("admin needs a subcommand");
            cmd = "admin-" + argv[2];
            argv = concat(new String[]{cmd, bs}, Arrays.copyOfRange(argv, 3, argv.length));
        }
        Args a = new Args(argv, 2);
        if (cmd.startsWith("admin-")) admin(cmd.substring(6), bs, a);
        else switch (cmd) {
            case "produce": {
                if (a.pos.size() >= 3) {  // legacy: produce BS TOPIC N CODEC [IDEMPOTENT [PAUSE]]
                    a.opt.putIfAbsent("--compression", a.pos.get(2));
                    a.opt.putIfAbsent("--idempotent", a.pos.size() > 3 ? a.pos.get(3) : "true");
                    if (a.pos.size() > 4) a.opt.putIfAbsent("--pause-ms-per-1000", a.pos.get(4));
                    a.opt.putIfAbsent("--headers", "true");
                    a.opt.putIfAbsent("--acks", "all");
                }
                produce(bs, a);
                break;
            }
            case "produce-log": produceLog(bs, a); break;
            case "consume": a.opt.putIfAbsent("--timeout-ms", "60000"); consumeAssign(bs, a); break;
            case "consume-assign": consumeAssign(bs, a); break;
            case "consume-group": consumeGroup(bs, a); break;
            case "group": group(bs, a); break;
            case "offsets-for-times": offsetsForTimes(bs, a); break;
            case "list-offsets": listOffsets(bs, a); break;
            case "txn-produce": txnProduce(bs, a); break;
            case "txn-ctp": txnCtp(bs, a); break;
            case "consume-all": consumeAll(bs, a); break;
            default: throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    static String[] concat(String[] x, String[] y) {
        String[] r = Arrays.copyOf(x, x.length + y.length);
        System.arraycopy(y, 0, r, x.length, y.length);
        return r;
    }

    // ---- admin -------------------------------------------------------------------------------------
    static void admin(String sub, String bs, Args a) throws Exception {
        try (Admin admin = Admin.create(base(bs, a))) {
            try {
                switch (sub) {
                    case "create": {
                        String topic = a.pos(0);
                        Map<String, String> cfg = new HashMap<>();
                        for (int i = 3; i < a.pos.size(); i++) { String[] kv = a.pos.get(i).split("=", 2); cfg.put(kv[0], kv.length > 1 ? kv[1] : ""); }
                        NewTopic t = new NewTopic(topic, Integer.parseInt(a.pos(1)), Short.parseShort(a.pos(2))).configs(cfg);
                        CreateTopicsResult r = admin.createTopics(List.of(t));
                        r.all().get();
                        String tid;
                        try { tid = r.topicId(topic).get().toString(); } catch (ExecutionException e) { tid = null; }
                        out("{\"ok\":true,\"topic_id\":" + q(tid) + "}");
                        break;
                    }
                    case "list": {
                        List<String> names = new ArrayList<>(admin.listTopics(new ListTopicsOptions().listInternal(a.flag("--internal"))).names().get());
                        Collections.sort(names);
                        out("{\"topics\":" + strList(names) + "}");
                        break;
                    }
                    case "describe": {
                        String topic = a.pos(0);
                        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                        StringBuilder b = new StringBuilder("{\"name\":" + q(d.name()) + ",\"topic_id\":" + q(d.topicId() == null ? null : d.topicId().toString())
                                + ",\"internal\":" + d.isInternal() + ",\"partitions\":[");
                        for (int i = 0; i < d.partitions().size(); i++) {
                            TopicPartitionInfo p = d.partitions().get(i);
                            b.append(i > 0 ? "," : "").append("{\"partition\":").append(p.partition())
                             .append(",\"leader\":").append(p.leader() == null ? -1 : p.leader().id())
                             .append(",\"replicas\":").append(ids(p.replicas()))
                             .append(",\"isr\":").append(ids(p.isr())).append("}");
                        }
                        b.append("],\"configs\":");
                        try {
                            Config c = admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, topic)))
                                    .all().get().values().iterator().next();
                            b.append("{");
                            boolean first = true;
                            for (ConfigEntry e : c.entries()) {
                                b.append(first ? "" : ",").append(q(e.name())).append(":{\"value\":").append(q(e.value()))
                                 .append(",\"source\":").append(q(e.source().name())).append("}");
                                first = false;
                            }
                            b.append("}");
                        } catch (ExecutionException e) {
                            Throwable c = cause(e);
                            b.append("null,\"configs_error\":").append(q(c.getClass().getSimpleName() + ": " + c.getMessage()));
                        }
                        out(b.append("}").toString());
                        break;
                    }
                    case "delete": admin.deleteTopics(List.of(a.pos(0))).all().get(); out("{\"ok\":true}"); break;
                    case "cluster": {
                        DescribeClusterResult r = admin.describeCluster();
                        Collection<Node> nodes = r.nodes().get();
                        Node ctl = r.controller().get();
                        StringBuilder b = new StringBuilder("{\"cluster_id\":" + q(r.clusterId().get()) + ",\"controller\":"
                                + (ctl == null ? -1 : ctl.id()) + ",\"brokers\":" + nodes.size() + ",\"nodes\":[");
                        boolean first = true;
                        for (Node n : nodes) {
                            b.append(first ? "" : ",").append("{\"id\":").append(n.id()).append(",\"host\":").append(q(n.host()))
                             .append(",\"port\":").append(n.port()).append(",\"rack\":").append(q(n.rack())).append("}");
                            first = false;
                        }
                        out(b.append("]}").toString());
                        break;
                    }
                    case "alter-configs": {
                        List<AlterConfigOp> ops = new ArrayList<>();
                        for (int i = 1; i < a.pos.size(); i++) {
                            String[] kv = a.pos.get(i).split("=", 2);
                            ops.add(kv.length < 2 || kv[1].isEmpty()
                                    ? new AlterConfigOp(new ConfigEntry(kv[0], null), AlterConfigOp.OpType.DELETE)
                                    : new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
                        }
                        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, a.pos(0)), ops)).all().get();
                        out("{\"ok\":true}");
                        break;
                    }
                    case "create-partitions":
                        admin.createPartitions(Map.of(a.pos(0), NewPartitions.increaseTo(Integer.parseInt(a.pos(1))))).all().get();
                        out("{\"ok\":true}");
                        break;
                    case "groups": {
                        List<ConsumerGroupListing> gs = new ArrayList<>(admin.listConsumerGroups().all().get());
                        gs.sort(Comparator.comparing(ConsumerGroupListing::groupId));
                        StringBuilder b = new StringBuilder("{\"groups\":[");
                        for (int i = 0; i < gs.size(); i++) {
                            ConsumerGroupListing g = gs.get(i);
                            b.append(i > 0 ? "," : "").append("{\"group\":").append(q(g.groupId())).append(",\"state\":")
                             .append(q(g.state().map(Enum::name).orElse(null))).append(",\"simple\":").append(g.isSimpleConsumerGroup()).append("}");
                        }
                        out(b.append("]}").toString());
                        break;
                    }
                    case "describe-group": {
                        String g = a.pos(0);
                        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(g)).all().get().get(g);
                        StringBuilder b = new StringBuilder("{\"group\":" + q(d.groupId()) + ",\"state\":" + q(d.state().name())
                                + ",\"protocol\":" + q(d.type().name()) + ",\"assignor\":" + q(d.partitionAssignor())
                                + ",\"coordinator\":" + (d.coordinator() == null ? -1 : d.coordinator().id()) + ",\"members\":[");
                        boolean first = true;
                        for (MemberDescription m : d.members()) {
                            StringBuilder parts = new StringBuilder("[");
                            List<TopicPartition> tps = new ArrayList<>(m.assignment().topicPartitions());
                            tps.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
                            for (TopicPartition tp : tps) parts.append(parts.length() > 1 ? "," : "").append(q(tp.topic() + ":" + tp.partition()));
                            b.append(first ? "" : ",").append("{\"member_id\":").append(q(m.consumerId())).append(",\"client_id\":")
                             .append(q(m.clientId())).append(",\"host\":").append(q(m.host())).append(",\"assignment\":").append(parts).append("]}");
                            first = false;
                        }
                        out(b.append("]}").toString());
                        break;
                    }
                    case "group-offsets": {
                        Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(a.pos(0)).partitionsToOffsetAndMetadata().get();
                        List<TopicPartition> tps = new ArrayList<>(m.keySet());
                        tps.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
                        StringBuilder b = new StringBuilder("{\"offsets\":{");
                        for (int i = 0; i < tps.size(); i++) {
                            OffsetAndMetadata o = m.get(tps.get(i));
                            b.append(i > 0 ? "," : "").append(q(tps.get(i).topic() + ":" + tps.get(i).partition())).append(":").append(o == null ? "null" : String.valueOf(o.offset()));
                        }
                        out(b.append("}}").toString());
                        break;
                    }
                    case "delete-group": admin.deleteConsumerGroups(List.of(a.pos(0))).all().get(); out("{\"ok\":true}"); break;
                    default: throw new IllegalArgumentException("unknown admin command " + sub);
                }
            } catch (ExecutionException e) {
                out(err(e));
            }
        }
    }

    // ---- produce -----------------------------------------------------------------------------------
    static void produce(String bs, Args a) throws Exception {
        String topic = a.pos(0);
        int n = Integer.parseInt(a.pos(1));
        Properties p = base(bs, null);
        String acks = a.get("--acks", "all");
        p.put("acks", acks);
        p.put("compression.type", a.get("--compression", "none"));
        boolean idem = Boolean.parseBoolean(a.get("--idempotent", acks.equals("all") || acks.equals("-1") ? "true" : "false"));
        p.put("enable.idempotence", String.valueOf(idem));
        p.put("linger.ms", a.get("--linger-ms", "5"));
        if (a.opt.containsKey("--batch-size")) p.put("batch.size", a.get("--batch-size", null));
        p.put("delivery.timeout.ms", "120000");
        p.put("max.block.ms", "30000");
        p.put("retries", String.valueOf(Integer.MAX_VALUE));
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        String txn = a.get("--transactional-id", null);
        if (txn != null) p.put("transactional.id", txn);
        p.putAll(a.props);
        String keyPrefix = a.get("--key-prefix", "java-");
        int distinct = a.getInt("--distinct-keys", 97);
        boolean nullKeys = a.flag("--null-keys"), headers = a.flag("--headers") && !a.flag("--no-headers");
        int valueSize = a.getInt("--value-size", -1), pause = a.getInt("--pause-ms-per-1000", 0);
        Integer partition = a.opt.containsKey("--partition") ? Integer.valueOf(a.getInt("--partition", 0)) : null;
        Long tsBase = a.opt.containsKey("--timestamp-base") ? Long.valueOf(a.getLong("--timestamp-base", 0)) : null;
        long tsStep = a.getLong("--timestamp-step", 0);

        Map<Integer, long[]> ranges = new TreeMap<>();
        int[] acked = {0};
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        long t0 = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p)) {
            if (txn != null) { prod.initTransactions(); prod.beginTransaction(); }
            for (int i = 0; i < n; i++) {
                byte[] k = nullKeys ? null : (keyPrefix + (i % distinct)).getBytes(StandardCharsets.UTF_8);
                byte[] v;
                if (valueSize >= 0) {
                    v = new byte[valueSize];
                    byte[] tag = ("value-" + i + "-").getBytes(StandardCharsets.UTF_8);
                    Arrays.fill(v, (byte) 'x');
                    System.arraycopy(tag, 0, v, 0, Math.min(tag.length, valueSize));
                } else {
                    StringBuilder sb = new StringBuilder("value-" + i + "-");
                    for (int j = 0; j < i % 50; j++) sb.append('x');
                    v = sb.toString().getBytes(StandardCharsets.UTF_8);
                }
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, partition,
                        tsBase == null ? null : Long.valueOf(tsBase + i * tsStep), k, v);
                if (headers) {
                    r.headers().add("h", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
                    r.headers().add("src", "java".getBytes(StandardCharsets.UTF_8));
                }
                if (pause > 0 && i > 0 && i % 1000 == 0) Thread.sleep(pause);
                prod.send(r, (md, e) -> {
                    synchronized (ranges) {
                        if (e != null) { errors.add(e.getClass().getSimpleName() + ": " + e.getMessage()); return; }
                        acked[0]++;
                        long[] rg = ranges.computeIfAbsent(md.partition(), x -> new long[]{Long.MAX_VALUE, -1, 0});
                        rg[0] = Math.min(rg[0], md.offset()); rg[1] = Math.max(rg[1], md.offset()); rg[2]++;
                    }
                });
            }
            prod.flush();
            if (txn != null) { if (a.flag("--abort")) prod.abortTransaction(); else prod.commitTransaction(); }
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        StringBuilder b;
        synchronized (ranges) {
            b = new StringBuilder("{\"acked\":" + acked[0] + ",\"errors\":" + errors.size() + ",\"first_error\":"
                    + q(errors.isEmpty() ? null : errors.get(0)) + ",\"partitions\":{");
            boolean first = true;
            for (Map.Entry<Integer, long[]> e : ranges.entrySet()) {
                b.append(first ? "" : ",").append(q(String.valueOf(e.getKey()))).append(":[").append(e.getValue()[0]).append(",")
                 .append(e.getValue()[1]).append(",").append(e.getValue()[2]).append("]");
                first = false;
            }
        }
        out(b.append("},\"elapsed_ms\":").append(ms).append("}").toString());
    }

    // ---- produce-log: every record's outcome, for replication / durability checks ------------------
    static void produceLog(String bs, Args a) throws Exception {
        String topic = a.pos(0);
        int n = Integer.parseInt(a.pos(1));
        double rate = Double.parseDouble(a.get("--rate", "0"));
        Properties p = base(bs, null);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("retries", String.valueOf(Integer.MAX_VALUE));
        p.put("max.in.flight.requests.per.connection", "5");
        p.put("delivery.timeout.ms", a.get("--delivery-timeout-ms", "120000"));
        p.put("request.timeout.ms", a.get("--request-timeout-ms", "10000"));
        p.put("max.block.ms", a.get("--max-block-ms", "60000"));
        p.put("linger.ms", a.get("--linger-ms", "5"));
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.putAll(a.props);
        // delivery.timeout.ms must be >= linger.ms + request.timeout.ms: raise it rather than fail at start
        long minDelivery = Long.parseLong(p.getProperty("linger.ms")) + Long.parseLong(p.getProperty("request.timeout.ms"));
        if (Long.parseLong(p.getProperty("delivery.timeout.ms")) < minDelivery) p.put("delivery.timeout.ms", String.valueOf(minDelivery));
        Integer partition = a.opt.containsKey("--partition") ? Integer.valueOf(a.getInt("--partition", 0)) : null;

        int[] acked = {0}, failed = {0};
        String[] firstError = {null};
        Object lock = new Object();
        long t0 = System.nanoTime();
        int sent = 0;
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                if (rate > 0) {  // record i is due at t0 + i / rate
                    long due = t0 + (long) (i * 1e9 / rate);
                    long wait;
                    while ((wait = due - System.nanoTime()) > 0) java.util.concurrent.locks.LockSupport.parkNanos(wait);
                }
                String v = "v-" + i;
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, partition, "k-" + (i % 16), v);
                Callback cb = (md, e) -> {
                    synchronized (lock) {
                        if (e == null) {
                            acked[0]++;
                            out("{\"ack\":true,\"p\":" + md.partition() + ",\"o\":" + md.offset() + ",\"v\":" + q(v) + "}");
                        } else {
                            failed[0]++;
                            String why = cause(e).getClass().getSimpleName() + ": " + cause(e).getMessage();
                            if (firstError[0] == null) firstError[0] = why;
                            out("{\"ack\":false,\"v\":" + q(v) + ",\"error\":" + q(why) + "}");
                        }
                    }
                };
                try {
                    prod.send(r, cb);   // an ApiException (e.g. a metadata timeout) comes to the callback
                } catch (KafkaException e) {   // anything else is thrown, the callback never called
                    cb.onCompletion(null, e);
                }
                sent++;
            }
            prod.flush();
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        synchronized (lock) {
            out("{\"sent\":" + sent + ",\"acked\":" + acked[0] + ",\"failed\":" + failed[0] + ",\"first_error\":"
                    + q(firstError[0]) + ",\"elapsed_ms\":" + ms + "}");
        }
    }

    // ---- consume -----------------------------------------------------------------------------------
    static String record(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder h = new StringBuilder("[");
        boolean first = true;
        for (Header x : r.headers()) { h.append(first ? "" : ",").append("[").append(q(x.key())).append(",").append(b64(x.value())).append("]"); first = false; }
        return "{\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"ts\":" + r.timestamp() + ",\"tt\":" + q(r.timestampType().name)
                + ",\"k\":" + b64(r.key()) + ",\"v\":" + b64(r.value()) + ",\"h\":" + h + "]}";
    }

    static Properties consumerProps(String bs, Args a) {
        Properties p = base(bs, null);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", a.get("--auto-offset-reset", "earliest"));
        p.put("isolation.level", a.get("--isolation", "read_uncommitted"));
        return p;
    }

    static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, String topic, Args a) {
        List<TopicPartition> tps = new ArrayList<>();
        if (a.opt.containsKey("--partition")) { tps.add(new TopicPartition(topic, a.getInt("--partition", 0))); return tps; }
        List<PartitionInfo> infos = c.partitionsFor(topic);
        if (infos == null || infos.isEmpty()) throw new org.apache.kafka.common.errors.UnknownTopicOrPartitionException("no partitions for " + topic);
        for (PartitionInfo pi : infos) tps.add(new TopicPartition(topic, pi.partition()));
        tps.sort(Comparator.comparingInt(TopicPartition::partition));
        return tps;
    }

    static void consumeAssign(String bs, Args a) {
        String topic = a.pos(0);
        int n = Integer.parseInt(a.pos(1));
        long timeout = a.getLong("--timeout-ms", 30000);
        Properties p = consumerProps(bs, a);
        p.putAll(a.props);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = partitions(c, topic, a);
            c.assign(tps);
            c.seekToBeginning(tps);
            int got = 0;
            long deadline = System.currentTimeMillis() + timeout;
            while (got < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(Math.max(1, Math.min(500, deadline - System.currentTimeMillis()))))) { out(record(r)); got++; }
            }
            out("{\"consumed\":" + got + ",\"expected\":" + n + ",\"timed_out\":" + (got < n) + "}");
        }
    }

    static String assignor(String s) {
        switch (s) {
            case "roundrobin": return RoundRobinAssignor.class.getName();
            case "sticky": return StickyAssignor.class.getName();
            case "cooperative-sticky": return CooperativeStickyAssignor.class.getName();
            case "range": return RangeAssignor.class.getName();
            default: throw new IllegalArgumentException("unknown strategy " + s);
        }
    }

    static void consumeGroup(String bs, Args a) {
        String topic = a.pos(0), group = a.pos(1);
        int max = Integer.parseInt(a.pos(2));
        long timeout = a.getLong("--timeout-ms", 30000);
        Properties p = consumerProps(bs, a);
        p.put("group.id", group);
        String protocol = a.get("--protocol", "classic");
        p.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            p.put("partition.assignment.strategy", assignor(a.get("--strategy", "range")));
            p.put("session.timeout.ms", a.get("--session-timeout-ms", "10000"));
            p.put("heartbeat.interval.ms", "500");
        }
        p.putAll(a.props);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            int got = 0;
            Set<TopicPartition> rewound = new HashSet<>();
            long deadline = System.currentTimeMillis() + timeout;
            while (got < max && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(Math.max(1, Math.min(500, deadline - System.currentTimeMillis()))))) {
                    if (got >= max) {  // don't report (or commit) past MAX: rewind so the position is exact
                        TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                        if (rewound.add(tp)) c.seek(tp, r.offset());
                        continue;
                    }
                    out(record(r));
                    got++;
                }
            }
            // every unreported record's partition was sought back, so position() is "next record to report"
            List<TopicPartition> assigned = new ArrayList<>(c.assignment());
            assigned.sort(Comparator.comparingInt(TopicPartition::partition));
            StringBuilder b = new StringBuilder("{\"consumed\":" + got + ",\"timed_out\":" + (got < max) + ",\"assignment\":[");
            for (int i = 0; i < assigned.size(); i++) b.append(i > 0 ? "," : "").append(assigned.get(i).partition());
            b.append("],\"committed\":");
            if (a.flag("--commit") && !assigned.isEmpty()) {
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                for (TopicPartition tp : assigned) offs.put(tp, new OffsetAndMetadata(c.position(tp)));
                c.commitSync(offs);
                Map<TopicPartition, OffsetAndMetadata> got2 = c.committed(new HashSet<>(assigned));
                b.append("{");
                for (int i = 0; i < assigned.size(); i++) {
                    OffsetAndMetadata o = got2.get(assigned.get(i));
                    b.append(i > 0 ? "," : "").append(q(String.valueOf(assigned.get(i).partition()))).append(":").append(o == null ? "null" : String.valueOf(o.offset()));
                }
                b.append("}");
            } else b.append("null");
            out(b.append("}").toString());
        }
    }

    // legacy long-running group member for tests/clients/group_scenario.py: stops on SIGTERM
    static void group(String bs, Args a) throws Exception {
        if (a.flag("--control")) { groupControl(bs, a); return; }
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(groupProps(bs, a, null));
        groupMember(c, a.pos(0), null, stopOnSigterm(c), a.get("--protocol", "classic").equals("consumer"));
    }

    // set on SIGTERM (a shutdown hook), which also wakes the consumer's poll and waits up to 10 s for this thread to
    // finish (its loop sees the flag, closes the consumer: it leaves the group)
    static AtomicBoolean stopOnSigterm(KafkaConsumer<?, ?> c) {
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            c.wakeup();
            try { main.join(10000); } catch (InterruptedException ignored) { }
        }));
        return stop;
    }

    static Properties groupProps(String bs, Args a, String instanceId) {
        Properties p = consumerProps(bs, a);
        p.put("group.id", a.pos(1));
        if (a.get("--protocol", "classic").equals("consumer")) {
            p.put("group.protocol", "consumer");
            if (a.opt.containsKey("--remote-assignor")) p.put("group.remote.assignor", a.get("--remote-assignor", null));
        } else {
            p.put("session.timeout.ms", "3000");
            p.put("heartbeat.interval.ms", "300");
            p.put("partition.assignment.strategy", assignor(a.pos.size() > 2 ? a.pos.get(2) : "range"));
        }
        if (instanceId != null) p.put("group.instance.id", instanceId);
        p.putAll(a.props);
        return p;
    }

    // one member's loop: poll, report, commit synchronously what it reported; name tags the lines in --control
    // mode. With the consumer protocol the member also commits what it reported of a partition in
    // onPartitionsRevoked: the Java client (3.9) revokes in its background thread once no listener is there to
    // wait for, so a batch just handed out could lose its partition before commitSync() and be read again.
    static void groupMember(KafkaConsumer<byte[], byte[]> c, String topic, String name, AtomicBoolean stop,
                            boolean consumerProtocol) {
        String tag = name == null ? "{" : "{\"m\":" + q(name) + ",";
        int[] count = {0};
        Map<TopicPartition, OffsetAndMetadata> reported = new HashMap<>();
        if (consumerProtocol) c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                for (TopicPartition tp : parts) if (reported.containsKey(tp)) offs.put(tp, reported.remove(tp));
                if (offs.isEmpty()) return;
                try { c.commitSync(offs); out(tag + "\"commit\":" + count[0] + "}"); }
                catch (KafkaException e) {
                    out(tag + "\"commit_failed\":" + count[0] + ",\"error\":" + q(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
                }
            }
            // Java 3.9's consumer-protocol consumer may reset a partition added while a committed-offset fetch for
            // others is in flight to auto.offset.reset (KAFKA-17674, fixed in 4.0): seek to the committed offsets
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                if (parts.isEmpty()) return;
                try {
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(new HashSet<>(parts)).entrySet())
                        if (e.getValue() != null) c.seek(e.getKey(), e.getValue().offset());
                } catch (KafkaException e) {
                    out(tag + "\"seek_failed\":" + q(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
                }
            }
        });
        else c.subscribe(List.of(topic));
        int n = 0;
        Set<Integer> assigned = null;
        try {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                if (name != null) {
                    Set<Integer> now = new TreeSet<>();
                    for (TopicPartition tp : c.assignment()) now.add(tp.partition());
                    if (!now.equals(assigned)) {
                        assigned = now;
                        StringBuilder b = new StringBuilder(tag + "\"assigned\":[");
                        int i = 0;
                        for (int x : now) b.append(i++ > 0 ? "," : "").append(x);
                        out(b.append("]}").toString());
                    }
                }
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    out(tag + "\"rec\":[" + r.partition() + "," + r.offset() + "]}");
                    count[0] = ++n;
                    reported.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (!rs.isEmpty()) {
                    reported.clear();
                    // refused while the group rebalances (as Kafka refuses it): those records may be processed
                    // again by the partition's next owner
                    try { c.commitSync(); out(tag + "\"commit\":" + n + "}"); }
                    catch (CommitFailedException | org.apache.kafka.common.errors.RebalanceInProgressException
                           | org.apache.kafka.common.errors.StaleMemberEpochException
                           | org.apache.kafka.common.errors.FencedMemberEpochException
                           | org.apache.kafka.common.errors.UnknownMemberIdException e) {
                        out(tag + "\"commit_failed\":" + n + ",\"error\":" + q(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
                    }
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException ignored) {
        } catch (RuntimeException e) {
            out(tag + err(e).substring(1));
        } finally {
            c.close();
            out(tag + "\"closed\":true}");
        }
    }

    static void groupControl(String bs, Args a) throws Exception {
        Map<String, AtomicBoolean> stops = new HashMap<>();
        Map<String, Thread> threads = new HashMap<>();
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            if (w.length >= 2 && w[0].equals("add") && !threads.containsKey(w[1])) {
                String name = w[1];
                KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(groupProps(bs, a, w.length > 2 ? w[2] : null));
                AtomicBoolean stop = new AtomicBoolean(false);
                Thread t = new Thread(() -> groupMember(c, a.pos(0), name, stop, a.get("--protocol", "classic").equals("consumer")),
                                      "member-" + name);
                stops.put(name, stop);
                threads.put(name, t);
                t.start();
            } else if (w.length >= 2 && w[0].equals("close") && threads.containsKey(w[1])) {
                stops.get(w[1]).set(true);
                threads.remove(w[1]).join(30000);
            } else if (!line.isBlank()) {
                out("{\"error\":\"IllegalArgumentException\",\"message\":" + q("bad command: " + line) + "}");
            }
        }
        for (AtomicBoolean s : stops.values()) s.set(true);
        for (Thread t : threads.values()) t.join(30000);
    }

    static void offsetsForTimes(String bs, Args a) {
        String topic = a.pos(0);
        long ts = Long.parseLong(a.pos(1));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bs, a))) {
            Map<TopicPartition, Long> req = new HashMap<>();
            for (TopicPartition tp : partitions(c, topic, a)) req.put(tp, ts);
            Map<TopicPartition, OffsetAndTimestamp> res = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
            res.putAll(c.offsetsForTimes(req));
            StringBuilder b = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : res.entrySet()) {
                b.append(first ? "" : ",").append(q(String.valueOf(e.getKey().partition()))).append(":")
                 .append(e.getValue() == null ? "null" : "[" + e.getValue().offset() + "," + e.getValue().timestamp() + "]");
                first = false;
            }
            out(b.append("}").toString());
        }
    }

    static void listOffsets(String bs, Args a) {
        String topic = a.pos(0);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bs, a))) {
            List<TopicPartition> tps = partitions(c, topic, a);
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps), end = c.endOffsets(tps);
            StringBuilder b = new StringBuilder("{");
            for (int i = 0; i < tps.size(); i++) {
                TopicPartition tp = tps.get(i);
                b.append(i > 0 ? "," : "").append(q(String.valueOf(tp.partition()))).append(":{\"earliest\":").append(begin.get(tp))
                 .append(",\"latest\":").append(end.get(tp)).append("}");
            }
            out(b.append("}").toString());
        }
    }

    // ---- transactions ------------------------------------------------------------------------------
    static Properties txnProducerProps(String bs, String transactionalId, Args a) {
        Properties p = base(bs, null);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("transactional.id", transactionalId);
        p.put("linger.ms", "5");
        p.put("max.block.ms", "30000");
        p.put("delivery.timeout.ms", "60000");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.putAll(a.props);
        return p;
    }

    static byte[] utf8(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    static String className(Throwable e) { return e == null ? null : cause(e).getClass().getSimpleName(); }

    static String offsetsJson(Map<Integer, long[]> ranges) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<Integer, long[]> e : new TreeMap<>(ranges).entrySet()) {
            b.append(first ? "" : ",").append(q(String.valueOf(e.getKey()))).append(":[").append(e.getValue()[0]).append(",")
             .append(e.getValue()[1]).append(",").append(e.getValue()[2]).append("]");
            first = false;
        }
        return b.append("}").toString();
    }

    static void txnProduce(String bs, Args a) throws Exception {
        String topic = a.pos(0);
        int txns = Integer.parseInt(a.pos(1)), per = Integer.parseInt(a.pos(2));
        String tid = a.get("--transactional-id", "kafkite-java-txn");
        String fence = a.get("--fence", "none");
        if (!Set.of("none", "idle", "mid").contains(fence)) throw new IllegalArgumentException("--fence none|idle|mid");
        long t0 = System.nanoTime();
        int committed = 0, aborted = 0;
        KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(txnProducerProps(bs, tid, a));
        try {
            prod.initTransactions();
            int nparts = prod.partitionsFor(topic).size();
            for (int t = 0; t < txns; t++) {
                boolean abort = t % 2 == 1;
                prod.beginTransaction();
                List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
                for (int j = 0; j < per; j++)
                    for (int part = 0; part < nparts; part++)
                        fs.add(prod.send(new ProducerRecord<>(topic, part, utf8("k-" + part + "-" + j), utf8("t" + t + "-p" + part + "-" + j))));
                prod.flush();
                Map<Integer, long[]> ranges = new TreeMap<>();
                for (java.util.concurrent.Future<RecordMetadata> f : fs) {
                    RecordMetadata md = f.get();
                    long[] rg = ranges.computeIfAbsent(md.partition(), x -> new long[]{Long.MAX_VALUE, -1, 0});
                    rg[0] = Math.min(rg[0], md.offset()); rg[1] = Math.max(rg[1], md.offset()); rg[2]++;
                }
                if (abort) { prod.abortTransaction(); aborted++; } else { prod.commitTransaction(); committed++; }
                out("{\"txn\":" + t + ",\"result\":" + q(abort ? "abort" : "commit") + ",\"partitions\":" + offsetsJson(ranges) + "}");
            }
            if (!fence.equals("none")) {
                if (fence.equals("mid")) {
                    prod.beginTransaction();
                    List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
                    for (int part = 0; part < nparts; part++)
                        fs.add(prod.send(new ProducerRecord<>(topic, part, utf8("fenced"), utf8("fenced-p" + part))));
                    prod.flush();
                    for (java.util.concurrent.Future<RecordMetadata> f : fs) f.get();
                }
                try (KafkaProducer<byte[], byte[]> second = new KafkaProducer<>(txnProducerProps(bs, tid, a))) {
                    long i0 = System.nanoTime();
                    second.initTransactions();
                    long initMs = (System.nanoTime() - i0) / 1_000_000;
                    String sendError = null, commitError = null;
                    if (fence.equals("idle")) {
                        try {
                            prod.beginTransaction();
                            prod.send(new ProducerRecord<>(topic, 0, utf8("fenced"), utf8("fenced-p0"))).get(30, java.util.concurrent.TimeUnit.SECONDS);
                        } catch (Exception e) {
                            sendError = className(e);
                        }
                    }
                    try {
                        prod.commitTransaction();
                    } catch (Exception e) {
                        commitError = className(e);
                    }
                    out("{\"fence\":" + q(fence) + ",\"send_error\":" + q(sendError) + ",\"commit_error\":" + q(commitError)
                            + ",\"init_ms\":" + initMs + "}");
                    second.beginTransaction();
                    for (int part = 0; part < nparts; part++)
                        second.send(new ProducerRecord<>(topic, part, utf8("after"), utf8("after-fence-p" + part)));
                    second.commitTransaction();
                    out("{\"after_fence\":\"commit\"}");
                }
            }
        } finally {
            prod.close(Duration.ofSeconds(5));
        }
        out("{\"txns\":" + txns + ",\"committed\":" + committed + ",\"aborted\":" + aborted + ",\"elapsed_ms\":"
                + (System.nanoTime() - t0) / 1_000_000 + "}");
    }

    static void txnCtp(String bs, Args a) throws Exception {
        String in = a.pos(0), outTopic = a.pos(1), group = a.pos(2), tid = a.pos(3);
        int crashAfter = a.getInt("--crash-after-txns", -1);
        long deadline = System.currentTimeMillis() + a.getLong("--timeout-ms", 60000);
        Properties cp = consumerProps(bs, a);
        cp.put("group.id", group);
        cp.put("isolation.level", "read_committed");
        cp.put("max.poll.records", String.valueOf(a.getInt("--max-per-txn", 50)));
        cp.put("session.timeout.ms", "10000");
        cp.put("heartbeat.interval.ms", "500");
        if (a.opt.containsKey("--group-instance-id")) cp.put("group.instance.id", a.get("--group-instance-id", null));
        cp.putAll(a.props);
        long t0 = System.nanoTime();
        int txns = 0, records = 0;
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(txnProducerProps(bs, tid, a));
             KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            prod.initTransactions();
            out("{\"initialized\":true,\"init_ms\":" + (System.nanoTime() - t0) / 1_000_000 + "}");
            int nparts = c.partitionsFor(in).size();
            c.subscribe(List.of(in));
            Map<TopicPartition, Long> end = null;
            while (true) {
                if (System.currentTimeMillis() > deadline)
                    throw new org.apache.kafka.common.errors.TimeoutException("txn-ctp: not done after " + txns + " transactions, "
                            + records + " records; assignment " + c.assignment());
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                if (rs.isEmpty()) {
                    Set<TopicPartition> asg = c.assignment();
                    if (asg.size() == nparts) {
                        if (end == null) end = c.endOffsets(asg);
                        boolean done = true;
                        for (TopicPartition tp : asg) done &= c.position(tp) >= end.get(tp);
                        if (done) break;
                    }
                    continue;
                }
                prod.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    byte[] v = r.value() == null ? new byte[0] : r.value();
                    byte[] nv = new byte[4 + v.length];
                    System.arraycopy(utf8("out:"), 0, nv, 0, 4);
                    System.arraycopy(v, 0, nv, 4, v.length);
                    prod.send(new ProducerRecord<>(outTopic, r.partition(), r.key(), nv));
                    offs.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                prod.sendOffsetsToTransaction(offs, c.groupMetadata());
                if (txns == crashAfter) {
                    prod.flush();
                    out("{\"crashing\":true,\"txn\":" + txns + ",\"records\":" + rs.count() + "}");
                    try { Thread.sleep(60_000); } catch (InterruptedException ignored) { }
                    Runtime.getRuntime().halt(3);  // never killed: the test failed to send SIGKILL
                }
                prod.commitTransaction();
                records += rs.count();
                out("{\"txn\":" + txns + ",\"records\":" + rs.count() + "}");
                txns++;
            }
            out("{\"txns\":" + txns + ",\"records\":" + records + ",\"generation\":" + c.groupMetadata().generationId()
                    + ",\"elapsed_ms\":" + (System.nanoTime() - t0) / 1_000_000 + "}");
        }
    }

    static String longsJson(List<TopicPartition> tps, Map<TopicPartition, Long> m) {
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < tps.size(); i++)
            b.append(i > 0 ? "," : "").append(q(String.valueOf(tps.get(i).partition()))).append(":").append(m.get(tps.get(i)));
        return b.append("}").toString();
    }

    static void consumeAll(String bs, Args a) {
        String topic = a.pos(0);
        long timeout = a.getLong("--timeout-ms", 30000);
        Properties p = consumerProps(bs, a);
        p.putAll(a.props);
        Properties pu = consumerProps(bs, a);
        pu.put("isolation.level", "read_uncommitted");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p); KafkaConsumer<byte[], byte[]> u = new KafkaConsumer<>(pu)) {
            List<TopicPartition> tps = partitions(c, topic, a);
            Map<TopicPartition, Long> leo = u.endOffsets(tps);
            c.assign(tps);
            c.seekToBeginning(tps);
            int got = 0;
            long deadline = System.currentTimeMillis() + timeout;
            Map<TopicPartition, Long> pos = new HashMap<>();
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) { pos.put(tp, c.position(tp)); done &= pos.get(tp) >= leo.get(tp); }
                if (done || System.currentTimeMillis() >= deadline) break;
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(Math.max(1, Math.min(200, deadline - System.currentTimeMillis()))))) { out(record(r)); got++; }
            }
            boolean timedOut = false;
            for (TopicPartition tp : tps) timedOut |= pos.get(tp) < leo.get(tp);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            out("{\"consumed\":" + got + ",\"timed_out\":" + timedOut + ",\"log_end\":" + longsJson(tps, leo) + ",\"positions\":"
                    + longsJson(tps, pos) + ",\"end_offsets\":" + longsJson(tps, end) + "}");
        }
    }
}
