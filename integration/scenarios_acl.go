package integration

// Scenarios of ACLs and StandardAuthorizer. Each starts its own
// single node (Env.StartNode) of the target's flavor with the authorizer
// configured, so that the same scenario runs against Apache Kafka 4.3.1
// and Gregor. The clients connect on PLAINTEXT, as User:ANONYMOUS.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

const (
	mainACLs           = "org.apache.kafka.tools.AclCommand"
	standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
)

func aclScenarios() []Scenario {
	return []Scenario{
		{Name: "acl/kafka-acls", Doc: "kafka-acls --add, --list (all, by resource, by principal), --remove on a node with StandardAuthorizer: the tool's exact output", Timeout: 5 * time.Minute, OwnNodes: true, Run: aclKafkaACLs},
		{Name: "acl/consumer-denied-topic", Doc: "a DENY READ for User:ANONYMOUS on a topic: the console consumer fails with TopicAuthorizationException (TOPIC_AUTHORIZATION_FAILED) and reads nothing; after --remove it reads everything", Timeout: 5 * time.Minute, OwnNodes: true, Run: aclConsumerDeniedTopic},
		{Name: "acl/consumer-denied-group", Doc: "a DENY READ for User:ANONYMOUS on a group: the console consumer in that group fails with GroupAuthorizationException (GROUP_AUTHORIZATION_FAILED); another group reads", Timeout: 5 * time.Minute, OwnNodes: true, Run: aclConsumerDeniedGroup},
		{Name: "acl/no-authorizer", Doc: "kafka-acls --list on the target (no authorizer configured) fails with SecurityDisabledException: No Authorizer is configured on the broker", Run: aclNoAuthorizer},
		{Name: "acl/deny-per-api", Doc: "User:ANONYMOUS denied ALL on a topic, a group and a transactional id: one request of every API family that names them gets TOPIC_, GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED where Kafka puts it", Timeout: 4 * time.Minute, OwnNodes: true, Run: aclDenyPerAPI},
		{Name: "acl/deny-cluster", Doc: "User:ANONYMOUS allowed only CLUSTER_ACTION on the cluster (so no other cluster operation): the cluster-level APIs answer CLUSTER_AUTHORIZATION_FAILED where Kafka puts it, and those Kafka lets a topic-level grant cover (CreateTopics, DeleteTopics, InitProducerId) still pass", Timeout: 4 * time.Minute, OwnNodes: true, Run: aclDenyCluster},
		{Name: "acl/mtls-two-users", Doc: "two mTLS clients (principals User:CN=alice,... and User:CN=bob,... from their certificates), allow.everyone.if.no.acl.found off: alice, granted READ on the topic and group, consumes everything; bob gets TopicAuthorizationException", Timeout: 5 * time.Minute, OwnNodes: true, Run: aclMTLSTwoUsers},
		{Name: "acl/sasl-two-users", Doc: "two SCRAM-SHA-256 users on a SASL_PLAINTEXT listener (principals User:alice and User:bob), allow.everyone.if.no.acl.found off: alice, granted READ on the topic and group, consumes everything; bob, granted READ on the topic only, gets GroupAuthorizationException in that group and TopicAuthorizationException on another topic", Timeout: 5 * time.Minute, OwnNodes: true, Run: aclSASLTwoUsers},
		{Name: "acl/api-errors", Doc: "CreateAcls, DescribeAcls and DeleteAcls on the wire: per-creation validation codes and messages, a whole request failing on ANY/MATCH codes, unknown filter codes, duplicates, and CLUSTER_AUTHORIZATION_FAILED without ALTER/DESCRIBE on the cluster", Timeout: 4 * time.Minute, OwnNodes: true, Run: aclAPIErrors},
	}
}

// aclNode starts a node with StandardAuthorizer and the given properties
// on top.
func aclNode(ctx context.Context, e *Env, props map[string]string) (*SingleNode, error) {
	p := map[string]string{"authorizer.class.name": standardAuthorizer}
	for k, v := range props {
		p[k] = v
	}
	return e.StartNode(ctx, NodeSpec{Properties: p})
}

// acls runs kafka-acls against n and returns what it printed.
func acls(ctx context.Context, e *Env, n *SingleNode, args ...string) (string, error) {
	out, err := e.KafkaOn(ctx, n.Bootstrap(), "", mainACLs, args...)
	if err != nil {
		return "", fmt.Errorf("kafka-acls %s: %w", strings.Join(args, " "), err)
	}
	return out.Stdout, nil
}

