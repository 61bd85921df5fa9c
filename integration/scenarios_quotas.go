package integration

// Client quotas (issue 12): kafka-configs on users, clients, their
// combination, their defaults and ips, and clients throttled to the
// quotas they are given.
//
// The target is shared with other scenarios, so every quota set here is
// on entities named for this run, and defaults are set to rates nobody
// reaches and deleted again before the scenario ends.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

func quotaScenarios() []Scenario {
	return []Scenario{
		{Name: "cli/configs-quotas", Doc: "kafka-configs --alter/--describe/--delete-config of client quotas for clients, users+clients, user and client defaults and ips, with Kafka's output and its refusals", Run: cliConfigsQuotas},
		{Name: "cli/configs-quotas-users", Doc: "kafka-configs --describe of a user's quotas (the tool also asks DescribeUserScramCredentials)", Run: cliConfigsQuotasUsers},
	}
}

// configsExpect runs kafka-configs and checks that its stdout is exactly
// the given lines, in any order (entities print in the order of a Java
// hash map of them). A --describe is asked again for up to 30 s: a
// broker's metadata follows the controller's commit.
func configsExpect(ctx context.Context, e *Env, want []string, args ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := configsExpectOnce(ctx, e, want, args...)
		if err == nil || args[0] != "--describe" || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

func configsExpectOnce(ctx context.Context, e *Env, want []string, args ...string) error {
	out, err := e.Kafka(ctx, mainConfigs, args...)
	if err != nil {
		return fmt.Errorf("kafka-configs %s: %w", strings.Join(args, " "), err)
	}
	var got []string
	for _, l := range strings.Split(out.Stdout, "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			got = append(got, l)
		}
	}
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		return fmt.Errorf("kafka-configs %s printed\n%s\nwant\n%s", strings.Join(args, " "), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return nil
}

// configsRefused runs kafka-configs, which must fail printing msg.
func configsRefused(ctx context.Context, e *Env, msg string, args ...string) error {
	out, err := e.Kafka(ctx, mainConfigs, args...)
	if err == nil {
		return fmt.Errorf("kafka-configs %s succeeded, want it refused with %q", strings.Join(args, " "), msg)
	}
	if !strings.Contains(out.Stdout+out.Stderr, msg) {
		return fmt.Errorf("kafka-configs %s: want %q in its output: %s", strings.Join(args, " "), msg, out.Tail())
	}
	return nil
}

func cliConfigsQuotas(ctx context.Context, e *Env) error {
	client := e.Name("quota-client")
	user := e.Name("quota-user")
	steps := []struct {
		want []string
		args []string
	}{
		{[]string{"Completed updating config for client " + client + "."},
			[]string{"--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"}},
		{[]string{"Quota configs for client-id '" + client + "' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"},
			[]string{"--describe", "--entity-type", "clients", "--entity-name", client}},
		{[]string{"Completed updating config for user " + user + "."},
			[]string{"--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client, "--add-config", "request_percentage=50,controller_mutation_rate=10"}},
		{[]string{"Quota configs for user-principal '" + user + "', client-id '" + client + "' are controller_mutation_rate=10.0, request_percentage=50.0"},
			[]string{"--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client}},
		{[]string{"Quota configs for user-principal '" + user + "', client-id '" + client + "' are controller_mutation_rate=10.0, request_percentage=50.0"},
			[]string{"--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients"}},
		// Defaults: rates no client of another scenario reaches.
		{[]string{"Completed updating default config for users in the cluster."},
			[]string{"--alter", "--entity-type", "users", "--entity-default", "--add-config", "producer_byte_rate=1000000000000"}},
		{[]string{"Completed updating default config for clients in the cluster."},
			[]string{"--alter", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=1000000000000"}},
		{[]string{"Completed updating default config for users in the cluster."},
			[]string{"--alter", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--add-config", "request_percentage=100000"}},
		{[]string{"Quota configs for the default user-principal are producer_byte_rate=1.0E12"},
			[]string{"--describe", "--entity-type", "users", "--entity-default"}},
		{[]string{"Quota configs for the default client-id are consumer_byte_rate=1.0E12"},
			[]string{"--describe", "--entity-type", "clients", "--entity-default"}},
		{[]string{"Quota configs for the default user-principal, the default client-id are request_percentage=100000.0"},
			[]string{"--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default"}},
		{[]string{
			"Quota configs for the default client-id are consumer_byte_rate=1.0E12",
			"Quota configs for client-id '" + client + "' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0",
		}, []string{"--describe", "--entity-type", "clients"}},
		{[]string{"Completed updating config for ip 127.0.0.1."},
			[]string{"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1", "--add-config", "connection_creation_rate=100000"}},
		{[]string{"Quota configs for ip '127.0.0.1' are connection_creation_rate=100000.0"},
			[]string{"--describe", "--entity-type", "ips", "--entity-name", "127.0.0.1"}},
		// --delete-config, one key and then the last.
		{[]string{"Completed updating config for client " + client + "."},
			[]string{"--alter", "--entity-type", "clients", "--entity-name", client, "--delete-config", "producer_byte_rate"}},
		{[]string{"Quota configs for client-id '" + client + "' are consumer_byte_rate=2048.0"},
			[]string{"--describe", "--entity-type", "clients", "--entity-name", client}},
		{[]string{"Completed updating config for client " + client + "."},
			[]string{"--alter", "--entity-type", "clients", "--entity-name", client, "--delete-config", "consumer_byte_rate"}},
		{nil, []string{"--describe", "--entity-type", "clients", "--entity-name", client}},
	}
	for _, s := range steps {
		if err := configsExpect(ctx, e, s.want, s.args...); err != nil {
			return err
		}
	}
	// The broker's refusals, with Kafka's messages.
	for _, r := range []struct{ value, msg string }{
		{"producer_byte_rate=1.5", "InvalidRequestException: producer_byte_rate cannot be a fractional value."},
		{"producer_byte_rate=0", "InvalidRequestException: Quota producer_byte_rate must be greater than 0"},
		{"request_percentage=-1", "InvalidRequestException: Quota request_percentage must be greater than 0"},
		{"producer_byte_rate=1e30", "InvalidRequestException: Proposed value for producer_byte_rate is too large for a LONG."},
	} {
		if err := configsRefused(ctx, e, r.msg, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", r.value); err != nil {
			return err
		}
	}
	if err := configsRefused(ctx, e, "InvalidRequestException: connection_creation_rate cannot be a fractional value.",
		"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1", "--add-config", "connection_creation_rate=2.5"); err != nil {
		return err
	}
	// Nothing refused was stored.
	if err := configsExpect(ctx, e, nil, "--describe", "--entity-type", "clients", "--entity-name", client); err != nil {
		return err
	}
	// Clean up: every default and the rest.
	for _, args := range [][]string{
		{"--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client, "--delete-config", "request_percentage,controller_mutation_rate"},
		{"--entity-type", "users", "--entity-default", "--delete-config", "producer_byte_rate"},
		{"--entity-type", "clients", "--entity-default", "--delete-config", "consumer_byte_rate"},
		{"--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--delete-config", "request_percentage"},
		{"--entity-type", "ips", "--entity-name", "127.0.0.1", "--delete-config", "connection_creation_rate"},
	} {
		if _, err := e.Kafka(ctx, mainConfigs, append([]string{"--alter"}, args...)...); err != nil {
			return fmt.Errorf("cleaning up: %w", err)
		}
	}
	return configsExpect(ctx, e, nil, "--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default")
}

// cliConfigsQuotasUsers describes one user's quotas: kafka-configs prints
// them and then asks for the user's SCRAM credentials
// (DescribeUserScramCredentials), printing nothing for a user without any.
func cliConfigsQuotasUsers(ctx context.Context, e *Env) error {
	user := e.Name("quota-user")
	if err := configsExpect(ctx, e, []string{"Completed updating config for user " + user + "."},
		"--alter", "--entity-type", "users", "--entity-name", user, "--add-config", "producer_byte_rate=4096"); err != nil {
		return err
	}
	if err := configsExpect(ctx, e, []string{"Quota configs for user-principal '" + user + "' are producer_byte_rate=4096.0"},
		"--describe", "--entity-type", "users", "--entity-name", user); err != nil {
		return err
	}
	if err := configsExpect(ctx, e, []string{"Completed updating config for user " + user + "."},
		"--alter", "--entity-type", "users", "--entity-name", user, "--delete-config", "producer_byte_rate"); err != nil {
		return err
	}
	return configsExpect(ctx, e, nil, "--describe", "--entity-type", "users", "--entity-name", user)
}
