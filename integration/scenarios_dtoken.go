package integration

// Delegation token scenarios (KIP-48): kafka-delegation-tokens
// creates, describes, renews and expires tokens over a SCRAM listener, and
// the Java console clients authenticate with a token (ScramLoginModule
// with tokenauth=true). Each starts its own node with a token secret, so
// that it runs the same against Apache Kafka 4.3.1 and Gregor.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

const mainDelegationTokens = "org.apache.kafka.tools.DelegationTokenCommand"

func delegationTokenScenarios() []Scenario {
	return []Scenario{
		{Name: "sasl/delegation-tokens", Doc: "delegation.token.secret.key on a SASL_PLAINTEXT SCRAM node: kafka-delegation-tokens --create (renewer alice), --describe (by owner; none for an empty owner list), --renew by the renewer, --expire; console producer and consumer authenticate with the token (tokenauth=true, SCRAM-SHA-256 and -512); token connections may not create tokens; a stranger may not renew; the expired token is refused; a token past its max lifetime is swept by the controller", OwnNodes: true, Timeout: 6 * time.Minute, Run: delegationTokensCLI},
		{Name: "acl/delegation-tokens", Doc: "StandardAuthorizer with delegation tokens: kafka-delegation-tokens --create --owner-principal for another user needs CREATE_TOKENS on that user (Delegation Token authorization failed otherwise); --describe shows a token to its owner and requester, to DESCRIBE_TOKENS on the owner (kafka-acls --user-principal) and to DESCRIBE on the token (--delegation-token), to no one else", OwnNodes: true, Timeout: 6 * time.Minute, Run: delegationTokenACLs},
	}
}

// tokenRow is one token as kafka-delegation-tokens prints it.
type tokenRow struct {
	id, hmac, owner, requester, renewers string
	issue, expiry, max                   string
}

// tokenRows parses the rows under the TOKENID header of the tool's
// output: whitespace-separated columns, the renewers a bracketed list
// without spaces for at most one renewer.
func tokenRows(out string) ([]tokenRow, error) {
	_, table, ok := strings.Cut(out, "TOKENID")
	if !ok {
		return nil, fmt.Errorf("no TOKENID header in %q", truncate(out, 400))
	}
	header, rows, _ := strings.Cut(table, "\n")
	if got := strings.Fields("TOKENID" + header); strings.Join(got, " ") != "TOKENID HMAC OWNER REQUESTER RENEWERS ISSUEDATE EXPIRYDATE MAXDATE" {
		return nil, fmt.Errorf("header %q", got)
	}
	date := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$`)
	var out2 []tokenRow
	for _, l := range strings.Split(rows, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) != 8 {
			return nil, fmt.Errorf("token row %q", l)
		}
		for _, d := range f[5:] {
			if !date.MatchString(d) {
				return nil, fmt.Errorf("date %q in row %q", d, l)
			}
		}
		out2 = append(out2, tokenRow{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]})
	}
	return out2, nil
}

// toolDate is a timestamp as the tool prints it (yyyy-MM-dd'T'HH:mm in
// the JVM's zone, which is this process's).
func toolDate(t time.Time) string { return t.Local().Format("2006-01-02T15:04") }

// nearDate reports whether a printed date is within a minute of t.
func nearDate(printed string, t time.Time) bool {
	return printed == toolDate(t) || printed == toolDate(t.Add(-time.Minute)) || printed == toolDate(t.Add(time.Minute))
}

// tokenClientProps are a Java client's properties authenticating with a
// delegation token over SCRAM.
func tokenClientProps(mechanism, tokenID, hmac string) map[string]string {
	return map[string]string{
		"security.protocol": "SASL_PLAINTEXT",
		"sasl.mechanism":    mechanism,
		"sasl.jaas.config":  fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s" tokenauth=true;`, tokenID, hmac),
	}
}