func aclKafkaACLs(ctx context.Context, e *Env) error {
	// The tool runs as User:ANONYMOUS, which must stay allowed to manage
	// ACLs once some exist on the cluster.
	n, err := aclNode(ctx, e, map[string]string{"super.users": "User:ANONYMOUS"})
	if err != nil {
		return err
	}
	// What Kafka 4.3.1's tool prints for these ACLs. It prints sets
	// (Java hash sets of ResourcePattern and AccessControlEntry, whose
	// order changes between runs): outputs are compared with the blocks
	// and the entries of each block in a canonical order.
	const (
		orders  = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
		appGrp  = "ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)"
		cluster = "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)"
		read    = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
		write   = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
		bob     = "(principal=User:bob, host=*, operation=DESCRIBE, permissionType=DENY)"
		carol   = "(principal=User:carol, host=10.0.0.1, operation=ALTER, permissionType=ALLOW)"
	)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write", "--topic", "orders"},
			"Adding ACLs for resource `" + orders + "`: \n \t" + read + "\n\t" + write + "\n\n"},
		{[]string{"--add", "--deny-principal", "User:bob", "--operation", "Describe", "--group", "app-", "--resource-pattern-type", "prefixed"},
			"Adding ACLs for resource `" + appGrp + "`: \n \t" + bob + "\n\n"},
		{[]string{"--add", "--allow-principal", "User:carol", "--allow-host", "10.0.0.1", "--operation", "Alter", "--cluster"},
			"Adding ACLs for resource `" + cluster + "`: \n \t" + carol + "\n\n"},
		// Adding an ACL that exists says so and adds nothing.
		{[]string{"--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"},
			"Acl (pattern=" + orders + ", entry=" + read + ") already exists.\n"},
		{[]string{"--list", "--topic", "orders"},
			"Current ACLs for resource `" + orders + "`:\n\t" + read + "\n\t" + write + "\n\n"},
		{[]string{"--list", "--principal", "User:bob"},
			"ACLs for principal `User:bob`\nCurrent ACLs for resource `" + appGrp + "`:\n\t" + bob + "\n\n"},
		{[]string{"--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"}, ""},
		{[]string{"--list", "--topic", "orders"},
			"Current ACLs for resource `" + orders + "`:\n\t" + write + "\n\n"},
		// A whole resource's ACLs at once.
		{[]string{"--remove", "--force", "--group", "app-", "--resource-pattern-type", "prefixed"}, ""},
		{[]string{"--list", "--group", "app-", "--resource-pattern-type", "prefixed"}, ""},
		{[]string{"--list"},
			"Current ACLs for resource `" + cluster + "`:\n\t" + carol + "\n\n" +
				"Current ACLs for resource `" + orders + "`:\n\t" + write + "\n\n"},
	}
	var mismatches []error
	for _, s := range steps {
		got, err := acls(ctx, e, n, s.args...)
		if err != nil {
			return err
		}
		// Every step runs, so that one run shows every difference.
		if canonicalACLOutput(got) != canonicalACLOutput(s.want) {
			mismatches = append(mismatches, fmt.Errorf("kafka-acls %s printed:\n%q\nwant:\n%q", strings.Join(s.args, " "), got, s.want))
		}
	}
	return errors.Join(mismatches...)
}

// canonicalACLOutput is kafka-acls' output with its blocks (separated by
// an empty line) in sorted order and the entry lines of each block (those
// that start with a tab, the first after a space) sorted: the tool prints
// Java hash sets, whose order changes between runs.
func canonicalACLOutput(out string) string {
	blocks := strings.Split(out, "\n\n")
	for i, b := range blocks {
		var head, entries []string
		for _, line := range strings.Split(b, "\n") {
			if e, ok := strings.CutPrefix(strings.TrimPrefix(line, " "), "\t"); ok {
				entries = append(entries, e)
			} else {
				head = append(head, line)
			}
		}
		slices.Sort(entries)
		blocks[i] = strings.Join(append(head, entries...), "\n")
	}
	slices.Sort(blocks)
	return strings.Join(blocks, "\n\n")
}

// produceLinesOn writes lines to topic on n with the console producer.
func produceLinesOn(ctx context.Context, e *Env, n *SingleNode, topic string, lines []string) error {
	out, err := e.KafkaOn(ctx, n.Bootstrap(), strings.Join(lines, "\n")+"\n", mainProducer, "--topic", topic)
	if err != nil {
		return fmt.Errorf("console producer: %w: %s", err, out.Tail())
	}
	return nil
}

// consume runs the console consumer on n, in group (none: ""), for up to
// max records.
func consume(ctx context.Context, e *Env, n *SingleNode, topic, group string, max int) (Output, error) {
	args := []string{"--topic", topic, "--from-beginning", "--max-messages", fmt.Sprint(max), "--timeout-ms", "20000"}
	if group != "" {
		args = append(args, "--group", group)
	}
	return e.KafkaOn(ctx, n.Bootstrap(), "", mainConsumer, args...)
}

// deniedConsumer checks that a console consumer stopped on an
// authorization error: it printed no record, each of wants, and that it
// processed no message.
func deniedConsumer(out Output, wants ...string) error {
	if strings.TrimSpace(out.Stdout) != "" {
		return fmt.Errorf("the denied console consumer printed records: %q", truncate(out.Stdout, 200))
	}
	for _, want := range append(wants, "Processed a total of 0 messages") {
		if !strings.Contains(out.Stderr, want) {
			return fmt.Errorf("the denied console consumer did not print %q: %s", want, truncate(out.Stderr, 600))
		}
	}
	return nil
}

