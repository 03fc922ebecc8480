// Kafkite's control plane from Java (kafka-clients + java.net.http, no test framework): a produce error injected
// three times (the producer retries and delivers; the request log shows the three failed Produce requests and the
// one served), then the partition's leader moved under the running producer (its next send gets
// NOT_LEADER_OR_FOLLOWER from the old leader, it refreshes its metadata and delivers to the new one), and a
// consumer reads every record once.
//
//   kafkite serve --in-memory --brokers 3 --port 0 --control-port 0   # prints bootstrap=... control=http://...
//   javac -cp kafka-clients.jar -d out examples/control/ControlExample.java
//   BOOTSTRAP=127.0.0.1:P1,... CONTROL_URL=http://127.0.0.1:C java -cp out:kafka-clients.jar:slf4j-api.jar ControlExample
//
// Prints "OK" and exits 0 when every check holds; else the failed check and exit 1. The control plane's JSON is read
// with a few regular expressions to stay dependency-free; a real test would use its JSON library.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ControlExample {
    static final String BOOTSTRAP = System.getenv("BOOTSTRAP");
    static final String CONTROL_URL = System.getenv("CONTROL_URL");
    static final String TOPIC = System.getenv().getOrDefault("TOPIC", "control-java-" + ProcessHandle.current().pid());
    static final HttpClient HTTP = HttpClient.newHttpClient();

    // one control request: the JSON answer, or an exception with the control plane's message
    static String control(String method, String route, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(CONTROL_URL + route)).timeout(Duration.ofSeconds(30))
            .header("content-type", "application/json");
        b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> resp = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        if (resp.statusCode() >= 400) throw new IllegalStateException(method + " " + route + ": " + resp.body());
        return resp.body();
    }

    static int intField(String json, String name) {
        Matcher m = Pattern.compile("\"" + name + "\": (-?\\d+)").matcher(json);
        check(m.find(), "no " + name + " in " + json);
        return Integer.parseInt(m.group(1));
    }

    static List<Integer> isr(String json) {
        Matcher m = Pattern.compile("\"isr\": \\[([^\\]]*)\\]").matcher(json);
        check(m.find(), "no isr in " + json);
        List<Integer> out = new ArrayList<>();
        for (String s : m.group(1).split(",\\s*")) if (!s.isEmpty()) out.add(Integer.parseInt(s));
        return out;
    }

    // this program's request-log entries of one API: each entry's error (or "null") and broker
    static List<String[]> requests(String api) throws Exception {
        String json = control("GET", "/v1/requests?api=" + api, null);
        List<String[]> out = new ArrayList<>();
        Matcher m = Pattern.compile("\\{[^{}]*\\}").matcher(json);
        while (m.find()) {
            String e = m.group();
            if (!e.contains("\"client_id\": \"java-example\"")) continue;
            Matcher err = Pattern.compile("\"error\": (null|\"([A-Z_]+)\")").matcher(e);
            check(err.find(), "no error field in " + e);
            out.add(new String[] {err.group(2) == null ? "null" : err.group(2), String.valueOf(intField(e, "broker"))});
        }
        return out;
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static String partition() throws Exception {
        return control("GET", "/v1/partitions?topic=" + TOPIC, null);
    }

    public static void main(String[] args) throws Exception {
        Properties common = new Properties();
        common.put("bootstrap.servers", BOOTSTRAP);
        common.put("client.id", "java-example");
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 3))).all().get();
        }
        long deadline = System.currentTimeMillis() + 30000;
        while (isr(partition()).size() < 3) {
            check(System.currentTimeMillis() < deadline, "a full ISR: not within 30 s");
            Thread.sleep(100);
        }
        Properties pc = (Properties) common.clone();
        pc.put("acks", "all");
        pc.put("retry.backoff.ms", "50");
        pc.put("key.serializer", StringSerializer.class.getName());
        pc.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pc)) {
            producer.send(new ProducerRecord<>(TOPIC, 0, null, "first")).get();

            // 1. NOT_LEADER_OR_FOLLOWER three times: the producer retries, the fourth Produce is served
            control("DELETE", "/v1/requests", null);
            control("POST", "/v1/errors", "{\"api\": \"Produce\", \"error\": \"NOT_LEADER_OR_FOLLOWER\", \"count\": 3}");
            producer.send(new ProducerRecord<>(TOPIC, 0, null, "second")).get();
            List<String> errors = new ArrayList<>();
            for (String[] r : requests("Produce")) errors.add(r[0]);
            check(errors.equals(List.of("NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_OR_FOLLOWER",
                                        "null")), "the request log's Produce errors: " + errors);
            check(!requests("Metadata").isEmpty(), "no Metadata refresh in the request log");
            System.out.println("produce error: the Java producer delivered after 3 x NOT_LEADER_OR_FOLLOWER");

            // 2. the leader moved under the running producer
            String before = partition();
            int old = intField(before, "leader");
            int moved = isr(before).stream().filter(b -> b != old).findFirst().orElseThrow();
            String after = control("POST", "/v1/leaders",
                                   "{\"topic\": \"" + TOPIC + "\", \"partition\": 0, \"broker\": " + moved + "}");
            check(intField(after, "leader") == moved, "leader after the move: " + after);
            control("DELETE", "/v1/requests", null);
            producer.send(new ProducerRecord<>(TOPIC, 0, null, "third")).get();
            List<String> brokers = new ArrayList<>();
            for (String[] r : requests("Produce")) brokers.add(r[1]);
            // the first to the old leader (its broker answers NOT_LEADER_OR_FOLLOWER), the retry to the new one
            check(brokers.equals(List.of(String.valueOf(old), String.valueOf(moved))),
                  "Produce requests after the move went to " + brokers);
            System.out.println("leader move: broker " + old + " -> " + moved + ", Produce requests went to " + brokers);
        }
        Properties cc = (Properties) common.clone();
        cc.put("key.deserializer", StringDeserializer.class.getName());
        cc.put("value.deserializer", StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cc)) {
            TopicPartition tp = new TopicPartition(TOPIC, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            deadline = System.currentTimeMillis() + 30000;
            while (got.size() < 3 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) got.add(r.value());
            }
        }
        check(got.equals(List.of("first", "second", "third")), "read back: " + got);
        System.out.println("OK");
    }
}