func delegationTokensCLI(ctx context.Context, e *Env) error {
	n, err := saslNode(ctx, e, []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, map[string]string{
		"delegation.token.secret.key":               "compat-token-secret",
		"delegation.token.expiry.check.interval.ms": "2000",
	})
	if err != nil {
		return err
	}
	addr := n.Addr("SASL")
	admin, err := saslClientConfig(e, "admin.properties", "SCRAM-SHA-512", saslAdmin, saslAdminPassword)
	if err != nil {
		return err
	}
	if out, err := e.KafkaOn(ctx, addr, "", mainConfigs, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", saslUser,
		"--add-config", "SCRAM-SHA-256=[password="+saslUserPassword+"]"); err != nil || !strings.Contains(out.Stdout, "Completed updating config for user "+saslUser+".") {
		return fmt.Errorf("kafka-configs --add-config for %s: %v: %s", saslUser, err, out.Tail())
	}
	alice, err := saslClientConfig(e, "alice.properties", "SCRAM-SHA-256", saslUser, saslUserPassword)
	if err != nil {
		return err
	}
	tokens := func(config string, args ...string) (Output, error) {
		return e.KafkaOn(ctx, addr, "", mainDelegationTokens, append([]string{"--command-config", config}, args...)...)
	}

	// Create: the admin owns and requested it, alice may renew it.
	before := time.Now()
	out, err := tokens(admin, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:"+saslUser)
	if err != nil {
		return fmt.Errorf("kafka-delegation-tokens --create: %w: %s", err, out.Tail())
	}
	if !strings.Contains(out.Stdout, "Calling create token operation with renewers :[User:alice] , max-life-time-period :-1") {
		return fmt.Errorf("--create printed no call line: %s", truncate(out.Stdout, 400))
	}
	rows, err := tokenRows(out.Stdout)
	if err != nil || len(rows) != 1 {
		return fmt.Errorf("--create table: %v: %s", err, truncate(out.Stdout, 600))
	}
	tok := rows[0]
	if !strings.Contains(out.Stdout, "Created delegation token with tokenId : "+tok.id) {
		return fmt.Errorf("--create printed no token id line: %s", truncate(out.Stdout, 400))
	}
	if tok.owner != "User:admin" || tok.requester != "User:admin" || tok.renewers != "[User:alice]" ||
		!nearDate(tok.issue, before) || !nearDate(tok.expiry, before.Add(24*time.Hour)) || !nearDate(tok.max, before.Add(7*24*time.Hour)) {
		return fmt.Errorf("--create printed %+v (issued about %s)", tok, toolDate(before))
	}

	// Console clients authenticate with the token, over both mechanisms.
	token256, err := e.ClientProperties("token-256.properties", tokenClientProps("SCRAM-SHA-256", tok.id, tok.hmac))
	if err != nil {
		return err
	}
	token512, err := e.ClientProperties("token-512.properties", tokenClientProps("SCRAM-SHA-512", tok.id, tok.hmac))
	if err != nil {
		return err
	}
	if err := consoleRoundTripAs(ctx, e, addr, e.Name("dtoken"), admin, token256, token512); err != nil {
		return fmt.Errorf("with the token (SCRAM-SHA-256, then SCRAM-SHA-512): %w", err)
	}

	// A connection authenticated with a token manages no tokens.
	const notAllowed = "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."
	if out, err := tokens(token256, "--create", "--max-life-time-period", "-1"); err == nil || !strings.Contains(out.Stderr+out.Stdout, notAllowed) {
		return fmt.Errorf("--create over a token connection: %v: %s", err, out.Tail())
	}

	// Describe by owner and by renewer; an empty owner list (no
	// --owner-principal) describes nothing, as Kafka answers it.
	for _, tc := range []struct{ config, owner, call string }{
		{admin, "User:admin", "Calling describe token operation for owners: [User:admin]"},
		{alice, "User:alice", "Calling describe token operation for owners: [User:alice]"},
	} {
		out, err := tokens(tc.config, "--describe", "--owner-principal", tc.owner)
		if err != nil || !strings.Contains(out.Stdout, tc.call) || !strings.Contains(out.Stdout, "Total number of tokens : 1") {
			return fmt.Errorf("--describe --owner-principal %s: %v: %s", tc.owner, err, truncate(out.Stdout+out.Stderr, 600))
		}
		got, err := tokenRows(out.Stdout)
		if err != nil || len(got) != 1 || got[0] != tok {
			return fmt.Errorf("--describe --owner-principal %s: %+v, %v, want %+v", tc.owner, got, err, tok)
		}
	}
	out, err = tokens(admin, "--describe")
	if err != nil || !strings.Contains(out.Stdout, "Calling describe token operation for current user.") || !strings.Contains(out.Stdout, "Total number of tokens : 0") {
		return fmt.Errorf("--describe without owners: %v: %s", err, truncate(out.Stdout+out.Stderr, 400))
	}

	// Renew by the renewer, for an hour.
	renewedAt := time.Now()
	out, err = tokens(alice, "--renew", "--hmac", tok.hmac, "--renew-time-period", "3600000")
	if err != nil || !strings.Contains(out.Stdout, "Calling renew token operation with hmac :"+tok.hmac+" , renew-time-period :3600000") {
		return fmt.Errorf("--renew by alice: %v: %s", err, out.Tail())
	}
	newExpiry, ok := strings.CutPrefix(grepLines(out.Stdout, "Completed renew operation. New expiry date : "), "Completed renew operation. New expiry date : ")
	if !ok || !nearDate(strings.TrimSpace(newExpiry), renewedAt.Add(time.Hour)) {
		return fmt.Errorf("--renew printed %q, want about %s", out.Stdout, toolDate(renewedAt.Add(time.Hour)))
	}
	// A second token without renewers: alice may not renew it.
	out, err = tokens(admin, "--create", "--max-life-time-period", "3600000")
	if err != nil {
		return fmt.Errorf("second --create: %w: %s", err, out.Tail())
	}
	rows, err = tokenRows(out.Stdout)
	if err != nil || len(rows) != 1 || rows[0].renewers != "[]" || !nearDate(rows[0].max, time.Now().Add(time.Hour)) {
		return fmt.Errorf("second --create: %+v %v", rows, err)
	}
	other := rows[0]
	if out, err := tokens(alice, "--renew", "--hmac", other.hmac, "--renew-time-period", "-1"); err == nil || !strings.Contains(out.Stderr+out.Stdout, "Specified Principal is not valid Owner/Renewer.") {
		return fmt.Errorf("--renew by a stranger: %v: %s", err, out.Tail())
	}

	// Expire the first token at once: it leaves the describe list and
	// authenticates no one.
	expiredAt := time.Now()
	out, err = tokens(admin, "--expire", "--hmac", tok.hmac, "--expiry-time-period", "-1")
	if err != nil || !strings.Contains(out.Stdout, "Calling expire token operation with hmac :"+tok.hmac+" , expire-time-period :-1") {
		return fmt.Errorf("--expire: %v: %s", err, out.Tail())
	}
	expiry, ok := strings.CutPrefix(grepLines(out.Stdout, "Completed expire operation. New expiry date : "), "Completed expire operation. New expiry date : ")
	if !ok || !nearDate(strings.TrimSpace(expiry), expiredAt) {
		return fmt.Errorf("--expire printed %q", out.Stdout)
	}
	if out, err := tokens(admin, "--renew", "--hmac", tok.hmac, "--renew-time-period", "-1"); err == nil || !strings.Contains(out.Stderr+out.Stdout, "Delegation Token is not found on server.") {
		return fmt.Errorf("--renew of an expired token: %v: %s", err, out.Tail())
	}
	out, err = tokens(admin, "--describe", "--owner-principal", "User:admin")
	if err != nil || !strings.Contains(out.Stdout, "Total number of tokens : 1") {
		return fmt.Errorf("--describe after --expire: %v: %s", err, truncate(out.Stdout, 600))
	}
	if got, err := tokenRows(out.Stdout); err != nil || len(got) != 1 || got[0].id != other.id {
		return fmt.Errorf("--describe after --expire: %+v %v", got, err)
	}
	if err := expectAuthFailure(ctx, e, addr, token256, invalidCredentials("SCRAM-SHA-256")); err != nil {
		return fmt.Errorf("a client with the expired token: %w", err)
	}

	// A token whose maximum lifetime passes is removed by the controller's
	// sweep (every delegation.token.expiry.check.interval.ms, 2 s here).
	out, err = tokens(admin, "--create", "--max-life-time-period", "1000")
	if err != nil {
		return fmt.Errorf("--create of a one-second token: %w: %s", err, out.Tail())
	}
	if rows, err = tokenRows(out.Stdout); err != nil || len(rows) != 1 {
		return fmt.Errorf("--create of a one-second token: %+v %v", rows, err)
	}
	short := rows[0].id
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := tokens(admin, "--describe", "--owner-principal", "User:admin")
		if err != nil {
			return fmt.Errorf("--describe while the sweep runs: %w: %s", err, out.Tail())
		}
		got, err := tokenRows(out.Stdout)
		if err != nil {
			return err
		}
		if len(got) == 1 && got[0].id == other.id {
			return nil
		}
		if len(got) != 2 || time.Now().After(deadline) {
			return fmt.Errorf("the expired token %s was not swept: %+v", short, got)
		}
		time.Sleep(time.Second)
	}
}