func aclConsumerDeniedTopic(ctx context.Context, e *Env) error {
	n, err := aclNode(ctx, e, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	if err != nil {
		return err
	}
	topic := e.Name("secret")
	lines := []string{"a", "b", "c"}
	if err := produceLinesOn(ctx, e, n, topic, lines); err != nil {
		return err
	}
	if _, err := acls(ctx, e, n, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Read", "--topic", topic); err != nil {
		return err
	}
	// The tool ends (with exit status 0, as Kafka's does) on the
	// exception; the metadata answer named the error code.
	out, _ := consume(ctx, e, n, topic, "", len(lines))
	if err := deniedConsumer(out, "{"+topic+"=TOPIC_AUTHORIZATION_FAILED}",
		"org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: ["+topic+"]"); err != nil {
		return err
	}
	if _, err := acls(ctx, e, n, "--remove", "--force", "--deny-principal", "User:ANONYMOUS", "--operation", "Read", "--topic", topic); err != nil {
		return err
	}
	out, err = consume(ctx, e, n, topic, "", len(lines))
	if err != nil {
		return fmt.Errorf("the console consumer after the DENY was removed: %w: %s", err, out.Tail())
	}
	if got := strings.Fields(out.Stdout); strings.Join(got, ",") != strings.Join(lines, ",") {
		return fmt.Errorf("after the DENY was removed the consumer read %q, want %q", got, lines)
	}
	return nil
}

func aclConsumerDeniedGroup(ctx context.Context, e *Env) error {
	n, err := aclNode(ctx, e, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	if err != nil {
		return err
	}
	topic := e.Name("shared")
	lines := []string{"x", "y"}
	if err := produceLinesOn(ctx, e, n, topic, lines); err != nil {
		return err
	}
	group := e.Name("closed-group")
	if _, err := acls(ctx, e, n, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Read", "--group", group); err != nil {
		return err
	}
	out, _ := consume(ctx, e, n, topic, group, len(lines))
	if err := deniedConsumer(out, "org.apache.kafka.common.errors.GroupAuthorizationException: Not authorized to access group: "+group); err != nil {
		return err
	}
	out, err = consume(ctx, e, n, topic, e.Name("open-group"), len(lines))
	if err != nil {
		return fmt.Errorf("the console consumer in another group: %w: %s", err, out.Tail())
	}
	if got := strings.Fields(out.Stdout); strings.Join(got, ",") != strings.Join(lines, ",") {
		return fmt.Errorf("another group read %q, want %q", got, lines)
	}
	return nil
}

func aclNoAuthorizer(ctx context.Context, e *Env) error {
	out, err := e.Kafka(ctx, mainACLs, "--list")
	want := "org.apache.kafka.common.errors.SecurityDisabledException: No Authorizer is configured on the broker"
	if !strings.Contains(out.Stdout+out.Stderr, want) {
		return fmt.Errorf("kafka-acls --list without an authorizer (err %v) printed no %q: %s", err, want, truncate(out.Stdout+out.Stderr, 400))
	}
	return nil
}

// openACLNode starts a node with StandardAuthorizer where everything no
// ACL covers is allowed, and returns a client of it (versions capped when
// given) that does not retry.
func openACLNode(ctx context.Context, e *Env, versions *kversion.Versions) (*kgo.Client, error) {
	n, err := aclNode(ctx, e, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(n.Bootstrap()), kgo.RequestRetries(0)}
	if versions != nil {
		opts = append(opts, kgo.MaxVersions(versions))
	}
	return kgo.NewClient(opts...)
}

// reportProblems is the scenario's outcome: every problem found, also
// written whole to problems.txt in its work dir (the report truncates).
func reportProblems(e *Env, problems []error) error {
	err := errors.Join(problems...)
	if err != nil {
		_ = os.WriteFile(filepath.Join(e.Dir, "problems.txt"), []byte(err.Error()+"\n"), 0o644)
	}
	return err
}

// aclCreation is one CreateAcls entry.
func aclCreation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

// codeAndMessage is an answer's error as "CODE: message" ("NONE" and
// "<nil>" for none).
func codeAndMessage(code int16, msg *string) string {
	name := "NONE"
	if err := kerr.ErrorForCode(code); err != nil {
		name = err.(*kerr.Error).Message
	}
	m := "<nil>"
	if msg != nil {
		m = *msg
	}
	return name + ": " + m
}

func aclAPIErrors(ctx context.Context, e *Env) error {
	cl, err := openACLNode(ctx, e, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	const (
		topic   = kmsg.ACLResourceTypeTopic
		cluster = kmsg.ACLResourceTypeCluster
		lit     = kmsg.ACLResourcePatternTypeLiteral
		read    = kmsg.ACLOperationRead
		allow   = kmsg.ACLPermissionTypeAllow
	)
	var problems []error
	check := func(what, got, want string) {
		if got != want {
			problems = append(problems, fmt.Errorf("%s: got %q, want %q", what, got, want))
		}
	}
	create := func(cs ...kmsg.CreateACLsRequestCreation) ([]string, error) {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = cs
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("CreateAcls: %w", err)
		}
		var out []string
		for _, r := range resp.Results {
			out = append(out, codeAndMessage(r.ErrorCode, r.ErrorMessage))
		}
		return out, nil
	}
	// Each creation is validated on its own.
	got, err := create(
		aclCreation(topic, "t", lit, "User:alice", "*", read, allow),
		aclCreation(cluster, "other", lit, "User:alice", "*", kmsg.ACLOperationAlter, allow),
		aclCreation(topic, "", lit, "User:alice", "*", read, allow),
		aclCreation(topic, "t", lit, "alice", "*", read, allow),
		aclCreation(topic, "t", lit, "User:alice", "*", 42, allow),
		aclCreation(99, "t", lit, "User:alice", "*", read, allow),
		aclCreation(topic, "t", 9, "User:alice", "*", read, allow),
		aclCreation(topic, "t", lit, "User:alice", "*", read, 7),
		aclCreation(topic, "t", lit, "User:", "not-an-address", read, allow),
		aclCreation(topic, "t", lit, "User:alice", "*", read, allow),
	)
	if err != nil {
		return err
	}
	// Success keeps Kafka's default message, "" (DeleteAcls' is null).
	want := []string{
		"NONE: ",
		"INVALID_REQUEST: The only valid name for the CLUSTER resource is kafka-cluster",
		"INVALID_REQUEST: Invalid empty resource name",
		"INVALID_REQUEST: Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)",
		"INVALID_REQUEST: Invalid operation UNKNOWN",
		"INVALID_REQUEST: Invalid resourceType UNKNOWN",
		"INVALID_REQUEST: Invalid patternType UNKNOWN",
		"INVALID_REQUEST: Invalid permissionType UNKNOWN",
		"NONE: ",
		"NONE: ",
	}
	check("CreateAcls results", strings.Join(got, " | "), strings.Join(want, " | "))
	// A MATCH pattern type (or any ANY code) fails the whole request.
	got, err = create(aclCreation(topic, "u", lit, "User:alice", "*", read, allow), aclCreation(topic, "u", kmsg.ACLResourcePatternTypeMatch, "User:alice", "*", read, allow))
	if err != nil {
		return err
	}
	check("CreateAcls with a MATCH pattern", strings.Join(got, " | "), "UNKNOWN_SERVER_ERROR: <nil> | UNKNOWN_SERVER_ERROR: <nil>")

	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourceName, describe.ResourcePatternType = topic, kmsg.StringPtr("t"), kmsg.ACLResourcePatternTypeMatch
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr, err := describe.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("DescribeAcls: %w", err)
	}
	var entries []string
	for _, r := range dr.Resources {
		for _, a := range r.ACLs {
			entries = append(entries, fmt.Sprintf("%s/%s/%d %s@%s %d %d", r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType))
		}
	}
	slices.Sort(entries)
	check("DescribeAcls", codeAndMessage(dr.ErrorCode, dr.ErrorMessage)+" "+strings.Join(entries, ", "),
		"NONE:  TOPIC/t/3 User:@not-an-address 3 3, TOPIC/t/3 User:alice@* 3 3")

	del := kmsg.NewPtrDeleteACLsRequest()
	filter := func(rt kmsg.ACLResourceType, op kmsg.ACLOperation) kmsg.DeleteACLsRequestFilter {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = rt, kmsg.ACLResourcePatternTypeAny, op, kmsg.ACLPermissionTypeAny
		return f
	}
	del.Filters = []kmsg.DeleteACLsRequestFilter{filter(99, kmsg.ACLOperationAny), filter(topic, 77), filter(topic, kmsg.ACLOperationAny)}
	delr, err := del.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("DeleteAcls: %w", err)
	}
	var deleted []string
	for _, r := range delr.Results {
		deleted = append(deleted, fmt.Sprintf("%s (%d)", codeAndMessage(r.ErrorCode, r.ErrorMessage), len(r.MatchingACLs)))
	}
	check("DeleteAcls results", strings.Join(deleted, " | "), "INVALID_REQUEST: Unknown patternFilter. (0) | INVALID_REQUEST: Unknown entryFilter. (0) | NONE: <nil> (2)")

	// Without ALTER on the cluster, ACLs cannot be changed; without
	// DESCRIBE, not listed. The node's own traffic keeps CLUSTER_ACTION.
	got, err = create(
		aclCreation(cluster, "kafka-cluster", lit, "User:ANONYMOUS", "*", kmsg.ACLOperationClusterAction, allow),
		aclCreation(cluster, "kafka-cluster", lit, "User:ANONYMOUS", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeDeny))
	if err != nil {
		return err
	}
	check("CreateAcls on the cluster", strings.Join(got, " | "), "NONE:  | NONE: ")
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(topic, "v", lit, "User:alice", "*", read, allow)}
	cr, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("CreateAcls without ALTER: %w", err)
	}
	r := cr.Results[0]
	if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage == nil ||
		!strings.HasPrefix(*r.ErrorMessage, "Request Request(") || !strings.HasSuffix(*r.ErrorMessage, " needs ALTER permission.") {
		problems = append(problems, fmt.Errorf("CreateAcls without ALTER on the cluster: %s", codeAndMessage(r.ErrorCode, r.ErrorMessage)))
	}
	describe.ResourceName, describe.ResourcePatternType = nil, kmsg.ACLResourcePatternTypeAny
	dr, err = describe.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("DescribeAcls without DESCRIBE: %w", err)
	}
	if dr.ErrorCode != kerr.ClusterAuthorizationFailed.Code || dr.ErrorMessage == nil || !strings.HasSuffix(*dr.ErrorMessage, " needs DESCRIBE permission.") {
		problems = append(problems, fmt.Errorf("DescribeAcls without DESCRIBE on the cluster: %s", codeAndMessage(dr.ErrorCode, dr.ErrorMessage)))
	}
	return reportProblems(e, problems)
}

