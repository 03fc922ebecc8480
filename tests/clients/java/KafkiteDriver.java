// A small CLI over the Java kafka-clients (3.9.1), for Kafkite's client matrix.
// Every command prints JSON lines on stdout. Compiled by .ci/install-clients.sh.
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
    static void out(String json) { System.out.println(json); System.out.flush(); }
    static String err(Throwable e) {
        Throwable c = (e instanceof ExecutionException && e.getCause() != null) ? e.getCause() : e;
        return "{\"error\":" + q(c.getClass().getSimpleName()) + ",\"message\":" + q(c.getMessage()) + "}";
    }

    static Properties base(String bs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    public static void main(String[] a) throws Exception {
        String cmd = a[0], bs = a[1];
        switch (cmd) {
            case "admin": admin(bs, Arrays.copyOfRange(a, 2, a.length)); break;
            case "produce": produce(bs, a[2], Integer.parseInt(a[3]), a[4], Boolean.parseBoolean(a[5]),
                                    a.length > 6 ? Integer.parseInt(a[6]) : 0); break;
            case "consume": consume(bs, a[2], Integer.parseInt(a[3])); break;
            case "group": group(bs, a[2], a[3], a.length > 4 ? a[4] : "range"); break;
            case "offsets-for-times": offsetsForTimes(bs, a[2], Long.parseLong(a[3])); break;
            default: throw new IllegalArgumentException(cmd);
        }
    }

    static void admin(String bs, String[] a) throws Exception {
        try (Admin admin = Admin.create(base(bs))) {
            try {
                switch (a[0]) {
                    case "create": {
                        Map<String, String> cfg = new HashMap<>();
                        for (int i = 4; i < a.length; i++) { String[] kv = a[i].split("=", 2); cfg.put(kv[0], kv[1]); }
                        NewTopic t = new NewTopic(a[1], Integer.parseInt(a[2]), Short.parseShort(a[3])).configs(cfg);
                        CreateTopicsResult r = admin.createTopics(List.of(t));
                        r.all().get();
                        out("{\"ok\":true,\"topic_id\":" + q(r.topicId(a[1]).get().toString()) + "}");
                        break;
                    }
                    case "list": {
                        StringBuilder b = new StringBuilder("{\"topics\":[");
                        List<String> names = new ArrayList<>(admin.listTopics().names().get());
                        Collections.sort(names);
                        for (int i = 0; i < names.size(); i++) b.append(i > 0 ? "," : "").append(q(names.get(i)));
                        out(b.append("]}").toString());
                        break;
                    }
                    case "describe": {
                        TopicDescription d = admin.describeTopics(List.of(a[1])).allTopicNames().get().get(a[1]);
                        Config c = admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, a[1])))
                                .all().get().values().iterator().next();
                        StringBuilder b = new StringBuilder("{\"name\":" + q(d.name()) + ",\"topic_id\":" + q(d.topicId().toString())
                                + ",\"internal\":" + d.isInternal() + ",\"partitions\":[");
                        for (int i = 0; i < d.partitions().size(); i++) {
                            TopicPartitionInfo p = d.partitions().get(i);
                            b.append(i > 0 ? "," : "").append("{\"partition\":").append(p.partition())
                             .append(",\"leader\":").append(p.leader() == null ? -1 : p.leader().id())
                             .append(",\"replicas\":").append(p.replicas().size()).append("}");
                        }
                        b.append("],\"configs\":{");
                        boolean first = true;
                        for (ConfigEntry e : c.entries()) {
                            b.append(first ? "" : ",").append(q(e.name())).append(":{\"value\":").append(q(e.value()))
                             .append(",\"source\":").append(q(e.source().name())).append("}");
                            first = false;
                        }
                        out(b.append("}}").toString());
                        break;
                    }
                    case "delete": admin.deleteTopics(List.of(a[1])).all().get(); out("{\"ok\":true}"); break;
                    case "cluster": {
                        DescribeClusterResult r = admin.describeCluster();
                        out("{\"cluster_id\":" + q(r.clusterId().get()) + ",\"controller\":" + r.controller().get().id()
                                + ",\"brokers\":" + r.nodes().get().size() + "}");
                        break;
                    }
                    default: throw new IllegalArgumentException(a[0]);
                }
            } catch (ExecutionException e) {
                out(err(e));
            }
        }
    }

    // pauseMsPer1000: sleep this long after every 1000 sends (to spread a run over time for failover tests)
    static void produce(String bs, String topic, int n, String compression, boolean idempotent, int pauseMsPer1000)
            throws Exception {
        Properties p = base(bs);
        p.put("acks", "all");
        p.put("compression.type", compression);
        p.put("enable.idempotence", String.valueOf(idempotent));
        p.put("linger.ms", "5");
        p.put("delivery.timeout.ms", "120000");
        p.put("retries", String.valueOf(Integer.MAX_VALUE));
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        Map<Integer, long[]> ranges = new TreeMap<>();
        int[] acked = {0};
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                byte[] k = ("java-" + (i % 97)).getBytes(StandardCharsets.UTF_8);
                StringBuilder v = new StringBuilder("value-" + i + "-");
                for (int j = 0; j < i % 50; j++) v.append('x');
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, k, v.toString().getBytes(StandardCharsets.UTF_8));
                r.headers().add("h", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
                r.headers().add("src", "java".getBytes(StandardCharsets.UTF_8));
                if (pauseMsPer1000 > 0 && i > 0 && i % 1000 == 0) Thread.sleep(pauseMsPer1000);
                prod.send(r, (md, e) -> {
                    synchronized (ranges) {
                        if (e != null) { errors.add(e.toString()); return; }
                        acked[0]++;
                        long[] rg = ranges.computeIfAbsent(md.partition(), x -> new long[]{Long.MAX_VALUE, -1, 0});
                        rg[0] = Math.min(rg[0], md.offset()); rg[1] = Math.max(rg[1], md.offset()); rg[2]++;
                    }
                });
            }
            prod.flush();
        }
        StringBuilder b = new StringBuilder("{\"acked\":" + acked[0] + ",\"errors\":" + errors.size() + ",\"partitions\":{");
        boolean first = true;
        for (Map.Entry<Integer, long[]> e : ranges.entrySet()) {
            b.append(first ? "" : ",").append(q(String.valueOf(e.getKey()))).append(":[").append(e.getValue()[0]).append(",")
             .append(e.getValue()[1]).append(",").append(e.getValue()[2]).append("]");
            first = false;
        }
        out(b.append("}}").toString());
    }

    static String record(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder h = new StringBuilder("[");
        boolean first = true;
        for (Header x : r.headers()) { h.append(first ? "" : ",").append("[").append(q(x.key())).append(",").append(b64(x.value())).append("]"); first = false; }
        return "{\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"ts\":" + r.timestamp() + ",\"k\":" + b64(r.key())
                + ",\"v\":" + b64(r.value()) + ",\"h\":" + h + "]}";
    }

    static Properties consumerProps(String bs) {
        Properties p = base(bs);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        return p;
    }

    static void consume(String bs, String topic, int n) {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bs))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            int got = 0;
            long deadline = System.currentTimeMillis() + 60000;
            while (got < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) { out(record(r)); got++; }
            }
        }
    }

    static void group(String bs, String topic, String group, String strategy) {
        Properties p = consumerProps(bs);
        p.put("group.id", group);
        p.put("session.timeout.ms", "3000");
        p.put("heartbeat.interval.ms", "300");
        String cls = strategy.equals("cooperative-sticky") ? CooperativeStickyAssignor.class.getName()
                : strategy.equals("roundrobin") ? RoundRobinAssignor.class.getName() : RangeAssignor.class.getName();
        p.put("partition.assignment.strategy", cls);
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            c.wakeup();
            try { main.join(10000); } catch (InterruptedException ignored) { }
        }));
        c.subscribe(List.of(topic));
        int n = 0;
        try {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : rs) { out("{\"rec\":[" + r.partition() + "," + r.offset() + "]}"); n++; }
                if (!rs.isEmpty()) { c.commitSync(); out("{\"commit\":" + n + "}"); }
            }
        } catch (org.apache.kafka.common.errors.WakeupException ignored) {
        } finally {
            c.close();
            out("{\"closed\":true}");
        }
    }

    static void offsetsForTimes(String bs, String topic, long ts) {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bs))) {
            Map<TopicPartition, Long> q = new HashMap<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) q.put(new TopicPartition(topic, pi.partition()), ts);
            StringBuilder b = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : new TreeMap<TopicPartition, OffsetAndTimestamp>(
                    Comparator.comparingInt(TopicPartition::partition)) {{ putAll(c.offsetsForTimes(q)); }}.entrySet()) {
                b.append(first ? "" : ",").append(q(String.valueOf(e.getKey().partition()))).append(":")
                 .append(e.getValue() == null ? "null" : "[" + e.getValue().offset() + "," + e.getValue().timestamp() + "]");
                first = false;
            }
            out(b.append("}").toString());
        }
    }
}