// delegationTokenACLs: with StandardAuthorizer, creating a token for
// another owner needs CREATE_TOKENS on that user (KIP-373), and a token is
// described to its owner and renewers, and to principals with
// DESCRIBE_TOKENS on its owner or DESCRIBE on the token.
func delegationTokenACLs(ctx context.Context, e *Env) error {
	// The stock tools on PLAINTEXT (User:ANONYMOUS) administer the node.
	n, err := saslNode(ctx, e, []string{"SCRAM-SHA-256"}, map[string]string{
		"authorizer.class.name":       standardAuthorizer,
		"super.users":                 "User:ANONYMOUS",
		"delegation.token.secret.key": "compat-token-secret",
	})
	if err != nil {
		return err
	}
	addr := n.Addr("SASL")
	cfgs, err := scramUsersOn(ctx, e, n, "alice", "bob", "carol", "dave")
	if err != nil {
		return err
	}
	for _, add := range [][]string{
		{"--allow-principal", "User:alice", "--operation", "CreateTokens", "--user-principal", "User:bob"},
		{"--allow-principal", "User:carol", "--operation", "DescribeTokens", "--user-principal", "User:bob"},
	} {
		if _, err := acls(ctx, e, n, append([]string{"--add"}, add...)...); err != nil {
			return err
		}
	}
	tokens := func(user string, args ...string) (Output, error) {
		return e.KafkaOn(ctx, addr, "", mainDelegationTokens, append([]string{"--command-config", cfgs[user]}, args...)...)
	}
	out, err := tokens("alice", "--create", "--max-life-time-period", "-1", "--owner-principal", "User:bob")
	if err != nil {
		return fmt.Errorf("--create for bob by alice: %w: %s", err, out.Tail())
	}
	rows, err := tokenRows(out.Stdout)
	if err != nil || len(rows) != 1 || rows[0].owner != "User:bob" || rows[0].requester != "User:alice" {
		return fmt.Errorf("--create for bob by alice printed %+v, %v", rows, err)
	}
	tok := rows[0]
	if out, err := tokens("carol", "--create", "--max-life-time-period", "-1", "--owner-principal", "User:bob"); err == nil || !strings.Contains(out.Stderr+out.Stdout, "Delegation Token authorization failed.") {
		return fmt.Errorf("--create for bob by carol: %v: %s", err, out.Tail())
	}
	describe := func(user string, want int) error {
		out, err := tokens(user, "--describe", "--owner-principal", "User:bob")
		if err != nil || !strings.Contains(out.Stdout, fmt.Sprintf("Total number of tokens : %d", want)) {
			return fmt.Errorf("--describe bob's tokens as %s (want %d): %v: %s", user, want, err, truncate(out.Stdout+out.Stderr, 500))
		}
		if want == 1 {
			if got, err := tokenRows(out.Stdout); err != nil || len(got) != 1 || got[0] != tok {
				return fmt.Errorf("--describe bob's tokens as %s: %+v, %v", user, got, err)
			}
		}
		return nil
	}
	// bob owns it, alice asked for it, carol may describe bob's tokens;
	// dave may not, until he may describe the token itself.
	for user, want := range map[string]int{"bob": 1, "alice": 1, "carol": 1, "dave": 0} {
		if err := describe(user, want); err != nil {
			return err
		}
	}
	if _, err := acls(ctx, e, n, "--add", "--allow-principal", "User:dave", "--operation", "Describe", "--delegation-token", tok.id); err != nil {
		return err
	}
	return describe("dave", 1)
}