// aclCase is one request of acl/deny-per-api and the error code it must
// get where it carries it.
type aclCase struct {
	name string
	req  kmsg.Request
	code func(kmsg.Response) int16
	want int16
}

// aclDenyPerAPI sends one request of each API family the ACLs deny to a
// node where User:ANONYMOUS may do everything but touch the topic, group
// and transactional id called closed, and checks each error code where
// Kafka puts it.
func aclDenyPerAPI(ctx context.Context, e *Env) error {
	// AddPartitionsToTxn v4+ are the brokers' form: clients send v3.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
	// Metadata reports the cluster's authorized operations up to v10.
	versions.SetMaxKeyVersion(int16(kmsg.Metadata), 10)
	cl, err := openACLNode(ctx, e, versions)
	if err != nil {
		return err
	}
	defer cl.Close()
	b := cl.Broker(1)
	for _, topic := range []string{"open", "closed", "mixed"} {
		req := kmsg.NewPtrCreateTopicsRequest()
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = topic, 1, 1
		req.Topics = append(req.Topics, t)
		req.TimeoutMillis = 30000
		if _, err := req.RequestWith(ctx, cl); err != nil {
			return fmt.Errorf("creating %s: %w", topic, err)
		}
	}
	ids := map[string][16]byte{}
	if err := until(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return false, err
		}
		for _, t := range resp.Topics {
			if t.Topic != nil && len(t.Partitions) > 0 && t.Partitions[0].Leader >= 0 {
				ids[*t.Topic] = t.TopicID
			}
		}
		return len(ids) >= 3, nil
	}); err != nil {
		return fmt.Errorf("waiting for the topics: %w", err)
	}
	deny := func(rt kmsg.ACLResourceType, name string) kmsg.CreateACLsRequestCreation {
		return aclCreation(rt, name, kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny)
	}
	if got, err := func() ([]string, error) {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = []kmsg.CreateACLsRequestCreation{deny(kmsg.ACLResourceTypeTopic, "closed"), deny(kmsg.ACLResourceTypeGroup, "closed"), deny(kmsg.ACLResourceTypeTransactionalId, "closed"),
			aclCreation(kmsg.ACLResourceTypeTopic, "mixed", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
			aclCreation(kmsg.ACLResourceTypeTopic, "mixed", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", "*", kmsg.ACLOperationAlterConfigs, kmsg.ACLPermissionTypeAllow)}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, r := range resp.Results {
			out = append(out, codeAndMessage(r.ErrorCode, r.ErrorMessage))
		}
		return out, nil
	}(); err != nil || strings.Join(got, "|") != "NONE: |NONE: |NONE: |NONE: |NONE: " {
		return fmt.Errorf("creating the DENY ACLs: %v %v", got, err)
	}
	// The brokers follow the committed ACLs shortly after.
	if err := until(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("closed")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == kerr.TopicAuthorizationFailed.Code, err
	}); err != nil {
		return fmt.Errorf("waiting for the ACLs to apply: %w", err)
	}
	// The group coordinator exists and has loaded (for a group ANONYMOUS
	// may use).
	if err := until(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "open"
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && resp.ErrorCode == 0, nil
	}); err != nil {
		return fmt.Errorf("waiting for the group coordinator: %w", err)
	}
	if err := until(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "open"
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "open"}}
		resp, err := b.Request(ctx, req)
		if err != nil {
			return false, nil
		}
		r := resp.(*kmsg.OffsetFetchResponse)
		return len(r.Groups) == 1 && r.Groups[0].ErrorCode == 0 || len(r.Groups) == 0 && r.ErrorCode == 0, nil
	}); err != nil {
		return fmt.Errorf("waiting for the group coordinator: %w", err)
	}

	cases := aclDenyCases(ids)
	problems := runACLCases(ctx, b, cases)
	problems = append(problems, aclAuthorizedOperations(ctx, b, ids)...)
	e.Notef("%d requests", len(cases))
	return reportProblems(e, problems)
}

