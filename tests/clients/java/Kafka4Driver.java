// The Java kafka-clients 4.x APIs that 3.9.1 lacks, for Kafkite's client tests: compiled with KafkiteDriver.java
// (whose helpers it uses) into $KAFKITE_TOOLS/java4/classes only. Same conventions: JSON objects one a line on
// stdout, errors {"error": "<simple class name>", "message": "..."} (exit 0 for a broker's refusal of an admin
// command, 1 otherwise, 2 for usage).
//
//   regex-group BS PATTERN GROUP [--prop k=v ...]
//        a group.protocol=consumer consumer subscribed to SubscriptionPattern(PATTERN) (KIP-848's broker-side
//        regex, RE2J syntax: the broker resolves it); runs until SIGTERM, committing synchronously after every
//        poll: {"rec":[topic,partition,offset],"v":"<value, UTF-8>"} a record, {"assigned":["topic-p",...]} whenever
//        its assignment changes (checked at every poll), {"closed":true} once it has left the group.
//   group-configs BS GROUP [k=v ...] [--delete k]
//        Admin.incrementalAlterConfigs on ConfigResource(GROUP, GROUP) (SET each k=v, DELETE each --delete key;
//        nothing altered when none is given), then describeConfigs of it:
//        {"configs":{name:{"value","source"}}} (source: ConfigEntry.ConfigSource's name)
//   list-groups BS [--type classic|consumer]
//        Admin.listGroups (KIP-1043), all groups or those of one type:
//        {"groups":[{"group","type","state","protocol"}]} sorted by group (type and state: the enums' names or null)
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public class Kafka4Driver extends KafkiteDriver {
    public static void main(String[] argv) {
        runCommand("Kafka4Driver", argv, (cmd, bs, all) -> {
            Args a = new Args(all, 2);
            switch (cmd) {
                case "regex-group": regexGroup(bs, a); break;
                case "group-configs": groupConfigs(bs, a); break;
                case "list-groups": listGroups(bs, a); break;
                default: throw new IllegalArgumentException("unknown command " + cmd);
            }
        });
    }

    static void regexGroup(String bs, Args a) {
        Properties p = consumerProps(bs, a);
        p.put("group.id", a.pos(1));
        p.put("group.protocol", "consumer");
        p.putAll(a.props);
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
        AtomicBoolean stop = stopOnSigterm(c);
        c.subscribe(new SubscriptionPattern(a.pos(0)));
        Set<TopicPartition> assigned = Set.of();
        try {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : recs)
                    out("{\"rec\":[" + q(r.topic()) + "," + r.partition() + "," + r.offset() + "],\"v\":"
                        + q(r.value() == null ? null : new String(r.value(), java.nio.charset.StandardCharsets.UTF_8)) + "}");
                if (!recs.isEmpty()) c.commitSync();
                Set<TopicPartition> now = c.assignment();
                if (!now.equals(assigned)) {
                    assigned = new HashSet<>(now);
                    List<String> names = new ArrayList<>();
                    for (TopicPartition tp : now) names.add(tp.topic() + "-" + tp.partition());
                    Collections.sort(names);
                    out("{\"assigned\":" + strList(names) + "}");
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException ignored) {
        } finally {
            c.close();
            out("{\"closed\":true}");
        }
    }

    static void groupConfigs(String bs, Args a) throws Exception {
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, a.pos(0));
        try (Admin admin = Admin.create(base(bs, a))) {
            try {
                List<AlterConfigOp> ops = new ArrayList<>();
                for (String kv : a.pos.subList(1, a.pos.size())) {
                    String[] x = kv.split("=", 2);
                    ops.add(new AlterConfigOp(new ConfigEntry(x[0], x.length > 1 ? x[1] : ""), AlterConfigOp.OpType.SET));
                }
                if (a.opt.containsKey("--delete"))
                    ops.add(new AlterConfigOp(new ConfigEntry(a.get("--delete", null), null), AlterConfigOp.OpType.DELETE));
                if (!ops.isEmpty()) admin.incrementalAlterConfigs(Map.of(group, ops)).all().get();
                Config cfg = admin.describeConfigs(List.of(group)).all().get().get(group);
                List<ConfigEntry> entries = new ArrayList<>(cfg.entries());
                entries.sort(Comparator.comparing(ConfigEntry::name));
                StringBuilder b = new StringBuilder("{\"configs\":{");
                for (ConfigEntry e : entries)
                    b.append(b.charAt(b.length() - 1) == '{' ? "" : ",").append(q(e.name())).append(":{\"value\":")
                     .append(q(e.value())).append(",\"source\":").append(q(e.source().name())).append("}");
                out(b.append("}}").toString());
            } catch (java.util.concurrent.ExecutionException e) {
                out(err(e));  // the broker's refusal: exit 0
            }
        }
    }

    static void listGroups(String bs, Args a) throws Exception {
        ListGroupsOptions opts = new ListGroupsOptions();
        if (a.opt.containsKey("--type")) opts = opts.withTypes(Set.of(GroupType.parse(a.get("--type", null))));
        try (Admin admin = Admin.create(base(bs, a))) {
            List<GroupListing> gs = new ArrayList<>(admin.listGroups(opts).all().get());
            gs.sort(Comparator.comparing(GroupListing::groupId));
            StringBuilder b = new StringBuilder("{\"groups\":[");
            for (GroupListing g : gs)
                b.append(b.charAt(b.length() - 1) == '[' ? "" : ",").append("{\"group\":").append(q(g.groupId()))
                 .append(",\"type\":").append(q(g.type().map(Enum::name).orElse(null)))
                 .append(",\"state\":").append(q(g.groupState().map(Enum::name).orElse(null)))
                 .append(",\"protocol\":").append(q(g.protocol())).append("}");
            out(b.append("]}").toString());
        }
    }
}
