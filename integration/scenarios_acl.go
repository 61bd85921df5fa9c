package integration

// Scenarios of ACLs and StandardAuthorizer (issue 12). Each starts its own
// single node (Env.StartNode) of the target's flavor with the authorizer
// configured, so that the same scenario runs against Apache Kafka 4.3.1
// and Gregor. The clients connect on PLAINTEXT, as User:ANONYMOUS.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

const (
	mainACLs           = "org.apache.kafka.tools.AclCommand"
	standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
)

func aclScenarios() []Scenario {
	return []Scenario{
		{Name: "acl/kafka-acls", Doc: "kafka-acls --add, --list (all, by resource, by principal), --remove on a node with StandardAuthorizer: the tool's exact output", Timeout: 5 * time.Minute, Run: aclKafkaACLs},
		{Name: "acl/consumer-denied-topic", Doc: "a DENY READ for User:ANONYMOUS on a topic: the console consumer fails with TopicAuthorizationException (TOPIC_AUTHORIZATION_FAILED) and reads nothing; after --remove it reads everything", Timeout: 5 * time.Minute, Run: aclConsumerDeniedTopic},
		{Name: "acl/consumer-denied-group", Doc: "a DENY READ for User:ANONYMOUS on a group: the console consumer in that group fails with GroupAuthorizationException (GROUP_AUTHORIZATION_FAILED); another group reads", Timeout: 5 * time.Minute, Run: aclConsumerDeniedGroup},
		{Name: "acl/no-authorizer", Doc: "kafka-acls --list on the target (no authorizer configured) fails with SecurityDisabledException: No Authorizer is configured on the broker", Run: aclNoAuthorizer},
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