// aclAuthorizedOperations checks the authorized-operations fields on the
// node acl/deny-per-api sets up: every operation of an ACL-free cluster
// and group, and on topic mixed READ and ALTER_CONFIGS with what they
// imply (DESCRIBE, DESCRIBE_CONFIGS).
func aclAuthorizedOperations(ctx context.Context, b *kgo.Broker, ids map[string][16]byte) []error {
	const (
		allCluster = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
		allGroup   = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11
		mixedTopic = 1<<3 | 1<<8 | 1<<10 | 1<<11
	)
	var problems []error
	expect := func(what string, got, want int32) {
		if got != want {
			problems = append(problems, fmt.Errorf("%s: authorized operations %b, want %b", what, got, want))
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(10)
	md.IncludeClusterAuthorizedOperations, md.IncludeTopicAuthorizedOperations = true, true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("mixed")
	md.Topics = append(md.Topics, rt)
	if resp, err := b.Request(ctx, md); err != nil {
		problems = append(problems, fmt.Errorf("Metadata: %w", err))
	} else if r := resp.(*kmsg.MetadataResponse); len(r.Topics) != 1 {
		problems = append(problems, fmt.Errorf("Metadata answered %d topics", len(r.Topics)))
	} else {
		expect("Metadata v10 cluster", r.AuthorizedOperations, allCluster)
		expect("Metadata topic mixed", r.Topics[0].AuthorizedOperations, mixedTopic)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations, dc.EndpointType = true, 1
	if resp, err := b.Request(ctx, dc); err != nil {
		problems = append(problems, fmt.Errorf("DescribeCluster: %w", err))
	} else {
		expect("DescribeCluster", resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations, allCluster)
	}
	// A group that exists: a simple consumer's committed offset makes it.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "open", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "open", TopicID: ids["open"], Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	if resp, err := b.Request(ctx, oc); err != nil || resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		problems = append(problems, fmt.Errorf("committing an offset for group open: %v %+v", err, resp))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"open"}, true
	if resp, err := b.Request(ctx, dg); err != nil {
		problems = append(problems, fmt.Errorf("DescribeGroups: %w", err))
	} else if g := resp.(*kmsg.DescribeGroupsResponse).Groups; len(g) != 1 || g[0].ErrorCode != 0 {
		problems = append(problems, fmt.Errorf("DescribeGroups of group open: %+v", g))
	} else {
		expect("DescribeGroups open", g[0].AuthorizedOperations, allGroup)
	}
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 10
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "mixed"}}
	if resp, err := b.Request(ctx, dtp); err != nil {
		problems = append(problems, fmt.Errorf("DescribeTopicPartitions: %w", err))
	} else if ts := resp.(*kmsg.DescribeTopicPartitionsResponse).Topics; len(ts) != 1 {
		problems = append(problems, fmt.Errorf("DescribeTopicPartitions answered %d topics", len(ts)))
	} else {
		expect("DescribeTopicPartitions mixed", ts[0].AuthorizedOperations, mixedTopic)
	}
	return problems
}

// runACLCases sends each case's request to b and checks its code. A
// coordinator still loading (COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE) is asked again: the answer that counts is
// the one past it.
func runACLCases(ctx context.Context, b *kgo.Broker, cases []aclCase) []error {
	var problems []error
	for _, c := range cases {
		var got int16
		var err error
		ok := true
		for attempt := 0; attempt < 50; attempt++ {
			var resp kmsg.Response
			if resp, err = b.Request(ctx, c.req); err != nil {
				break
			}
			if got, ok = safeCode(c.code, resp); !ok {
				err = fmt.Errorf("the answer lacks the item: %+v", resp)
				break
			}
			if got != kerr.CoordinatorLoadInProgress.Code && got != kerr.CoordinatorNotAvailable.Code || got == c.want {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		switch {
		case err != nil:
			problems = append(problems, fmt.Errorf("%s: %w", c.name, err))
		case got != c.want:
			problems = append(problems, fmt.Errorf("%s: %d (%v), want %d (%v)", c.name, got, kerr.ErrorForCode(got), c.want, kerr.ErrorForCode(c.want)))
		}
	}
	return problems
}

// safeCode reads an answer's code; ok is false when the answer does not
// have the item the code sits in.
func safeCode(code func(kmsg.Response) int16, resp kmsg.Response) (c int16, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return code(resp), true
}

func aclDenyCases(ids map[string][16]byte) []aclCase {
	const (
		topicDenied = 29 // TOPIC_AUTHORIZATION_FAILED
		groupDenied = 30 // GROUP_AUTHORIZATION_FAILED
		txnDenied   = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	)
	closed := "closed"
	var cases []aclCase
	add := func(name string, req kmsg.Request, want int16, code func(kmsg.Response) int16) {
		cases = append(cases, aclCase{name: name, req: req, code: code, want: want})
	}
	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	bb.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
	plain, _ := bb.Build()
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = 1, 5000
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: closed, TopicID: ids[closed], Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: plain}}}}
	add("Produce to a denied topic", produce, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode })

	tb := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(5, 0, 0).SetTransactional(true)
	tb.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
	txnBatch, _ := tb.Build()
	txnProduce := kmsg.NewPtrProduceRequest()
	txnProduce.Acks, txnProduce.TimeoutMillis, txnProduce.TransactionID = 1, 5000, &closed
	txnProduce.Topics = []kmsg.ProduceRequestTopic{{Topic: "open", TopicID: ids["open"], Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: txnBatch}}}}
	add("transactional Produce with a denied transactional id", txnProduce, txnDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode })

	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes, fetch.SessionEpoch = -1, 10, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = closed, ids[closed]
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	add("Fetch of a denied topic", fetch, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode })

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = closed
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	add("ListOffsets of a denied topic", lo, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode })

	// CLUSTER_ACTION (allowed: no ACL on the cluster) lets anyone ask
	// OffsetForLeaderEpoch of any topic.
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.ReplicaID = -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = closed
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.CurrentLeaderEpoch, op.LeaderEpoch = -1, 0
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	add("OffsetForLeaderEpoch with CLUSTER_ACTION", oe, 0, func(r kmsg.Response) int16 {
		return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	})

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.TimeoutMillis = 5000
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: closed, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: -1}}}}
	add("DeleteRecords of a denied topic", dr, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode })

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: closed, Partitions: []int32{0}}}
	add("DescribeProducers of a denied topic", dp, topicDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
	})

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: closed}}
	add("DescribeConfigs of a denied topic", dc, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode })

	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: closed,
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("100000")}}}}
	add("IncrementalAlterConfigs of a denied topic", iac, topicDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	})

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 5000
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: closed, Count: 2}}
	add("CreatePartitions of a denied topic", cp, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode })

	for _, kt := range []struct {
		typ  int8
		want int16
	}{{0, groupDenied}, {1, txnDenied}} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = kt.typ, closed, []string{closed}
		add(fmt.Sprintf("FindCoordinator of a denied key (type %d)", kt.typ), fc, kt.want, func(r kmsg.Response) int16 {
			resp := r.(*kmsg.FindCoordinatorResponse)
			if len(resp.Coordinators) > 0 {
				return resp.Coordinators[0].ErrorCode
			}
			return resp.ErrorCode
		})
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = closed, 10000, 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	add("JoinGroup of a denied group", join, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode })
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.ProtocolType, sync.Protocol = closed, "m", kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	add("SyncGroup of a denied group", sync, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode })
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = closed, "m"
	add("Heartbeat of a denied group", hb, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode })
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group, lg.MemberID = closed, "m"
	lg.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	add("LeaveGroup of a denied group", lg, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode })

	commit := func(group, topic string) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, TopicID: ids[topic], Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
		return req
	}
	commitCode := func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }
	add("OffsetCommit to a denied group", commit(closed, "open"), groupDenied, commitCode)
	add("OffsetCommit of a denied topic", commit("open", closed), topicDenied, commitCode)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = closed
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: closed}}
	add("OffsetFetch of a denied group", of, groupDenied, func(r kmsg.Response) int16 {
		resp := r.(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) > 0 {
			return resp.Groups[0].ErrorCode
		}
		return resp.ErrorCode
	})
	ofTopic := kmsg.NewPtrOffsetFetchRequest()
	ofTopic.Group = "open"
	ofTopic.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: closed, Partitions: []int32{0}}}
	ofTopic.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "open", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: closed, TopicID: ids[closed], Partitions: []int32{0}}}}}
	add("OffsetFetch of a denied topic", ofTopic, topicDenied, func(r kmsg.Response) int16 {
		resp := r.(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) > 0 {
			return resp.Groups[0].Topics[0].Partitions[0].ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	})

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{closed}
	add("DescribeGroups of a denied group", dg, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode })
	delg := kmsg.NewPtrDeleteGroupsRequest()
	delg.Groups = []string{closed}
	add("DeleteGroups of a denied group", delg, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode })
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = closed
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "open", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	add("OffsetDelete of a denied group", od, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode })
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberID, cgh.RebalanceTimeoutMillis, cgh.SubscribedTopicNames = closed, "m000000000000000000000", 10000, []string{"open"}
	add("ConsumerGroupHeartbeat of a denied group", cgh, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode })
	cghTopic := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cghTopic.Group, cghTopic.MemberID, cghTopic.RebalanceTimeoutMillis, cghTopic.SubscribedTopicNames = "open", "m000000000000000000000", 10000, []string{"open", closed}
	add("ConsumerGroupHeartbeat subscribing to a denied topic", cghTopic, topicDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	})
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{closed}
	add("ConsumerGroupDescribe of a denied group", cgd, groupDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode
	})
	streamsJoin := func(group string, sources []string) *kmsg.StreamsGroupHeartbeatRequest {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.ProcessID = group, "m000000000000000000000", 10000, kmsg.StringPtr("p")
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		st.SubtopologyID, st.SourceTopics, st.SourceTopicRegex = "0", sources, []string{}
		req.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{Subtopologies: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}}
		return req
	}
	add("StreamsGroupHeartbeat of a denied group", streamsJoin(closed, []string{"open"}), groupDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.StreamsGroupHeartbeatResponse).ErrorCode
	})
	add("StreamsGroupHeartbeat of a topology reading a denied topic", streamsJoin("open", []string{"open", closed}), topicDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.StreamsGroupHeartbeatResponse).ErrorCode
	})
	sgd := kmsg.NewPtrStreamsGroupDescribeRequest()
	sgd.Groups = []string{closed}
	add("StreamsGroupDescribe of a denied group", sgd, groupDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.StreamsGroupDescribeResponse).Groups[0].ErrorCode
	})

	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = &closed, 10000, -1, -1
	add("InitProducerId of a denied transactional id", init, txnDenied, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode })
	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	apt.TransactionalID, apt.ProducerID = closed, 5
	apt.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "open", Partitions: []int32{0}}}
	add("AddPartitionsToTxn of a denied transactional id", apt, txnDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
	})
	aot := kmsg.NewPtrAddOffsetsToTxnRequest()
	aot.TransactionalID, aot.ProducerID, aot.Group = closed, 5, "open"
	add("AddOffsetsToTxn of a denied transactional id", aot, txnDenied, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode })
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID = closed, 5
	add("EndTxn of a denied transactional id", end, txnDenied, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode })
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.Generation = closed, "open", 5, -1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "open", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}}}}
	add("TxnOffsetCommit of a denied transactional id", toc, txnDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	})
	dtx := kmsg.NewPtrDescribeTransactionsRequest()
	dtx.TransactionalIDs = []string{closed}
	add("DescribeTransactions of a denied transactional id", dtx, txnDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
	})
	// DELETE on the cluster (allowed: no ACL on it) lets anyone delete
	// any topic; last, as it deletes the topic.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 5000
	dt.TopicNames = []string{closed}
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &closed}}
	add("DeleteTopics with DELETE on the cluster (no ACL on it)", dt, 0, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode })

	return cases
}

func aclDenyCluster(ctx context.Context, e *Env) error {
	cl, err := openACLNode(ctx, e, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	b := cl.Broker(1)
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral,
		"User:ANONYMOUS", "*", kmsg.ACLOperationClusterAction, kmsg.ACLPermissionTypeAllow)}
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Results[0].ErrorCode != 0 {
		return fmt.Errorf("creating the cluster ACL: %v %+v", err, resp)
	}
	// The ACL applies once DescribeAcls (DESCRIBE on the cluster) is
	// refused.
	if err := until(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		d := kmsg.NewPtrDescribeACLsRequest()
		d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp, err := d.RequestWith(ctx, cl)
		return err == nil && resp.ErrorCode == kerr.ClusterAuthorizationFailed.Code, nil
	}); err != nil {
		return fmt.Errorf("waiting for the cluster ACL to apply: %w", err)
	}
	const denied = 31 // CLUSTER_AUTHORIZATION_FAILED
	var cases []aclCase
	add := func(name string, req kmsg.Request, want int16, code func(kmsg.Response) int16) {
		cases = append(cases, aclCase{name: name, req: req, code: code, want: want})
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 30000
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "created", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	add("CreateTopics with CREATE on the topic only", ct, 0, func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode })
	el := kmsg.NewPtrElectLeadersRequest()
	el.TimeoutMillis = 5000
	add("ElectLeaders", el, denied, func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode })
	dq := kmsg.NewPtrDescribeQuorumRequest()
	add("DescribeQuorum", dq, denied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeQuorumResponse).ErrorCode })
	uf := kmsg.NewPtrUpdateFeaturesRequest()
	uf.TimeoutMillis = 5000
	add("UpdateFeatures", uf, denied, func(r kmsg.Response) int16 { return r.(*kmsg.UpdateFeaturesResponse).ErrorCode })
	lpr := kmsg.NewPtrListPartitionReassignmentsRequest()
	lpr.TimeoutMillis = 5000
	add("ListPartitionReassignments", lpr, denied, func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode })
	apr := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	apr.TimeoutMillis = 5000
	add("AlterPartitionReassignments", apr, denied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode })
	ub := kmsg.NewPtrUnregisterBrokerRequest()
	ub.BrokerID = 7
	add("UnregisterBroker", ub, denied, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode })
	ld := kmsg.NewPtrDescribeLogDirsRequest()
	add("DescribeLogDirs", ld, denied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode })
	ard := kmsg.NewPtrAlterReplicaLogDirsRequest()
	ard.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{{Dir: "/nowhere", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "created", Partitions: []int32{0}}}}}
	add("AlterReplicaLogDirs", ard, denied, func(r kmsg.Response) int16 {
		return r.(*kmsg.AlterReplicaLogDirsResponse).Topics[0].Partitions[0].ErrorCode
	})
	dcb := kmsg.NewPtrDescribeConfigsRequest()
	dcb.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
	add("DescribeConfigs of the broker", dcb, denied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode })
	iab := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iab.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "log.cleaner.threads", Value: kmsg.StringPtr("1")}}}}
	add("IncrementalAlterConfigs of the brokers", iab, denied, func(r kmsg.Response) int16 {
		return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	})
	lcr := kmsg.NewPtrListConfigResourcesRequest()
	add("ListConfigResources", lcr, denied, func(r kmsg.Response) int16 { return r.(*kmsg.ListConfigResourcesResponse).ErrorCode })
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "User:a", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)}
	add("CreateAcls", ca, denied, func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode })
	dq2 := kmsg.NewPtrDescribeClientQuotasRequest()
	add("DescribeClientQuotas", dq2, denied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClientQuotasResponse).ErrorCode })
	aq := kmsg.NewPtrAlterClientQuotasRequest()
	aq.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("alice")}},
		Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}}}}
	add("AlterClientQuotas", aq, denied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode })
	ds := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	// Named users: Kafka does not answer a refused describe-all (null
	// users) at all, its getErrorResponse failing on the null list.
	ds.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "alice"}}
	add("DescribeUserScramCredentials", ds, denied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode })
	as := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	as.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 1}}
	add("AlterUserScramCredentials", as, denied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode })
	// An idempotent producer needs IDEMPOTENT_WRITE on the cluster or
	// WRITE on some topic, which no ACL refuses.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.ProducerID, ip.ProducerEpoch = -1, -1
	add("InitProducerId (idempotent) with WRITE on topics", ip, 0, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode })
	dcl := kmsg.NewPtrDescribeClusterRequest()
	dcl.IncludeClusterAuthorizedOperations, dcl.EndpointType = true, 1
	add("DescribeCluster's authorized operations without DESCRIBE", dcl, 0, func(r kmsg.Response) int16 {
		return int16(r.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations)
	})
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 30000
	created := "created"
	dt.TopicNames = []string{created}
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &created}}
	add("DeleteTopics with DELETE on the topic only", dt, 0, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode })

	problems := runACLCases(ctx, b, cases)
	e.Notef("%d requests", len(cases))
	return reportProblems(e, problems)
}

// aclMTLSTwoUsers tells principals apart by their client certificates: an
// mTLS listener maps each certificate's subject to User:<DN>, and the ACLs
// granted to one do not serve the other. The tools that set things up use
// the PLAINTEXT listener as User:ANONYMOUS, a super user.
func aclMTLSTwoUsers(ctx context.Context, e *Env) error {
	n, pki, _, err := tlsNode(ctx, e, []NodeListener{{Name: "SSL", Protocol: "SSL"}}, func(p *PKI, server *KeyPair) map[string]string {
		props := p.ListenerSSL("SSL", server)
		props["listener.name.ssl.ssl.client.auth"] = "required"
		props["authorizer.class.name"] = standardAuthorizer
		props["super.users"] = "User:ANONYMOUS"
		return props
	})
	if err != nil {
		return err
	}
	const aliceDN, bobDN = "CN=alice,OU=clients,O=Gregor", "CN=bob,OU=clients,O=Gregor"
	cfgs := map[string]string{}
	for name, dn := range map[string]string{"alice": aliceDN, "bob": bobDN} {
		kp, err := pki.Client(name, dn)
		if err != nil {
			return err
		}
		if cfgs[name], err = e.ClientProperties(name+".properties", pki.ClientSSL(kp)); err != nil {
			return err
		}
	}
	topic, group := e.Name("mtls-acl"), e.Name("mtls-acl-group")
	lines := []string{"one", "two", "three"}
	if err := produceLinesOn(ctx, e, n, topic, lines); err != nil {
		return err
	}
	if _, err := acls(ctx, e, n, "--add", "--allow-principal", "User:"+aliceDN, "--operation", "Read", "--topic", topic, "--group", group); err != nil {
		return err
	}
	out, err := e.KafkaOn(ctx, n.Addr("SSL"), "", mainConsumer, "--command-config", cfgs["alice"], "--topic", topic, "--group", group,
		"--from-beginning", "--max-messages", fmt.Sprint(len(lines)), "--timeout-ms", "30000")
	if err != nil {
		return fmt.Errorf("alice's console consumer: %w: %s", err, out.Tail())
	}
	if got := strings.Fields(out.Stdout); strings.Join(got, ",") != strings.Join(lines, ",") {
		return fmt.Errorf("alice read %q, want %q: %s", got, lines, out.Tail())
	}
	// Bob reads the partition directly (no group), so that the topic is
	// what refuses him.
	out, _ = e.KafkaOn(ctx, n.Addr("SSL"), "", mainConsumer, "--command-config", cfgs["bob"], "--topic", topic,
		"--partition", "0", "--offset", "earliest", "--max-messages", fmt.Sprint(len(lines)), "--timeout-ms", "30000")
	return deniedConsumer(out, "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: ["+topic+"]")
}

// scramUsersOn gives each user a SCRAM-SHA-256 credential (password
// <user>-secret) with kafka-configs on n's PLAINTEXT listener and returns
// their client configurations by user.
func scramUsersOn(ctx context.Context, e *Env, n *SingleNode, users ...string) (map[string]string, error) {
	cfgs := map[string]string{}
	for _, user := range users {
		out, err := e.KafkaOn(ctx, n.Bootstrap(), "", mainConfigs, "--alter", "--entity-type", "users", "--entity-name", user,
			"--add-config", "SCRAM-SHA-256=[password="+user+"-secret]")
		if err != nil || !strings.Contains(out.Stdout, "Completed updating config for user "+user+".") {
			return nil, fmt.Errorf("kafka-configs --add-config SCRAM-SHA-256 for %s: %v: %s", user, err, out.Tail())
		}
		if cfgs[user], err = saslClientConfig(e, user+".properties", "SCRAM-SHA-256", user, user+"-secret"); err != nil {
			return nil, err
		}
	}
	return cfgs, nil
}

func aclSASLTwoUsers(ctx context.Context, e *Env) error {
	// The stock tools on PLAINTEXT (User:ANONYMOUS) administer the node.
	n, err := saslNode(ctx, e, []string{"SCRAM-SHA-256"}, map[string]string{
		"authorizer.class.name": standardAuthorizer,
		"super.users":           "User:ANONYMOUS",
	})
	if err != nil {
		return err
	}
	cfgs, err := scramUsersOn(ctx, e, n, "alice", "bob")
	if err != nil {
		return err
	}
	topic, other, group := e.Name("sasl-acl"), e.Name("sasl-acl-other"), e.Name("sasl-acl-group")
	lines := []string{"one", "two", "three"}
	for _, t := range []string{topic, other} {
		if err := produceLinesOn(ctx, e, n, t, lines); err != nil {
			return err
		}
	}
	if _, err := acls(ctx, e, n, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic, "--group", group); err != nil {
		return err
	}
	if _, err := acls(ctx, e, n, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", topic); err != nil {
		return err
	}
	consumeAs := func(user, topic string, extra ...string) Output {
		args := append([]string{"--command-config", cfgs[user], "--topic", topic, "--max-messages", fmt.Sprint(len(lines)), "--timeout-ms", "30000"}, extra...)
		out, _ := e.KafkaOn(ctx, n.Addr("SASL"), "", mainConsumer, args...)
		return out
	}
	out := consumeAs("alice", topic, "--group", group, "--from-beginning")
	if got := strings.Fields(out.Stdout); strings.Join(got, ",") != strings.Join(lines, ",") {
		return fmt.Errorf("alice read %q, want %q: %s", got, lines, out.Tail())
	}
	out = consumeAs("bob", topic, "--group", group, "--from-beginning")
	if err := deniedConsumer(out, "org.apache.kafka.common.errors.GroupAuthorizationException: Not authorized to access group: "+group); err != nil {
		return fmt.Errorf("bob in alice's group: %w", err)
	}
	// Without a group, so that the topic is what refuses him.
	out = consumeAs("bob", other, "--partition", "0", "--offset", "earliest")
	if err := deniedConsumer(out, "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: ["+other+"]"); err != nil {
		return fmt.Errorf("bob on a topic he may not read: %w", err)
	}
	return nil
}
